/**
 * The shop the examples lean on: an order Schema, an orders service and billing, in memory. In an
 * application these are its own Schemas and services; the tools only call them.
 */
import { Context, Effect, Layer, Ref, Schema } from "effect"

/** No such record. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

/** The billing provider failed for a moment: worth another attempt. */
export class BillingDown extends Schema.TaggedError<BillingDown>()("BillingDown", { message: Schema.String }) {}

/** An order: its charges and its customer. */
export const Order = Schema.Struct({
  id: Schema.String,
  status: Schema.Literal("paid", "refunded"),
  charges: Schema.Array(Schema.Number),
  customer_id: Schema.String
})
/** An order. */
export type Order = typeof Order.Type

/** A refund made. */
export const Refund = Schema.Struct({ refund_id: Schema.String, order_id: Schema.String, amount: Schema.Number })
/** A refund made. */
export type Refund = typeof Refund.Type

/** Reads orders. */
export class Orders extends Context.Tag("examples/Orders")<Orders, {
  readonly get: (id: string) => Effect.Effect<Order, NotFound>
}>() {}

/** Moves money. */
export class Billing extends Context.Tag("examples/Billing")<Billing, {
  readonly refund: (orderId: string, amount: number) => Effect.Effect<Refund, NotFound | BillingDown>
  /** The refunds made so far. */
  readonly refunds: Effect.Effect<ReadonlyArray<Refund>>
}>() {}

const orders: ReadonlyMap<string, Order> = new Map([
  ["ord-4821", { id: "ord-4821", status: "paid", charges: [49.9, 49.9], customer_id: "cus-1207" }]
])

/** Both services, in memory: one order, ord-4821, charged twice. */
export const layer: Layer.Layer<Orders | Billing> = Layer.merge(
  Layer.succeed(Orders, {
    get: (id) => {
      const order = orders.get(id)
      return order === undefined
        ? Effect.fail(new NotFound({ message: `no order with id=${id}` }))
        : Effect.succeed(order)
    }
  }),
  Layer.effect(
    Billing,
    Effect.map(Ref.make<ReadonlyArray<Refund>>([]), (made) => ({
      refund: (orderId, amount) =>
        orders.has(orderId)
          ? Ref.modify(made, (list): [Refund, ReadonlyArray<Refund>] => {
            const refund = { refund_id: `ref-${list.length + 1}`, order_id: orderId, amount }
            return [refund, [...list, refund]]
          })
          : Effect.fail(new NotFound({ message: `no order with id=${orderId}` })),
      refunds: Ref.get(made)
    }))
  )
)
