/**
 * `npm run test:slow`: the slow project (vitest.config.ts's `slow` list), one file at a time, each in
 * a vitest process of its own. The suites that time a platform's round trips under attack run in the
 * test's own process: in one worker shared by every file, the heap the files before them left (some
 * hundreds of MB) made their GC pauses the figure. Arguments, when given, go to one vitest run as
 * they are (`npm run test:slow -- test/platform/Tenants.test.ts`). Exits non-zero if any file failed,
 * and prints the end of each failed file's output again last, where a CI log's tail shows it.
 */
import { spawn } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { slow } from "../vitest.config.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const vitest = join(root, "node_modules/vitest/vitest.mjs")

/** Runs vitest on the files, its output passed through as it comes; its exit status and its output. */
const run = (files: ReadonlyArray<string>): Promise<{ readonly status: number; readonly output: string }> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, [vitest, "run", "--project", "slow", ...files], {
      cwd: root,
      stdio: ["inherit", "pipe", "pipe"]
    })
    const chunks: Array<Buffer> = []
    child.stdout.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      process.stdout.write(chunk)
    })
    child.stderr.on("data", (chunk: Buffer) => {
      chunks.push(chunk)
      process.stderr.write(chunk)
    })
    child.on("close", (code) => resolve({ status: code ?? 1, output: Buffer.concat(chunks).toString("utf8") }))
  })

/** The last lines of a run's output, without its colours. */
const tail = (output: string, lines: number): string =>
  output.replace(/\x1b\[[0-9;]*m/g, "").split("\n").slice(-lines).join("\n")

const args = process.argv.slice(2)
if (args.length > 0) process.exit((await run(args)).status)

const started = Date.now()
const failed: Array<{ readonly file: string; readonly output: string }> = []
for (const file of slow) {
  const { output, status } = await run([file])
  if (status !== 0) failed.push({ file, output })
}
for (const { file, output } of failed) console.log(`\n---- the end of ${file}'s output, again ----\n${tail(output, 120)}`)
const minutes = ((Date.now() - started) / 60_000).toFixed(1)
console.log(`\nslow project: ${slow.length - failed.length} of ${slow.length} files passed in ${minutes} min`)
for (const { file } of failed) console.log(`  failed: ${file}`)
process.exit(failed.length === 0 ? 0 : 1)
