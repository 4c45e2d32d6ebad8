/**
 * A serving process for the two-process test: serves `lookup` and `add` for AGENT_ID on
 * PLATFORM_URL, submits PROMPT as a task, prints `{"output": ...}` (or `{"error": ...}`) and exits;
 * with OTEL_EXPORTER_OTLP_ENDPOINT set, exports its spans there.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Schema } from "effect"
import { Telemetry, Tool, Toolkit } from "../../src/index.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"

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
  const served = yield* Serve.makeConfig(toolkit)
  const output = yield* served.runTask(process.env.PROMPT ?? "").pipe(Effect.withSpan("serving child: runTask"))
  yield* Console.log(JSON.stringify({ output, processId: served.processId }))
}).pipe(
  Effect.scoped,
  // OTEL_EXPORTER_OTLP_ENDPOINT set (the telemetry test): its spans exported, as the CLI's are.
  Effect.provide(Layer.merge(PlatformClient.layer, Telemetry.layerFromEnv())),
  Effect.catchAll((error) => Console.log(JSON.stringify({ error: String(error) })))
)

NodeRuntime.runMain(program)
