// The same async and worker tools through the three faces (design: Handler shapes): an agent run, a served task over a
// real WebSocket, an MCP call with the official client.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule, Schema } from "effect"
import { Agent, LanguageModel, Timing, Tool, Toolkit, WorkerPool } from "../src/index.js"
import { Serve } from "../src/exports/serve.js"
import { mcpClient } from "./support/mcpHttp.js"
import { clientLayer, embeddedPlatform, resultsText } from "./support/platform.js"

const policy = Timing.layer({ redelivery: Schedule.spaced("200 millis"), reconnect: Schedule.spaced("50 millis") })

const tools = (pool: WorkerPool.WorkerPool) => {
  const shout = Tool.make("shout", { description: "Upper-cases text.", input: { text: Schema.String }, timeout: "5 seconds" },
    async ({ text }, { signal }) => {
      await new Promise((resolve) => setTimeout(resolve, 5))
      return signal.aborted ? "aborted" : text.toUpperCase()
    })
  const burn = Tool.make("burn", {
    description: "Burns CPU for millis on a worker.",
    input: { millis: Schema.Number },
    output: Schema.Number,
    // A bound, not a target: the first call starts the worker, which takes seconds on a loaded machine.
    timeout: "2 minutes"
  }, (input) => pool.run<number>("burn", input))
  return [shout, burn] as const
}

const calls = [
  { id: "a", name: "shout", arguments: "{\"text\":\"hi\"}" },
  { id: "b", name: "burn", arguments: "{\"millis\":20}" }
]
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ toolCalls: calls }, (request) => ({ text: resultsText(request) })]

describe("async and worker tools, through every face (design: Handler shapes)", () => {
  it.live("an agent run, a served task over WebSocket and an MCP call", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: new URL("./fixtures/workerJobs.ts", import.meta.url), size: 1 })
      const [shout, burn] = tools(pool)

      const run = yield* Agent.run(Agent.make({ tools: [shout, burn] }), "go").pipe(
        Effect.provide(LanguageModel.layerScripted(script))
      )
      assert.strictEqual(run.output, "a:\"HI\" b:20")

      const url = yield* embeddedPlatform(script, policy)
      const served = yield* Effect.gen(function*() {
        const serving = yield* Serve.makeConfig(yield* Toolkit.make(shout, burn))
        return yield* serving.runTask("go")
      }).pipe(Effect.scoped, Effect.provide(clientLayer({ url }, policy)))
      assert.strictEqual(served, "a:\"HI\" b:20")

      const { client } = yield* mcpClient(yield* Toolkit.make(shout, burn))
      const viaMcp = yield* Effect.promise(() =>
        Promise.all([
          client.callTool({ name: "shout", arguments: { text: "hi" } }),
          client.callTool({ name: "burn", arguments: { millis: 20 } })
        ])
      )
      // A non-object output comes back wrapped in `result` (MCP's structuredContent is an object).
      assert.deepStrictEqual(viaMcp.map((r) => [r.isError, r.structuredContent]), [
        [undefined, { result: "HI" }],
        [undefined, { result: 20 }]
      ])
    }).pipe(Effect.scoped), { timeout: 300_000 })
})
