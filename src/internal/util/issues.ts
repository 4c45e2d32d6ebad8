/**
 * A Schema's parse issues as the texts a model and a user read (design: Input, Error text): tool
 * inputs and outputs, a typed final output. One place, so every such text reads the same.
 */
import { ParseResult } from "effect"

/** Every issue of a parse error, `path: message`, joined with "; " (tool inputs, a typed final output). */
export const formatIssues = (issue: ParseResult.ParseIssue): string =>
  withLiteralsJoined(
    ParseResult.ArrayFormatter.formatIssueSync(issue)
      // An optional field's schema is `X | undefined`: Effect reports the `undefined` branch too. Noise.
      .filter((issue) => !(issue._tag === "Type" && issue.message.startsWith("Expected undefined, actual")))
      .map((issue) => ({ path: formatPath(issue.path), message: issue.message }))
  ).map((issue) => `${issue.path}: ${issue.message}`).join("; ")

// Effect's message for one literal member of a union: `Expected "a", actual "c"` (a JSON string, a number, a boolean, null).
const literalMismatch = /^Expected ("(?:[^"\\]|\\.)*"|-?\d[\d.e+-]*n?|true|false|null), actual (.*)$/s

/**
 * An enum (a union of literals) refused: Effect gives one issue per member, said here once, at the
 * first one's place: `kind: Expected one of "a", "b", actual "c"`. Other issues are kept as they are.
 */
const withLiteralsJoined = (
  issues: ReadonlyArray<{ readonly path: string; readonly message: string }>
): Array<{ readonly path: string; readonly message: string }> => {
  const groups = new Map<string, Array<string>>()
  for (const issue of issues) {
    const match = literalMismatch.exec(issue.message)
    if (match === null) continue
    const key = `${issue.path}\u0000${match[2]}`
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [match[1]!])
    else group.push(match[1]!)
  }
  const out: Array<{ readonly path: string; readonly message: string }> = []
  const said = new Set<string>()
  for (const issue of issues) {
    const match = literalMismatch.exec(issue.message)
    const key = match === null ? undefined : `${issue.path}\u0000${match[2]}`
    const group = key === undefined ? undefined : groups.get(key)
    if (group === undefined || group.length < 2) {
      out.push(issue)
    } else if (!said.has(key!)) {
      said.add(key!)
      out.push({ path: issue.path, message: `Expected one of ${group.join(", ")}, actual ${match![2]}` })
    }
  }
  return out
}

const formatPath = (path: ReadonlyArray<PropertyKey>): string => {
  if (path.length === 0) return "(root)"
  let out = ""
  for (const key of path) {
    out += typeof key === "number" ? `[${key}]` : out === "" ? String(key) : `.${String(key)}`
  }
  return out
}
