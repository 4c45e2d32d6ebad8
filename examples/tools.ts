/** A tool with every option, a second one that moves money, one with typed failures, and calls through the pipeline. */
// #region tool
import { Clock, Effect, Schema } from "effect"
import { Invocation, Tool, Toolkit } from "../src/index.js"
// Your own Schemas and services:
import { Billing, type BillingDown, type NotFound, Order, Orders, Refund } from "./shop.js"

export const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id. Use it when the user asks about an order.",
  input: { order_id: Schema.String, include_history: Schema.optionalWith(Schema.Boolean, { default: () => false }) },
  output: Order,                 // a Schema; without one the output is any JSON value
  timeout: "10 seconds",         // required, at most 1 hour
  retries: 2,                    // optional: re-runs of a failed handler, with backoff, inside the deadline
  permanent: ["NotFound"],       // optional: _tags never retried (default: none)
  retryable: undefined,          // optional: (error) => may this failure be retried (default: every one)
  idempotent: false,             // optional: may an earlier outcome of the same input be reused
  needsApproval: false,          // optional: runs only once approved (Hooks.approval, a journal), else refused
  errorTransform: undefined,     // optional: (error) => the text the model reads instead
  worker: undefined              // optional: import.meta.url runs the body on a worker thread
}, ({ order_id }) => Orders.pipe(Effect.flatMap((orders) => orders.get(order_id))))

Tool.jsonSchema(lookupOrder)   // { name, description, parameters }: what a model sees, computed once
// The body alone, for unit tests: no pipeline, no ToolContext (see Testing a tool)
export const bare = Tool.test(lookupOrder, { order_id: "ord-1", include_history: false })
// #endregion

// #region refund
export const issueRefund = Tool.make("issue_refund", {
  description: "Refund amount against the order's duplicate charge.",
  input: { order_id: Schema.String, amount: Schema.Number.pipe(Schema.positive()) },
  output: Refund,
  timeout: "30 seconds",
  idempotent: true, // asked twice for the same refund: one refund
  retries: 2,
  // Only the billing provider's hiccups are worth another attempt; the parameter is annotated (see Retries).
  retryable: (error: NotFound | BillingDown) => error._tag === "BillingDown"
}, ({ amount, order_id }) => Billing.pipe(Effect.flatMap((billing) => billing.refund(order_id, amount))))
// #endregion

// #region failure
/** No order with that id: a failure the model can act on, and a caller can match. */
export class OrderNotFound extends Schema.TaggedError<OrderNotFound>()("OrderNotFound", { orderId: Schema.String }) {}

export const findOrder = Tool.make("find_order", {
  description: "Return the order record for order_id.",
  input: { order_id: Schema.String },
  output: Order,
  failure: OrderNotFound, // the handler's failures: the handler may fail with nothing else
  timeout: "10 seconds"
}, ({ order_id }) =>
  Orders.pipe(
    Effect.flatMap((orders) => orders.get(order_id)),
    Effect.catchTag("NotFound", () => Effect.fail(new OrderNotFound({ orderId: order_id })))
  ))

// The model reads {"_tag":"OrderNotFound","orderId":"ord-0"}. Code calls the tool typed, and matches the failure:
export const orderStatus = (orderId: string) =>
  Invocation.call(findOrder, { order_id: orderId }).pipe(
    Effect.map((order) => order.status),            // the output, decoded: an Order
    Effect.catchTag("OrderNotFound", () => Effect.succeed("unknown" as const))
  ) // Effect<"paid" | "refunded" | "unknown", ToolFailure (a defect, a timeout...), Orders>
// #endregion

// #region fromJsonSchema
/** Stands in for a weather service of yours. */
const lookUp = async (city: string) => `sunny in ${city}`

export const forecast = Tool.fromJsonSchema("forecast", {
  description: "The weather for a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
    required: ["city"],
    additionalProperties: false
  },
  output: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
  timeout: "10 seconds"
}, async ({ city }) => ({ summary: await lookUp(String(city)) }))
// #endregion

/** Makes the toolkit and runs one call of `lookup_order` for `orderId`. */
export const main = (orderId: string) =>
  Effect.gen(function*() {
    // #region call
    const toolkit = yield* Toolkit.make(lookupOrder, issueRefund)
    // Effect<Toolkit, ManifestError>: every broken limit at once, each naming the tool and the rule

    const now = yield* Clock.currentTimeMillis // the fiber's clock: a TestClock in a test
    const result = yield* Invocation.run(lookupOrder, JSON.stringify({ order_id: orderId }), {
      taskId: "task-1", toolCallId: "call-1", deadlineAt: now + 5_000 // all optional
    })
    result.success  // derived: error === undefined
    result.value    // the output, encoded by the output Schema (plain JSON)
    result.error    // or the text the model reads, e.g. "NotFound: no order with id=ord-0"
    // #endregion
    return { toolkit, result }
  })
