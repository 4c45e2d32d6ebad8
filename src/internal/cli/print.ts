/**
 * What the operating commands (`submit`, `tasks`, `approvals`, `agents`) print, and where: `Output`, stdout by
 * default (a test gives its own, and reads what was printed). Tables in aligned columns; JSON lines.
 * Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"

/**
 * Writes to stdout; a stdout closed by its reader (`agent-tools tasks list | head -1`) ends the process quietly,
 * exit 0, as `ls | head` does: what was not read was not wanted. Any other error on stdout is thrown as before.
 */
const toStdout = (): ((text: string) => void) => {
  let guarded = false
  return (text) => {
    if (!guarded) {
      guarded = true
      process.stdout.on("error", (error: NodeJS.ErrnoException) => {
        if (error.code !== "EPIPE") throw error
        process.exit(0)
      })
    }
    process.stdout.write(text)
  }
}

/** Where the operating commands print: `write` takes text as it is (a line ends with its `\n`). */
export class Output extends Context.Reference<Output>()("agent-tools/cli/Output", {
  defaultValue: () => ({ write: toStdout() })
}) {}

/** Prints `text` as it is. */
export const write = (text: string): Effect.Effect<void> => Effect.map(Output, (output) => output.write(text))

/** Prints `text` and a new line. */
export const line = (text: string): Effect.Effect<void> => write(`${text}\n`)

/** Prints `value` as one line of JSON. */
export const json = (value: unknown): Effect.Effect<void> => line(JSON.stringify(value))

/** A cell's text: a string as it is, absent as `-`, anything else as JSON. */
const cell = (value: unknown): string =>
  value === undefined || value === null || value === "" ? "-" : typeof value === "string" ? value : JSON.stringify(value)

/**
 * `rows` as a table: a header of `columns`' titles, then each row, every column as wide as its widest cell (the
 * last one unpadded); `empty` printed instead when there are no rows.
 */
export const table = <Row>(
  rows: ReadonlyArray<Row>,
  columns: ReadonlyArray<readonly [title: string, value: (row: Row) => unknown]>,
  empty: string
): Effect.Effect<void> => {
  if (rows.length === 0) return line(empty)
  const cells = [columns.map(([title]) => title), ...rows.map((row) => columns.map(([, value]) => cell(value(row))))]
  const widths = columns.map((_, i) => Math.max(...cells.map((r) => r[i]!.length)))
  const text = cells.map((r) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i]!)).join("  ").trimEnd())
  return line(text.join("\n"))
}

/** `label: value` lines, the labels aligned; a value absent is left out. */
export const fields = (entries: ReadonlyArray<readonly [label: string, value: unknown]>): Effect.Effect<void> => {
  const present = entries.filter(([, value]) => value !== undefined && value !== null)
  const width = Math.max(0, ...present.map(([label]) => label.length + 1))
  return line(present.map(([label, value]) => `${`${label}:`.padEnd(width)} ${cell(value)}`).join("\n"))
}
