/**
 * The demo's agents that call agents: a support agent with a billing agent as one of its tools
 * (`Agent.asTool`), and the scripted stand-in's turns for both (told apart by their instructions).
 */
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Agent from "../Agent.js"
import * as LanguageModel from "../LanguageModel.js"
import type { Orders } from "./Backend.js"
import { lookupOrder } from "./tools.js"

const billingInstructions = "You are billing. Answer questions about charges from the order record."
const supportInstructions = "You are support. Ask billing about charges; answer the customer in one sentence."

/** Billing: reads orders. */
export const billing = Agent.make({ name: "billing", instructions: billingInstructions, tools: [lookupOrder] })

/** Support: asks billing, as a tool. */
export const support = Agent.make({
  name: "support",
  instructions: supportInstructions,
  tools: [Agent.asTool(billing, { name: "ask_billing", description: "Ask the billing agent a question about charges." })]
})

/** The support agent's question. */
export const question = "How much was order ord-4821 charged in total?"

const lastResult = (request: LanguageModel.ModelRequest): string => {
  const results = request.messages.filter((m) => m._tag === "ToolResultMessage")
  return results.at(-1)?.content ?? ""
}

/** What billing found: the total of the order record's charges. */
const total = (record: string): number => {
  try {
    const charges = (JSON.parse(record) as { readonly charges?: ReadonlyArray<{ readonly amount: number }> }).charges ?? []
    return charges.reduce((sum, charge) => sum + charge.amount, 0)
  } catch {
    return 0
  }
}

/** The scripted stand-in: by agent (its instructions), by step. */
const turns: Record<string, ReadonlyArray<LanguageModel.ScriptedTurn>> = {
  [supportInstructions]: [
    { toolCalls: [{ id: "call-billing", name: "ask_billing", arguments: JSON.stringify({ prompt: "What did order ord-4821 charge in total?" }) }] },
    (request) => ({ text: `Billing says: ${JSON.parse(lastResult(request)) as string}` })
  ],
  [billingInstructions]: [
    { toolCalls: [{ id: "call-order", name: "lookup_order", arguments: JSON.stringify({ order_id: "ord-4821" }) }] },
    (request) => ({ text: `order ord-4821 was charged ${total(lastResult(request)).toFixed(2)} in total.` })
  ]
}

/** The script as `LanguageModel.layerScripted` takes it (with `perConversation`). */
export const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [0, 1].map((step) => (request: LanguageModel.ModelRequest) => {
  const turn = turns[request.instructions ?? ""]?.[step] ?? { text: "" }
  return typeof turn === "function" ? turn(request) : turn
})

/** Support's answer to `question`, asked of `model`; the scripted stand-in when there is none. */
export const ask = <E>(model: Layer.Layer<LanguageModel.LanguageModel, E> | undefined): Effect.Effect<string, E | Agent.AgentError, Orders> =>
  Agent.run(support, question).pipe(
    Effect.map((result) => result.output),
    Effect.provide(model ?? LanguageModel.layerScripted(script, { perConversation: true }))
  )
