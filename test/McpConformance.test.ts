/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`), run as its CLI runs it,
 * on Node 20 through test/support/conformance/preload.mjs. Client scenarios: the suite's scenario
 * servers against our client (`Mcp.toolkit`, in test/support/conformanceClient.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const suite = createRequire(import.meta.url).resolve("@modelcontextprotocol/conformance/package.json").replace(/package\.json$/, "dist/index.js")

/** Runs the suite's CLI with `args`; its exit code and what it printed. */
export const conformance = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly output: string }>((resolve) => {
    execFile(
      process.execPath,
      ["--import", "./test/support/conformance/preload.mjs", suite, ...args],
      { cwd: root, timeout: 120_000, env: { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" } },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? 1, output: stdout + stderr })
    )
  })

describe("MCP conformance: client scenarios against Mcp.toolkit", () => {
  for (const scenario of ["initialize", "tools_call", "sse-retry"]) {
    it(`${scenario} passes`, async () => {
      const { code, output } = await conformance([
        "client",
        "--command",
        "node --import tsx test/support/conformanceClient.ts",
        "--scenario",
        scenario
      ])
      assert.include(output, "OVERALL: PASSED", output)
      assert.notMatch(output, /[1-9]\d* failed/)
      assert.strictEqual(code, 0, output)
    }, 120_000)
  }
})
