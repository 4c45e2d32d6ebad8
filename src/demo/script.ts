/**
 * The offline demo's scripted model: a stand-in, not a real model. It looks up the order and the
 * customer at once, asks for the refund twice in one turn (the second is reused), then answers from
 * what the tools returned.
 */
import type * as LanguageModel from "../LanguageModel.js"

/** The demo's task. */
export const prompt = "Order ord-4821 was charged twice; check it and refund the duplicate charge"

/** A tool result of the request, as loose JSON (a model reads it the same way: as text). */
const resultOf = (request: LanguageModel.ModelRequest, id: string): Record<string, unknown> => {
  for (const message of request.messages) {
    if (message._tag === "ToolResultMessage" && message.toolCallId === id) {
      if (message.isError) return { error: message.content }
      const value: unknown = JSON.parse(message.content)
      return typeof value === "object" && value !== null ? value as Record<string, unknown> : { value }
    }
  }
  return {}
}

const field = (record: unknown, key: string): unknown =>
  typeof record === "object" && record !== null ? (record as Record<string, unknown>)[key] : undefined

/** The refunds the results read made: their distinct refund ids (the second refund asked for is the first reused). */
const refundsMade = (request: LanguageModel.ModelRequest): number =>
  new Set(["call-refund-1", "call-refund-2"].map((id) => resultOf(request, id).refund_id).filter((id) => id !== undefined)).size

/** The turns: they read the tool results in the request, as a model would. */
export const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  {
    text: "I'll look up the order and its customer.",
    toolCalls: [
      { id: "call-order", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" },
      { id: "call-customer", name: "lookup_customer", arguments: "{\"customer_id\":\"cus-1207\"}" }
    ]
  },
  (request) => {
    const charges = field(resultOf(request, "call-order"), "charges")
    const amount = field(Array.isArray(charges) ? charges[1] : undefined, "amount") ?? 0
    const args = JSON.stringify({ order_id: "ord-4821", amount })
    return {
      text: `The order has two identical charges of ${amount}; refunding the second one.`,
      // The same refund twice in one turn, as models do: the idempotent tool runs it once.
      toolCalls: [
        { id: "call-refund-1", name: "issue_refund", arguments: args },
        { id: "call-refund-2", name: "issue_refund", arguments: args }
      ]
    }
  },
  (request) => {
    const customer = resultOf(request, "call-customer")
    const refund = resultOf(request, "call-refund-1")
    return {
      text: refund.refund_id === undefined
        ? `I could not refund order ord-4821: ${String(refund.error ?? "no result")}.`
        : `Order ord-4821 for ${String(customer.name ?? "the customer")} was charged twice. ` +
          `I refunded the duplicate charge: refund ${String(refund.refund_id)} of ${String(refund.amount)} ` +
          `(refunds made ${refundsMade(request)}).`
    }
  }
]
