/** The demo's tools, on the demo backend's services. */
import { Effect, Schema } from "effect"
import { setTimeout as sleep } from "node:timers/promises"
import * as Builtins from "../Builtins.js"
import * as Tool from "../Tool.js"
import * as ToolContext from "../ToolContext.js"
import { Billing, Customer, Customers, Gates, Order, Orders, Refund, Reports } from "./Backend.js"

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

/**
 * An async body (design: Handler shapes): a plain `async` function, no Effect; its signal is aborted at the deadline,
 * so the (simulated) carrier request stops with it.
 */
export const estimateDelivery = Tool.make("estimate_delivery", {
  description: "Estimate how many business days a parcel to the postcode takes. Read only.",
  input: { postcode: Schema.String.pipe(Schema.pattern(/^[0-9]{5}$/)).annotations({ description: "Like 69002" }) },
  output: Schema.Struct({ postcode: Schema.String, business_days: Schema.Number }),
  timeout: "5 seconds"
}, async ({ postcode }, call) => {
  await sleep(5, undefined, { signal: call.signal })
  return { postcode, business_days: postcode.startsWith("75") ? 1 : 2 }
})

/** A CPU-bound body on the worker threads of `Backend.Reports` (design: Handler shapes): the event loop never waits for it. */
export const digestReport = Tool.make("digest_report", {
  description: "Compute the chained SHA-256 digest of a report's text (for the audit log). Read only.",
  input: {
    text: Schema.String.pipe(Schema.maxLength(10_000)),
    rounds: Schema.Int.pipe(Schema.between(1, 100_000)).annotations({ description: "Chaining rounds, 1 to 100,000" })
  },
  output: Schema.Struct({ digest: Schema.String, rounds: Schema.Number }),
  timeout: "20 seconds"
}, (input) => Effect.flatMap(Reports, (reports) => reports.run("digest", input)))

/** The demo tools on the backend's services. */
export const tools = [lookupOrder, lookupCustomer, issueRefund, closeSecurityGate, Builtins.getTodayDate] as const

/** Every demo tool: those, an async one and a worker one (these need `Backend.layerReports` too). */
export const all = [...tools, estimateDelivery, digestReport] as const
