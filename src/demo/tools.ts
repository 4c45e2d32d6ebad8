/** The demo's tools, on the demo backend's services. */
import { Effect, Schema } from "effect"
import * as Builtins from "../Builtins.js"
import * as Tool from "../Tool.js"
import * as ToolContext from "../ToolContext.js"
import { Billing, Customer, Customers, Gates, Order, Orders, Refund } from "./Backend.js"

/** Not enough time left to act safely. */
export class TooLate extends Schema.TaggedError<TooLate>()("TooLate", { message: Schema.String }) {}

/** Read only. */
export const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record (status, charges, customer) for order_id. Read only.",
  input: { order_id: Schema.String.annotations({ description: "The order id, like ord-4821" }) },
  output: Order,
  timeout: "10 seconds"
}, ({ order_id }) => Effect.flatMap(Orders, (orders) => orders.get(order_id)))

/** Read only. */
export const lookupCustomer = Tool.make("lookup_customer", {
  description: "Return the customer record for customer_id. Read only.",
  input: { customer_id: Schema.String.annotations({ description: "The customer id, like cus-1207" }) },
  output: Customer,
  timeout: "10 seconds"
}, ({ customer_id }) => Effect.flatMap(Customers, (customers) => customers.get(customer_id)))

/** Moves money: idempotent (the same refund twice is one refund) and retried on transient failures. */
export const issueRefund = Tool.make("issue_refund", {
  description: "Refund amount against the order's duplicate charge. Idempotent: the same refund requested twice is made once.",
  input: {
    order_id: Schema.String,
    amount: Schema.Number.pipe(Schema.finite(), Schema.positive()).annotations({ description: "The amount to refund" })
  },
  output: Refund,
  timeout: "30 seconds",
  idempotent: true,
  retries: 2,
  // A missing order stays missing: only the billing provider's hiccups are worth another attempt.
  permanent: ["NotFound"],
  needsApproval: true
}, ({ amount, order_id }) => Effect.flatMap(Billing, (billing) => billing.refund(order_id, amount)))

/** Refuses to start when its deadline is close: a half-closed gate is worse than an open one. */
export const closeSecurityGate = Tool.make("close_security_gate", {
  description: "Close the security gate gate_id.",
  input: { gate_id: Schema.String },
  output: Schema.Struct({ gate_id: Schema.String, closed: Schema.Literal(true) }),
  timeout: "20 seconds"
}, ({ gate_id }) =>
  Effect.gen(function*() {
    if (yield* ToolContext.isExpiring) return yield* new TooLate({ message: "too close to the deadline to close a gate safely" })
    return yield* Effect.flatMap(Gates, (gates) => gates.close(gate_id))
  }))

/** The demo tools. */
export const tools = [lookupOrder, lookupCustomer, issueRefund, closeSecurityGate, Builtins.getTodayDate] as const
