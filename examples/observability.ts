/** Traces, logs and metrics to an OTLP backend: `Telemetry.layer` around what a program runs. */
import { Effect, Layer, Schema } from "effect"
import { Agent, LanguageModel, Telemetry, Tool } from "../src/index.js"

const lookup = Tool.make("lookup_order", {
  description: "Return the status of order_id.",
  input: { order_id: Schema.String },
  output: Schema.Struct({ status: Schema.String }),
  timeout: "5 seconds"
}, () => Effect.succeed({ status: "shipped" }))

const agent = Agent.make({ name: "support-bot", tools: [lookup] })
// A real model in production (Anthropic.layerConfig, OpenAi.layerConfig); scripted here.
const model = LanguageModel.layerScripted([
  { toolCalls: [{ id: "c1", name: "lookup_order", arguments: `{"order_id":"ord-1"}` }] },
  { text: "It has shipped." }
])

// #region telemetry
const telemetry = Telemetry.layer({
  endpoint: "http://localhost:4318",
  serviceName: "support-bot",
  headers: { "x-api-key": process.env.COLLECTOR_KEY ?? "" },
  // Prompts, tool arguments and results stay out of the spans unless this is true.
  captureContent: false
})

// Or from OTEL_EXPORTER_OTLP_ENDPOINT and the other standard variables: Telemetry.layerFromEnv()
export const program = Agent.run(agent, "where is my order?").pipe(
  Effect.provide(Layer.merge(model, telemetry))
)
// #endregion
