/**
 * `npm run docs:examples`: every TypeScript block of README.md and docs/ is a copy of a file under
 * examples/, which `npm run check` compiles and `npm test` runs. A marker line right before the
 * block names the file, or one region of it:
 *
 *   <!-- example: examples/quickstart.ts -->          the whole file
 *   <!-- example: examples/tools.ts#call -->          the lines between `// #region call` and its `// #endregion`
 *
 * This script writes each block from its file; `npm run docs:examples -- --check` (and
 * test/docs.test.ts) only lists the blocks that have no marker or differ from their file. An
 * example imports the package as `../src/index.js` (an entry as `../src/exports/<name>.js`), so that
 * it compiles against the source; its block shows `agent-tools` (`agent-tools/<name>`), as a user of
 * the package writes it. Region markers are left out.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository's root. */
export const root = fileURLToPath(new URL("..", import.meta.url))

/** Reads an example file by its path from the root, or undefined when there is none. */
export type Load = (path: string) => string | undefined

/** README.md and every Markdown file under docs/, as paths from `dir`. */
export const docFiles = (dir: string = root): Array<string> => {
  const out = ["README.md"]
  const walk = (folder: string) => {
    for (const entry of readdirSync(join(dir, folder), { withFileTypes: true })) {
      const path = `${folder}/${entry.name}`
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith(".md")) out.push(path)
    }
  }
  walk("docs")
  return out.sort()
}

/** Reads files under `dir`. */
export const loadFrom = (dir: string = root): Load => (path) => {
  try {
    return readFileSync(join(dir, path), "utf8")
  } catch {
    return undefined
  }
}

const markerPattern = /^\s*<!--\s*example:\s*(\S+?)\s*-->\s*$/
const fencePattern = /^(\s*)```\s*([\w-]*)\s*$/
const regionPattern = /^\s*\/\/\s*#(end)?region\b\s*(.*)$/
const typescript = new Set(["ts", "typescript", "tsx", "mts", "cts"])

/** The text a marker's reference stands for (`examples/x.ts` or `examples/x.ts#region`), or why there is none. */
export const render = (reference: string, load: Load): { readonly text: string } | { readonly problem: string } => {
  const hash = reference.indexOf("#")
  const path = hash === -1 ? reference : reference.slice(0, hash)
  const region = hash === -1 ? undefined : reference.slice(hash + 1)
  if (!path.startsWith("examples/") || !/\.tsx?$/.test(path)) {
    return { problem: `${reference}: an example is a .ts file under examples/` }
  }
  const source = load(path)
  if (source === undefined) return { problem: `${path}: no such file` }
  const lines = source.replace(/\r\n/g, "\n").split("\n")
  let body: Array<string>
  if (region === undefined) {
    body = lines
  } else {
    const start = lines.findIndex((line) => {
      const match = regionPattern.exec(line)
      return match !== null && match[1] === undefined && match[2]!.trim() === region
    })
    if (start === -1) return { problem: `${path}: no "// #region ${region}"` }
    // Regions may nest: the one that closes this region is the first `#endregion` at its depth.
    let depth = 0
    let end = -1
    for (let i = start + 1; i < lines.length; i++) {
      const match = regionPattern.exec(lines[i]!)
      if (match === null) continue
      if (match[1] === undefined) depth++
      else if (depth === 0) {
        end = i
        break
      } else depth--
    }
    if (end === -1) return { problem: `${path}: "// #region ${region}" has no "// #endregion"` }
    body = lines.slice(start + 1, end)
  }
  body = body.filter((line) => !regionPattern.test(line))
  while (body.length > 0 && body[0]!.trim() === "") body.shift()
  while (body.length > 0 && body[body.length - 1]!.trim() === "") body.pop()
  const indents = body.filter((line) => line.trim() !== "").map((line) => /^ */.exec(line)![0].length)
  const indent = indents.length === 0 ? 0 : Math.min(...indents)
  const text = body.map((line) => line.slice(indent)).join("\n")
    .replace(/from "(?:\.\.\/)+src\/index\.js"/g, "from \"agent-tools\"")
    .replace(/from "(?:\.\.\/)+src\/exports\/([\w-]+)\.js"/g, "from \"agent-tools/$1\"")
  return { text }
}

interface Block {
  /** Index of the opening fence's line. */
  readonly open: number
  /** Index of the closing fence's line. */
  readonly close: number
  readonly indent: string
  readonly language: string
  /** The marker's reference, when the line before the fence is one. */
  readonly reference: string | undefined
}

/** The fenced blocks of a Markdown text. */
const blocksOf = (lines: ReadonlyArray<string>): Array<Block> => {
  const blocks: Array<Block> = []
  for (let i = 0; i < lines.length; i++) {
    const open = fencePattern.exec(lines[i]!)
    if (open === null) continue
    let close = i + 1
    while (close < lines.length && !/^\s*```\s*$/.test(lines[close]!)) close++
    const marker = i > 0 ? markerPattern.exec(lines[i - 1]!) : null
    blocks.push({ open: i, close, indent: open[1]!, language: open[2]!.toLowerCase(), reference: marker?.[1] })
    i = close
  }
  return blocks
}

/**
 * A Markdown text with each marked block rewritten from its example, and the problems found: a
 * TypeScript block with no marker, a marker not followed by a TypeScript block, a missing file or region.
 */
export const renderDoc = (
  path: string,
  text: string,
  load: Load
): { readonly text: string; readonly problems: Array<string> } => {
  const lines = text.split("\n")
  const found: Array<{ readonly line: number; readonly text: string }> = []
  const problem = (line: number, text: string) => found.push({ line, text: `${path}:${line + 1}: ${text}` })
  const blocks = blocksOf(lines)
  const marked = new Set(blocks.map((block) => block.open - 1))
  lines.forEach((line, i) => {
    if (markerPattern.test(line) && !marked.has(i)) {
      problem(i, "an example marker must be followed, on the next line, by a ```ts block")
    }
  })
  // From the last block up, so that earlier line numbers hold while later blocks change length.
  for (const block of [...blocks].reverse()) {
    if (block.reference !== undefined && !typescript.has(block.language)) {
      problem(block.open, `an example marker must be followed by a \`\`\`ts block, not \`\`\`${block.language}`)
      continue
    }
    if (!typescript.has(block.language)) continue
    if (block.reference === undefined) {
      problem(block.open, "a ```ts block needs a marker line before it, like <!-- example: examples/<file>.ts -->")
      continue
    }
    const rendered = render(block.reference, load)
    if ("problem" in rendered) {
      problem(block.open, rendered.problem)
      continue
    }
    const body = rendered.text.split("\n").map((line) => line === "" ? "" : block.indent + line)
    lines.splice(block.open + 1, block.close - block.open - 1, ...body)
  }
  return { text: lines.join("\n"), problems: found.sort((a, b) => a.line - b.line).map((p) => p.text) }
}

/** Each doc under `dir` as it is and as its examples render it, with the problems found. */
const renderAll = (dir: string) => {
  const load = loadFrom(dir)
  return docFiles(dir).map((path) => {
    const text = readFileSync(join(dir, path), "utf8")
    return { path, text, rendered: renderDoc(path, text, load) }
  })
}

/** Every problem of the docs under `dir`, including each block that differs from its example. */
export const check = (dir: string = root): Array<string> =>
  renderAll(dir).flatMap(({ path, rendered, text }) => {
    if (rendered.text === text) return rendered.problems
    const before = text.split("\n")
    const after = rendered.text.split("\n")
    const line = before.findIndex((l, i) => l !== after[i])
    return [...rendered.problems, `${path}:${line + 1}: a block differs from its example: run npm run docs:examples`]
  })

/** Rewrites the docs under `dir` from their examples; gives the files changed and the problems left. */
export const write = (dir: string = root): { readonly changed: Array<string>; readonly problems: Array<string> } => {
  const changed: Array<string> = []
  const problems: Array<string> = []
  for (const { path, rendered, text } of renderAll(dir)) {
    problems.push(...rendered.problems)
    if (rendered.text !== text) {
      writeFileSync(join(dir, path), rendered.text)
      changed.push(path)
    }
  }
  return { changed, problems }
}

if (process.argv[1] !== undefined && relative(process.argv[1], fileURLToPath(import.meta.url)) === "") {
  const checking = process.argv.includes("--check")
  const problems = checking ? check() : (() => {
    const { changed, problems } = write()
    for (const path of changed) process.stdout.write(`${path}: blocks written from examples/\n`)
    return problems
  })()
  for (const problem of problems) process.stderr.write(`${problem}\n`)
  process.exit(problems.length === 0 ? 0 : 1)
}
