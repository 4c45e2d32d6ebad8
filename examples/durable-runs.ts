/** A journaled run: a refund that waits for a person's approval, approved, and the run resumed. */
import { Effect, Layer, Schema } from "effect"
import { Agent, Journal, LanguageModel, Tool } from "../src/index.js"
import * as Shop from "./shop.js"
import { lookupOrder } from "./tools.js"

// #region agent
const issueRefund = Tool.make("issue_refund", {
  description: "Refund amount against the order's duplicate charge.",
  input: { order_id: Schema.String, amount: Schema.Number.pipe(Schema.positive()) },
  output: Shop.Refund,
  timeout: "30 seconds",
  idempotent: true,
  needsApproval: true // in a journaled run: the run suspends until a person decides
}, ({ amount, order_id }) => Effect.flatMap(Shop.Billing, (billing) => billing.refund(order_id, amount)))

export const agent = Agent.make({
  tools: [lookupOrder, issueRefund],
  approvalExpiry: "24 hours" // default: no decision counts after it
})
// #endregion

/** Turn 1 looks the order up and asks for the refund; turn 2 answers from what it read. */
export const model = LanguageModel.layerScripted([
  {
    toolCalls: [
      { id: "c1", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" },
      { id: "c2", name: "issue_refund", arguments: "{\"order_id\":\"ord-4821\",\"amount\":49.9}" }
    ]
  },
  (request) => ({
    text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join(" | ")
  })
], { perConversation: true }) // each request answered by its conversation's step: a resumed run too

/** The run in `file`: suspended on the refund, approved, resumed; gives what the model said and the refunds made. */
export const main = (file: string) =>
  Effect.gen(function*() {
    // #region run
    // Journaled: every turn, call and outcome goes to the journal as it happens.
    const suspended = yield* Agent.run(agent, "Refund the duplicate charge of ord-4821", { runId: "refund-4821" }).pipe(
      Effect.flip,
      Effect.flatMap((error) => error._tag === "RunSuspended" ? Effect.succeed(error) : Effect.die(error))
    )
    // suspended.pending: [{ toolCallId: "c2", toolName: "issue_refund", input: { order_id, amount }, expiresAt }]
    // lookup_order ran in the same turn; issue_refund did not.

    // From this process or any other with the same journal:
    yield* Agent.approve("refund-4821", suspended.pending[0]!.toolCallId)
    // or Agent.deny("refund-4821", "c2", { reason: "over the limit" }): the model reads the denial

    const result = yield* Agent.resume(agent, "refund-4821")
    // turn 1 replayed (not asked again), lookup_order's outcome reused, issue_refund runs once
    // #endregion
    const refunds = yield* Effect.flatMap(Shop.Billing, (billing) => billing.refunds)
    return { pending: suspended.pending, output: result.output, refunds }
  }).pipe(
    // #region journal
    Effect.provide(Layer.mergeAll(
      Journal.layerSql({ filename: file }), // or Journal.layerMemory, or Journal.layerSqlClient on any SqlClient
      Shop.layer,
      model
    ))
    // #endregion
  )
