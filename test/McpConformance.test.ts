/**
 * The official MCP conformance suite (`@modelcontextprotocol/conformance`), run as its CLI runs it,
 * on Node 20 through test/support/conformance/preload.mjs.
 * - Server scenarios: the suite against examples/mcp-conformance.ts (our `Mcp.layerHttp` serving
 *   tools written with `Tool.make`). Not applicable, because not built: completion, resources,
 *   prompts, and the elicitation scenarios of forms with defaults and
 *   enums (SEP-1034, SEP-1330); `server-sse-polling` has no check for a server that answers POSTs
 *   with JSON.
 * - Client scenarios: the suite's scenario servers against our client (`Mcp.toolkit`, in
 *   test/support/conformanceClient.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { afterAll, beforeAll } from "vitest"
import { type Child, startChild } from "./support/childProcess.js"
import { freePort } from "./support/postgres.js"
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

/** The server scenarios that apply to what is built. */
const serverScenarios = [
  "server-initialize",
  "ping",
  "tools-list",
  "tools-call-simple-text",
  "tools-call-image",
  "tools-call-audio",
  "tools-call-embedded-resource",
  "tools-call-mixed-content",
  "tools-call-with-logging",
  "tools-call-error",
  "tools-call-with-progress",
  "tools-call-sampling",
  "tools-call-elicitation",
  "json-schema-2020-12",
  "logging-set-level",
  "dns-rebinding-protection",
  "server-sse-multiple-streams"
]

describe("MCP conformance: server scenarios against examples/mcp-conformance.ts", () => {
  let server: Child | undefined
  let url = ""
  beforeAll(async () => {
    const port = await freePort()
    server = startChild("examples/mcp-conformance.ts", {}, ["--port", String(port)])
    const line = await server.waitFor("listening ", 60_000)
    assert.isDefined(line, server.lines.join("\n"))
    url = line!.slice("listening ".length)
  }, 90_000)
  afterAll(() => void server?.process.kill("SIGTERM"))

  for (const scenario of serverScenarios) {
    it(`${scenario} passes`, async () => {
      const { code, output } = await conformance(["server", "--url", url, "--scenario", scenario])
      assert.match(output, /Passed: ([1-9]\d*)\/\1, 0 failed/)
      assert.strictEqual(code, 0, output)
    }, 120_000)
  }
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
