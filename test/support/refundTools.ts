/** The journaled-run tests' tools and model reading: a refund that needs approval, an idempotent lookup. */
import { Effect, Schema } from "effect"
import type { LanguageModel } from "../../src/index.js"
import { Tool } from "../../src/index.js"

/** The tool results the model read in `request`, as `id=content` (errors marked `!`). */
export const resultsOf = (request: LanguageModel.ModelRequest | undefined): Array<string> =>
  (request?.messages ?? []).flatMap((m) =>
    m._tag === "ToolResultMessage" ? [`${m.toolCallId}${m.isError ? "!" : "="}${m.content}`] : []
  )

/** Tools that count their runs in `runs`: a refund that needs approval, an idempotent lookup. */
export const makeTools = (description = "Refunds an order.") => {
  const runs: Array<string> = []
  const refund = Tool.make("refund", {
    description,
    input: { orderId: Schema.String, amount: Schema.Number },
    output: Schema.String,
    timeout: "5 seconds",
    needsApproval: true
  }, ({ amount, orderId }) => Effect.sync(() => (runs.push(`refund ${orderId}`), `refunded ${amount} on ${orderId}`)))
  const lookup = Tool.make("lookup", {
    description: "Looks an order up.",
    input: { orderId: Schema.String },
    output: Schema.String,
    timeout: "5 seconds",
    idempotent: true
  }, ({ orderId }) => Effect.sync(() => (runs.push(`lookup ${orderId}`), `order ${orderId}: paid`)))
  return { runs, tools: [refund, lookup] as const }
}
