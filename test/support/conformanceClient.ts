/**
 * Our MCP client (`Mcp.toolkit`) as the official conformance suite's client under test: the suite
 * runs this with its scenario server's URL as the last argument and the scenario's name in
 * MCP_CONFORMANCE_SCENARIO. It connects, lists the tools, and calls what the scenario expects
 * through our pipeline; exit 0 when the calls succeed.
 */
import { Effect } from "effect"
import { Invocation } from "../../src/index.js"
import { Mcp } from "../../src/exports/mcp.js"

const url = process.argv[process.argv.length - 1]!
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? ""

/** What each scenario's server expects to be called with. */
const calls: Record<string, ReadonlyArray<readonly [string, unknown]>> = {
  initialize: [],
  tools_call: [["add_numbers", { a: 2, b: 3 }]],
  "sse-retry": [["test_reconnection", {}]]
}

const program = Effect.gen(function*() {
  const remote = yield* Mcp.toolkit({ url, clientName: "agent-tools-conformance", timeout: "20 seconds" })
  const tools = yield* remote.tools
  process.stdout.write(`tools: ${tools.map((tool) => tool.name).join(", ")}\n`)
  for (const [name, args] of calls[scenario] ?? []) {
    const tool = tools.find((t) => t.name === name)
    if (tool === undefined) return yield* Effect.dieMessage(`the server lists no ${name}`)
    const result = yield* Invocation.run(tool, args)
    if (result.error !== undefined) return yield* Effect.dieMessage(`${name} failed: ${result.error}`)
    process.stdout.write(`${name}: ${JSON.stringify(result.value)}\n`)
  }
}).pipe(Effect.scoped)

Effect.runPromise(program).then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
