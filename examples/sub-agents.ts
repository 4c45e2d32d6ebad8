/** Agents that call agents: billing as a tool of support, a refund in billing approved from the root, and a handoff. */
import { Effect, Layer, Schema } from "effect"
import { Agent, Journal, LanguageModel, Tool } from "../src/index.js"
import * as Shop from "./shop.js"
import { lookupOrder } from "./tools.js"

const issueRefund = Tool.make("issue_refund", {
  description: "Refund amount against the order's duplicate charge.",
  input: { order_id: Schema.String, amount: Schema.Number.pipe(Schema.positive()) },
  output: Shop.Refund,
  timeout: "30 seconds",
  needsApproval: true
}, ({ amount, order_id }) => Effect.flatMap(Shop.Billing, (billing) => billing.refund(order_id, amount)))

// #region agents
const billing = Agent.make({
  name: "billing",
  instructions: "You are billing: orders, charges, refunds.",
  tools: [lookupOrder, issueRefund]
})

export const support = Agent.make({
  name: "support",
  instructions: "You are support. Billing questions go to billing.",
  tools: [
    // The calling model gives { prompt }; the child run's output is the call's result.
    Agent.asTool(billing, { name: "billing", description: "Ask billing: charges and refunds.", timeout: "5 minutes" })
  ]
})

// Or hand the whole conversation over: the model gets a transfer_to_billing tool.
export const triage = Agent.make({ name: "triage", instructions: "You route customers.", tools: [], handoffs: [billing] })
// #endregion

/** Support asks billing (call b1); billing asks for the refund (call r1); each answers from what it read. */
export const model = LanguageModel.layerScripted([0, 1].map((step) => (request: LanguageModel.ModelRequest) => {
  const read = request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join(" | ")
  if (request.instructions?.startsWith("You are support")) {
    return step === 0
      ? { toolCalls: [{ id: "b1", name: "billing", arguments: "{\"prompt\":\"Refund the duplicate charge of ord-4821\"}" }] }
      : { text: `support: ${read}` }
  }
  return step === 0
    ? { toolCalls: [{ id: "r1", name: "issue_refund", arguments: "{\"order_id\":\"ord-4821\",\"amount\":49.9}" }] }
    : { text: `billing: ${read}` }
}), { perConversation: true })

/** The tree: suspended on billing's refund, approved from the root, resumed; what support said, and the refunds made. */
export const main = Effect.gen(function*() {
  // #region approve
  const suspended = yield* Agent.run(support, "I was charged twice for ord-4821", { runId: "ticket-7" }).pipe(
    Effect.flip,
    Effect.flatMap((error) => error._tag === "RunSuspended" ? Effect.succeed(error) : Effect.die(error))
  )
  // suspended.pending: [{ toolCallId: "b1/r1", toolName: "issue_refund", input, expiresAt,
  //   path: [{ runId: "ticket-7", toolCallId: "b1", toolName: "billing" },
  //          { runId: "ticket-7/b1", toolCallId: "r1", toolName: "issue_refund" }] }]
  yield* Agent.approve("ticket-7", "b1/r1") // that call, in billing's run, and no other
  const result = yield* Agent.resume(support, "ticket-7") // billing goes on where it stopped
  // #endregion
  const refunds = yield* Effect.flatMap(Shop.Billing, (billing) => billing.refunds)
  return { pending: suspended.pending, output: result.output, refunds }
}).pipe(Effect.provide(Layer.mergeAll(Journal.layerMemory, Shop.layer, model)))
