/** `node:fs`, and a `globSync` (see preload.mjs). */
import fs from "node:fs"
import { join, relative } from "node:path"
export * from "node:fs"
export default fs
/**
 * Node 22's `fs.globSync`, for the one shape the conformance suite uses it in: `**\/<file name>`
 * under `cwd`, as paths relative to it.
 */
export const globSync = (pattern, options = {}) => {
  const cwd = options.cwd ?? process.cwd()
  const name = pattern.replace(/^\*\*\//, "")
  const out = []
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name === name) out.push(relative(cwd, path))
    }
  }
  if (fs.existsSync(cwd)) walk(cwd)
  return out
}
