/**
 * A serving process for the two-process test: serves `lookup` and `add` for AGENT_ID on
 * PLATFORM_URL, submits PROMPT as a task, prints `{"output": ...}` (or `{"error": ...}`) and exits.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Schema } from "effect"
import { PlatformClient, Serve, Tool, Toolkit } from "../../src/index.js"

const lookup = Tool.make("lookup", { description: "Look up an order.", input: { id: Schema.String }, timeout: "10 seconds" }, (
  { id }
) => Effect.succeed({ id, status: "shipped" }))

const add = Tool.make("add", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))

const program = Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(lookup, add)
  const served = yield* Serve.make(toolkit)
  const output = yield* served.runTask(process.env.PROMPT ?? "")
  yield* Console.log(JSON.stringify({ output, processId: served.processId }))
}).pipe(
  Effect.scoped,
  Effect.provide(PlatformClient.layer),
  Effect.catchAll((error) => Console.log(JSON.stringify({ error: String(error) })))
)

NodeRuntime.runMain(program)
