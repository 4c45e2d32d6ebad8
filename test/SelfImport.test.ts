/**
 * The docs' code imports `agent-tools`; pasted into a file inside a clone, it runs with `npx tsx`
 * before any build: the name resolves to src/ there (tsconfig.json's `paths`), not to the package's
 * dist/lib, which only `npm run build` makes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

describe("the package's name inside the repository", () => {
  it.live("a file importing agent-tools and agent-tools/cluster runs with tsx, from src/", () =>
    Effect.gen(function*() {
      const stdout = yield* Effect.promise(() =>
        new Promise<string>((resolve, reject) => {
          execFile("npx", ["tsx", "test/support/selfImportChild.ts"], { cwd: root }, (error, stdout, stderr) =>
            error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stderr}`)))
        })
      )
      const printed = JSON.parse(stdout) as { output: string; cluster: string; resolved: Array<string> }
      assert.strictEqual(printed.output, "hello, Ada")
      assert.strictEqual(printed.cluster, "function")
      assert.deepStrictEqual(
        printed.resolved.map((url) => fileURLToPath(url).slice(root.length)),
        ["src/index.ts", "src/platform/Cluster.ts"]
      )
    }), 60_000)
})
