/**
 * `npm run test:slow`: the slow project (vitest.config.ts's `slow` list), one file at a time, each in
 * a vitest process of its own. The suites that time a platform's round trips under attack run in the
 * test's own process: in one worker shared by every file, the heap the files before them left (some
 * hundreds of MB) made their GC pauses the figure. Arguments, when given, go to one vitest run as
 * they are (`npm run test:slow -- test/platform/Tenants.test.ts`). Exits non-zero if any file failed.
 */
import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { slow } from "../vitest.config.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const vitest = join(root, "node_modules/vitest/vitest.mjs")
const run = (files: ReadonlyArray<string>): number =>
  spawnSync(process.execPath, [vitest, "run", "--project", "slow", ...files], { cwd: root, stdio: "inherit" }).status ?? 1

const args = process.argv.slice(2)
if (args.length > 0) process.exit(run(args))

const started = Date.now()
const failed = slow.filter((file) => run([file]) !== 0)
const minutes = ((Date.now() - started) / 60_000).toFixed(1)
console.log(`\nslow project: ${slow.length - failed.length} of ${slow.length} files passed in ${minutes} min`)
for (const file of failed) console.log(`  failed: ${file}`)
process.exit(failed.length === 0 ? 0 : 1)
