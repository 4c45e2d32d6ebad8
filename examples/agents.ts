/** An agent on the shop's tools: its options, a run, its events, and the model it runs on. */
import * as GoogleClient from "@effect/ai-google/GoogleClient"
import * as GoogleLanguageModel from "@effect/ai-google/GoogleLanguageModel"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, Redacted, Schema, Stream } from "effect"
import { Agent, Builtins, LanguageModel, Toolkit } from "../src/index.js"
import { Anthropic, Model } from "../src/exports/providers.js"
import * as EffectAi from "../src/providers/EffectAi.js"
import * as Shop from "./shop.js"
import { issueRefund, lookupOrder } from "./tools.js"

// #region agent
export const agent = Agent.make({
  name: "support",                      // shown in spans
  tools: [lookupOrder, issueRefund, Builtins.getTodayDate],
  instructions: "You are a support agent.",
  toolExecution: "concurrent",          // default: all calls of a turn at once; or "sequential"
  maxConcurrency: 8,                    // optional bound for "concurrent"
  completion: "implicit",               // default: done when the model answers without a tool call;
                                        // "explicit" adds task_complete and ask_user
  maxSteps: 20                          // model turns per run (default 20)
})
// #endregion

// #region scripted
// Turn 1 looks the order up and asks for the same refund twice, at once; turn 2 answers.
export const model = LanguageModel.layerScripted([
  {
    toolCalls: [
      { id: "c1", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" },
      { id: "c2", name: "issue_refund", arguments: "{\"order_id\":\"ord-4821\",\"amount\":49.9}" },
      { id: "c3", name: "issue_refund", arguments: "{\"order_id\":\"ord-4821\",\"amount\":49.9}" }
    ]
  },
  (request) => {
    const results = request.messages.filter((m) => m._tag === "ToolResultMessage")
    return { text: `Refunded; ${results.length} results read.` }
  }
], { repeat: false, keepRequests: true }) // LanguageModel.Scripted gives the requests it received
// #endregion

/** A run on a scripted model of its own, made without a layer; what the model was asked. */
export const onItsOwnModel = (prompt: string) =>
  Effect.gen(function*() {
    // #region scripted-value
    // A new model, at once: its own place in the script, its own requests.
    const model = LanguageModel.scripted([{ text: "Nothing to refund." }])
    const result = yield* Agent.run(agent, prompt, { model }) // no layer to build, none needed in context
    const requests = yield* model.requests // what this model was asked: one request here
    // #endregion
    return { output: result.output, requests }
  }).pipe(Effect.provide(Shop.layer))

/** Runs the agent on `prompt`; gives the run's record and the refunds the shop made. */
export const main = (prompt: string) =>
  Effect.gen(function*() {
    // #region run
    const result = yield* Agent.run(agent, prompt)
    // { output, steps, toolCalls: [{ id, name, input, result, cached, durationMillis }], usage }
    // fails only with ManifestError (bad toolkit, at the first run), ModelError or MaxStepsExceeded

    const events = Agent.stream(agent, prompt) // Stream<AgentEvent>: TurnStarted, TextDelta, Text,
                                               // ToolCallStarted, ToolCallFinished, Done
    // #endregion
    const refunds = yield* Effect.flatMap(Shop.Billing, (billing) => billing.refunds)
    return { result, refunds, events }
  }).pipe(Effect.provide(Shop.layer))

/** The same run from outside Effect. */
export const outsideEffect = async (prompt: string) => {
  // #region promise
  const result = await Agent.runPromise(agent, prompt, Layer.merge(Shop.layer, model)) // for callers outside Effect
  // #endregion
  return result
}

const prompt = "What's the status of order ord-4821?"

// #region toolkit
// A service whose toolkit takes the tools' services (Orders, Billing) once, when its layer is built.
export class SupportTools extends Effect.Service<SupportTools>()("examples/SupportTools", {
  effect: Toolkit.closed(Toolkit.make(lookupOrder, issueRefund)) // checked here: ManifestError
}) {}
// SupportTools.Default: Layer<SupportTools, ManifestError, Orders | Billing>

export const withToolkit = Effect.gen(function*() {
  const agent = Agent.make({ toolkit: yield* SupportTools, instructions: "You are a support agent." })
  return yield* Agent.run(agent, prompt) // needs the model only: the toolkit needs nothing more
}).pipe(Effect.provide(SupportTools.Default.pipe(Layer.provide(Shop.layer))))
// #endregion

// #region real
export const onClaude = Agent.run(agent, prompt).pipe(Effect.provide(Model.layer("anthropic:claude-sonnet-4-5")))
export const onOpenAi = Agent.run(agent, prompt).pipe(Effect.provide(Model.layer("openai:gpt-4.1")))
// #endregion

// #region provider
// Other settings than the environment's: the provider's layer, with an HTTP client beneath it.
export const claude = Anthropic.layer({
  model: "claude-sonnet-4-5",
  apiKey: Redacted.make(process.env.ANTHROPIC_API_KEY ?? ""),
  maxTokens: 8192,      // default 4096
  timeout: "5 minutes"  // per request; default 2 minutes
}).pipe(Layer.provide(NodeHttpClient.layer))
// #endregion

// #region effect-ai
// Any @effect/ai model: here Gemini, built with Effect's own client, run by our loop.
export const gemini = EffectAi.layer({ provider: "google", model: "gemini-2.5-pro" }).pipe(
  Layer.provide(GoogleLanguageModel.layer({ model: "gemini-2.5-pro" })),
  Layer.provide(GoogleClient.layer({ apiKey: Redacted.make(process.env.GEMINI_API_KEY ?? "") })),
  Layer.provide(NodeHttpClient.layer)
)
// #endregion

// #region typed
const Status = Schema.Struct({
  orderId: Schema.String,
  status: Schema.Literal("pending", "shipped", "refunded"),
  refundable: Schema.Boolean
})

export const statusAgent = Agent.make({
  tools: [lookupOrder],
  output: Status,   // the final answer is JSON this Schema decodes
  outputRetries: 2  // answers that do not decode go back with their issues (default 2)
})

export const status = Agent.run(statusAgent, prompt) // result.value: { orderId, status, refundable }
// fails with OutputInvalid (the last answer and its issues) once the retries are spent
// #endregion

// #region streaming
// Text as the model writes it; the rest of the run's events as before.
export const printed = Agent.stream(agent, prompt).pipe(
  Stream.runForEach((event) => {
    switch (event._tag) {
      case "TextDelta":
        return Effect.sync(() => process.stdout.write(event.text))
      case "TurnRetried": // the turn's stream broke: what it wrote is void, it is asked again
        return Effect.sync(() => process.stdout.write("\n[retrying]\n"))
      case "ToolCallStarted":
        return Effect.log(`calling ${event.name}`)
      default:
        return Effect.void
    }
  })
)
// #endregion

// #region caching
// Extended thinking (its blocks go back to the API as it requires) and prompt caching (on by default).
export const thinkingClaude = Anthropic.layer({
  model: "claude-sonnet-4-5",
  apiKey: Redacted.make(process.env.ANTHROPIC_API_KEY ?? ""),
  maxTokens: 16000,
  thinking: { budgetTokens: 8000 },
  cache: true // cache_control on the system prompt, the last tool and the conversation's last block
}).pipe(Layer.provide(NodeHttpClient.layer))
// #endregion
