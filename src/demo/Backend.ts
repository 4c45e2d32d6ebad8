/**
 * The demo's backend: orders, customers, billing and security gates, in memory, as services. Billing
 * fails transiently on its first refund, so the demo shows a retry.
 */
import { Context, Effect, Layer, Ref, Schema, Scope } from "effect"
import * as WorkerPool from "../WorkerPool.js"

/** An order. */
export const Order = Schema.Struct({
  id: Schema.String,
  customer_id: Schema.String,
  status: Schema.Literal("paid", "shipped", "refunded"),
  charges: Schema.Array(Schema.Struct({ charge_id: Schema.String, amount: Schema.Number, at: Schema.String })),
  total: Schema.Number
})
/** An order. */
export type Order = typeof Order.Type

/** A customer. */
export const Customer = Schema.Struct({ id: Schema.String, name: Schema.String, tier: Schema.Literal("standard", "gold") })
/** A customer. */
export type Customer = typeof Customer.Type

/** A refund. */
export const Refund = Schema.Struct({ refund_id: Schema.String, order_id: Schema.String, amount: Schema.Number })
/** A refund. */
export type Refund = typeof Refund.Type

/** Nothing with that id. */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

/** The payment provider did not answer this time; trying again may work. */
export class BillingUnavailable extends Schema.TaggedError<BillingUnavailable>()("BillingUnavailable", {
  message: Schema.String
}) {}

/** Orders, read only. */
export class Orders extends Context.Tag("agent-tools/demo/Orders")<Orders, {
  readonly get: (id: string) => Effect.Effect<Order, NotFound>
}>() {}

/** Customers, read only. */
export class Customers extends Context.Tag("agent-tools/demo/Customers")<Customers, {
  readonly get: (id: string) => Effect.Effect<Customer, NotFound>
}>() {}

/** Billing: refunds, and how many were actually made. */
export class Billing extends Context.Tag("agent-tools/demo/Billing")<Billing, {
  readonly refund: (orderId: string, amount: number) => Effect.Effect<Refund, BillingUnavailable | NotFound>
  readonly refunds: Effect.Effect<ReadonlyArray<Refund>>
}>() {}

/** Security gates. */
export class Gates extends Context.Tag("agent-tools/demo/Gates")<Gates, {
  readonly close: (gateId: string) => Effect.Effect<{ readonly gate_id: string; readonly closed: true }, NotFound>
}>() {}

const orders: ReadonlyMap<string, Order> = new Map([
  ["ord-4821", {
    id: "ord-4821",
    customer_id: "cus-1207",
    status: "paid",
    charges: [
      { charge_id: "ch-1", amount: 59.9, at: "2026-11-28T09:12:00Z" },
      { charge_id: "ch-2", amount: 59.9, at: "2026-11-28T09:12:04Z" }
    ],
    total: 59.9
  }]
])

const customers: ReadonlyMap<string, Customer> = new Map([["cus-1207", { id: "cus-1207", name: "Ada Moreau", tier: "gold" }]])

/** The whole backend in memory; billing's first refund attempt fails transiently. */
export const layer: Layer.Layer<Orders | Customers | Billing | Gates> = Layer.mergeAll(
  Layer.succeed(Orders, {
    get: (id) => {
      const order = orders.get(id)
      return order === undefined ? Effect.fail(new NotFound({ message: `no order with id=${id}` })) : Effect.succeed(order)
    }
  }),
  Layer.succeed(Customers, {
    get: (id) => {
      const customer = customers.get(id)
      return customer === undefined ? Effect.fail(new NotFound({ message: `no customer with id=${id}` })) : Effect.succeed(customer)
    }
  }),
  Layer.effect(Billing, Effect.gen(function*() {
    const made = yield* Ref.make<ReadonlyArray<Refund>>([])
    const attempts = yield* Ref.make(0)
    return {
      refund: (orderId, amount) =>
        Effect.gen(function*() {
          if (!orders.has(orderId)) return yield* new NotFound({ message: `no order with id=${orderId}` })
          if ((yield* Ref.getAndUpdate(attempts, (n) => n + 1)) === 0) {
            return yield* new BillingUnavailable({ message: "the payment provider timed out; try again" })
          }
          const refund = { refund_id: `re-${(yield* Ref.get(made)).length + 1}`, order_id: orderId, amount }
          yield* Ref.update(made, (all) => [...all, refund])
          return refund
        }),
      refunds: Ref.get(made)
    }
  })),
  Layer.succeed(Gates, {
    close: (gateId) =>
      gateId.startsWith("gate-")
        ? Effect.succeed({ gate_id: gateId, closed: true as const })
        : Effect.fail(new NotFound({ message: `no gate with id=${gateId}` }))
  })
)

/** The demo's worker threads, for its CPU-bound tool (`digest_report`). */
export class Reports extends Context.Tag("agent-tools/demo/Reports")<Reports, WorkerPool.WorkerPool>() {}

/**
 * `Reports`: two workers loading `reports.worker.ts`, started on first use (a command that never
 * digests a report starts no thread), stopped with the layer.
 */
export const layerReports: Layer.Layer<Reports> = Layer.scoped(
  Reports,
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const pool = yield* Effect.cached(
      WorkerPool.make({ module: new URL("./reports.worker.ts", import.meta.url), size: 2 }).pipe(
        Scope.extend(scope),
        Effect.orDie
      )
    )
    let started: WorkerPool.WorkerPool | undefined
    return Reports.of({
      run: (fn, input) => Effect.flatMap(pool, (ready) => (started = ready).run(fn, input)),
      spawned: () => started?.spawned() ?? 0,
      threads: () => started?.threads() ?? 0,
      ready: Effect.flatMap(pool, (started) => started.ready)
    })
  })
)
