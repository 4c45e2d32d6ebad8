/** Guardrails: the prompt checked before the first turn, the answer before it returns, a tool's arguments before it runs. */
import { Effect, Layer } from "effect"
import { Agent, Guardrail, Hooks, LanguageModel } from "../src/index.js"
import * as Shop from "./shop.js"
import { lookupOrder } from "./tools.js"

// #region agent
const noSecrets = Guardrail.make("no_secrets", (prompt) =>
  Effect.succeed(/\bsk-\w+/.test(prompt) ? Guardrail.trip("the prompt holds an API key") : Guardrail.pass))

// Beside the first turn: the model is asked meanwhile; its answer and its calls wait for the verdict.
const onTopic = Guardrail.make(
  "on_topic",
  (prompt) => Effect.succeed(/order|refund|ship/i.test(prompt) ? Guardrail.pass : Guardrail.trip("not about an order")),
  { mode: "concurrent" }
)

// On a trip the model reads the reason and answers again (within maxSteps); the default ends the run.
const noPromises = Guardrail.make(
  "no_promises",
  (answer) => Effect.succeed(/guarantee/i.test(answer) ? Guardrail.trip("do not promise outcomes") : Guardrail.pass),
  { onTrip: "retry" }
)

export const agent = Agent.make({
  tools: [lookupOrder],
  guardrails: { input: [noSecrets, onTopic], output: [noPromises] }
})
// #endregion

// #region tool
// A tool's guardrails are a tool hook: a trip is an error result the model reads; the handler does not run.
export const hooks = Hooks.layer({
  tool: [Guardrail.tool({
    name: "known_orders",
    tools: ["lookup_order"],
    input: (call) => {
      const { order_id } = call.input as { readonly order_id: string }
      return Effect.succeed(order_id.startsWith("ord-") ? Guardrail.pass : Guardrail.trip(`${order_id} is not an order id`))
    }
  })]
})
// #endregion

/** The first answer promises, the second does not. */
export const model = LanguageModel.layerScripted([{ text: "I guarantee it ships today." }, { text: "It ships today." }])

/** A prompt with a key (tripped before any request), then one that passes after one retry of its answer. */
export const main = Effect.gen(function*() {
  // #region run
  const tripped = yield* Effect.flip(Agent.run(agent, "my key is sk-abc, where is my order?"))
  // tripped: GuardrailTripped { guardrail: "no_secrets", stage: "input", reason: "the prompt holds an API key" }
  const result = yield* Agent.run(agent, "When does ord-4821 ship?")
  // #endregion
  return { tripped: tripped._tag === "GuardrailTripped" ? tripped.message : tripped._tag, output: result.output }
}).pipe(Effect.provide(Layer.mergeAll(Shop.layer, model, hooks)))
