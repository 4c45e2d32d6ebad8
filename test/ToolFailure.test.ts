/**
 * Typed tool failures (design: Error text): a tool's `failure` Schema makes its handler's failures JSON the
 * model reads, values a caller matches with `Effect.catchTag` (`Invocation.call`), and the type `retryable`
 * is given; defects read as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Schedule, Schema, TestClock } from "effect"
import * as ToolsExample from "../examples/tools.js"
import * as Shop from "../examples/shop.js"
import { Agent, Invocation, LanguageModel, Timing, Tool, ToolContext, ToolResult } from "../src/index.js"

class OrderNotFound extends Schema.TaggedError<OrderNotFound>()("OrderNotFound", { orderId: Schema.String }) {}
class Busy extends Schema.TaggedError<Busy>()("Busy", { message: Schema.String }) {}

const Order = Schema.Struct({ id: Schema.String, placedAt: Schema.DateFromString })

/** Finds order "1"; fails with `OrderNotFound` for any other, and dies for "boom". */
const lookup = Tool.make("lookup_order", {
  description: "Look an order up.",
  input: { id: Schema.String },
  output: Order,
  failure: OrderNotFound,
  timeout: "5 seconds"
}, ({ id }) =>
  id === "1"
    ? Effect.succeed({ id, placedAt: new Date(0) })
    : id === "boom"
    ? Effect.die(new RangeError("the index is out of range"))
    : Effect.fail(new OrderNotFound({ orderId: id })))

describe("typed failures: what the model reads", () => {
  it.effect("a failure of the failure Schema's type reads as its encoded JSON", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(lookup, { id: "42" })
      assert.strictEqual(result.error, "{\"_tag\":\"OrderNotFound\",\"orderId\":\"42\"}")
      assert.strictEqual(result.failure?._tag, "HandlerFailed")
      // The value itself is kept in the failure's cause.
      const cause = (result.failure as ToolResult.HandlerFailed).cause
      assert.deepStrictEqual(Cause.failureOption(cause), Cause.failureOption(Cause.fail(new OrderNotFound({ orderId: "42" }))))
    }))

  it.effect("a defect reads as before: its name and message", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(lookup, { id: "boom" })
      assert.strictEqual(result.error, "RangeError: the index is out of range")
    }))

  it.effect("a failure the Schema cannot encode reads as before; errorTransform wins over the JSON", () =>
    Effect.gen(function*() {
      const stray = Tool.make("stray", {
        description: "Fails with what its Schema does not cover (untyped code).",
        input: {},
        failure: OrderNotFound,
        timeout: "5 seconds"
      }, () => Effect.fail(new Busy({ message: "try later" }) as unknown as OrderNotFound))
      assert.strictEqual((yield* Invocation.run(stray, {})).error, "Busy: try later")
      const transformed = Tool.make("transformed", {
        description: "Has its own error text.",
        input: {},
        failure: OrderNotFound,
        timeout: "5 seconds",
        errorTransform: (error) => `no luck: ${(error as OrderNotFound).orderId}`
      }, () => Effect.fail(new OrderNotFound({ orderId: "7" })))
      assert.strictEqual((yield* Invocation.run(transformed, {})).error, "no luck: 7")
    }))

  it.effect("an agent's model reads the encoded failure in the tool result", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(Agent.make({ tools: [lookup] }), "Where is order 42?")
      assert.strictEqual(result.output, "order 42 does not exist")
      const [, second] = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      const read = second!.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [[m.isError, m.content]] : [])
      assert.deepStrictEqual(read, [[true, "{\"_tag\":\"OrderNotFound\",\"orderId\":\"42\"}"]])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [{ id: "c1", name: "lookup_order", arguments: "{\"id\":\"42\"}" }] },
      (request) => {
        const content = request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join()
        const failure = JSON.parse(content) as { _tag: string; orderId: string }
        return { text: failure._tag === "OrderNotFound" ? `order ${failure.orderId} does not exist` : "?" }
      }
    ]))))
})

describe("typed failures: Invocation.call", () => {
  it.effect("succeeds with the output decoded by the output Schema", () =>
    Effect.gen(function*() {
      const order = yield* Invocation.call(lookup, { id: "1" })
      assert.strictEqual(order.id, "1")
      assert.instanceOf(order.placedAt, Date)
      assert.strictEqual(order.placedAt.getTime(), 0)
    }))

  it.effect("fails with the typed failure itself: Effect.catchTag recovers it", () =>
    Effect.gen(function*() {
      const recovered = yield* Invocation.call(lookup, { id: "42" }).pipe(
        Effect.map((order) => order.id),
        Effect.catchTag("OrderNotFound", (error) => Effect.succeed(`no order ${error.orderId}`))
      )
      assert.strictEqual(recovered, "no order 42")
      const exit = yield* Effect.exit(Invocation.call(lookup, { id: "42" }))
      assert.deepStrictEqual(exit, Exit.fail(new OrderNotFound({ orderId: "42" })))
    }))

  it.effect("fails with the call's ToolFailure otherwise: a defect is HandlerFailed, bad input InvalidInput", () =>
    Effect.gen(function*() {
      const died = yield* Effect.flip(Invocation.call(lookup, { id: "boom" }))
      assert.strictEqual(died._tag, "HandlerFailed")
      assert.strictEqual(died._tag === "HandlerFailed" && Cause.isDie(died.cause), true)
      assert.strictEqual((died as ToolResult.HandlerFailed).text, "RangeError: the index is out of range")
      const refused = yield* Effect.flip(Invocation.call(lookup, { id: 42 as unknown as string }))
      assert.strictEqual(refused._tag, "InvalidInput")
      assert.match((refused as ToolResult.InvalidInput).text, /^lookup_order: invalid input: /)
    }))

  it.effect("a tool without a failure Schema fails with HandlerFailed, the handler's failure in its cause", () =>
    Effect.gen(function*() {
      const plain = Tool.make("plain", { description: "No failure Schema.", input: {}, timeout: "5 seconds" }, () =>
        Effect.fail(new Busy({ message: "try later" })))
      const failed = yield* Effect.flip(Invocation.call(plain, {}))
      assert.strictEqual(failed._tag, "HandlerFailed")
      if (failed._tag !== "HandlerFailed") return
      assert.strictEqual(failed.text, "Busy: try later")
      assert.deepStrictEqual(Cause.failureOption(failed.cause), Cause.failureOption(Cause.fail(new Busy({ message: "try later" }))))
    }))
})

describe("typed failures: retries", () => {
  it.effect("retryable, typed from the Schema, retries only the tag it names", () =>
    Effect.gen(function*() {
      const attempts: Array<string> = []
      const flaky = Tool.make("flaky", {
        description: "Busy once, then the order is not found.",
        input: { id: Schema.String },
        failure: Schema.Union(OrderNotFound, Busy),
        timeout: "10 seconds",
        retries: 3,
        retryable: (error) => error._tag === "Busy"
      }, ({ id }) =>
        Effect.gen(function*() {
          const { attempt } = yield* ToolContext.ToolContext
          attempts.push(`${attempt}`)
          if (attempt === 1) return yield* new Busy({ message: "busy" })
          return yield* new OrderNotFound({ orderId: id })
        }))
      const fiber = yield* Effect.fork(Invocation.call(flaky, { id: "9" }))
      yield* TestClock.adjust("1 second")
      const error = yield* Effect.flip(Fiber.join(fiber))
      // Busy was retried once; OrderNotFound, not retryable, ended the call with 2 of 4 attempts used.
      assert.deepStrictEqual(attempts, ["1", "2"])
      assert.deepStrictEqual(error, new OrderNotFound({ orderId: "9" }))
    }).pipe(Effect.provide(Timing.layer({ toolRetry: Schedule.exponential("100 millis") }))))
})

describe("typed failures: the docs' example (docs/tools.md, Typed failures)", () => {
  it.effect("find_order: the model reads the JSON it shows, and orderStatus recovers the failure", () =>
    Effect.gen(function*() {
      const missing = yield* Invocation.run(ToolsExample.findOrder, { order_id: "ord-0" })
      assert.strictEqual(missing.error, "{\"_tag\":\"OrderNotFound\",\"orderId\":\"ord-0\"}")
      assert.strictEqual(yield* ToolsExample.orderStatus("ord-4821"), "paid")
      assert.strictEqual(yield* ToolsExample.orderStatus("ord-0"), "unknown")
    }).pipe(Effect.provide(Shop.layer)))
})
