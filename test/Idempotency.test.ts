// @effect-diagnostics globalErrorInEffectFailure:off
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Schedule, Schema, TestClock } from "effect"
import { Idempotency, Invocation, RetryPolicy, Tool, ToolContext } from "../src/index.js"

const store = Idempotency.Idempotency
const layer = Idempotency.layerMemory
const key = { taskId: "task-1", toolCallId: "call-1" }
const ttl = Duration.seconds(30)

const counter = () => {
  const runs = { count: 0 }
  const tool = Tool.make("count", { description: "Counts.", input: {}, output: Schema.Number, timeout: "30 seconds" }, () =>
    Effect.sync(() => ++runs.count))
  return { runs, tool }
}

describe("Idempotency.layerMemory (S10)", () => {
  it.effect("a redelivered (taskId, toolCallId) runs once; both deliveries get the same result", () =>
    Effect.gen(function*() {
      const { runs, tool } = counter()
      const dedupe = yield* store
      const first = yield* dedupe.once(key, ttl, Invocation.run(tool, "{}", key))
      const second = yield* dedupe.once(key, ttl, Invocation.run(tool, "{}", key))
      assert.strictEqual(runs.count, 1)
      assert.deepStrictEqual([first.reused, second.reused], [false, true])
      assert.strictEqual(second.result, first.result)
      assert.strictEqual(first.result.value, 1)
    }).pipe(Effect.provide(layer)))

  it.effect("the key is the pair, never either half", () =>
    Effect.gen(function*() {
      const { runs, tool } = counter()
      const dedupe = yield* store
      yield* dedupe.once(key, ttl, Invocation.run(tool, "{}"))
      yield* dedupe.once({ ...key, taskId: "task-2" }, ttl, Invocation.run(tool, "{}"))
      yield* dedupe.once({ ...key, toolCallId: "call-2" }, ttl, Invocation.run(tool, "{}"))
      assert.strictEqual(runs.count, 3)
    }).pipe(Effect.provide(layer)))

  it.effect("a delivery arriving while the first still runs joins it", () =>
    Effect.gen(function*() {
      let runs = 0
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "30 seconds" }, () =>
        Effect.suspend(() => Effect.as(Effect.sleep("5 seconds"), ++runs)))
      const dedupe = yield* store
      const first = yield* Effect.fork(dedupe.once(key, ttl, Invocation.run(slow, "{}", key)))
      yield* TestClock.adjust("1 second")
      const second = yield* Effect.fork(dedupe.once(key, ttl, Invocation.run(slow, "{}", key)))
      yield* TestClock.adjust("4 seconds")
      const [a, b] = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual([a.reused, b.reused, a.result.value, b.result.value], [false, true, 1, 1])
    }).pipe(Effect.provide(layer)))

  it.effect("an expired redelivery is refused unrun", () =>
    Effect.gen(function*() {
      const { runs, tool } = counter()
      yield* TestClock.adjust("1 minute")
      const { result } = yield* (yield* store).once(key, ttl, Invocation.run(tool, "{}", { ...key, deadlineAt: 30_000 }))
      assert.strictEqual(result.error, "count: its deadline passed before it started; it did not run")
      assert.strictEqual(runs.count, 0)
    }).pipe(Effect.provide(layer)))

  it.effect("100,000 completed calls leave the store empty once their timeouts pass", () =>
    Effect.gen(function*() {
      const dedupe = yield* store
      const done = Effect.succeed(Invocation.ToolResult.failure("x"))
      for (let i = 0; i < 100_000; i++) yield* dedupe.once({ taskId: "t", toolCallId: `c${i}` }, ttl, done)
      assert.strictEqual(yield* dedupe.size, 100_000)
      yield* TestClock.adjust("29 seconds")
      assert.strictEqual(yield* dedupe.size, 100_000)
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual(yield* dedupe.size, 0)
    }).pipe(Effect.provide(layer)), 60_000)

  it.effect("retries see attempt 1..n, back to 1 on a redelivery that runs again", () =>
    Effect.gen(function*() {
      const attempts: Array<number> = []
      const flaky = Tool.make("flaky", { description: "Flaky.", input: {}, timeout: "30 seconds", retries: 2 }, () =>
        Effect.flatMap(ToolContext.ToolContext, (ctx) => {
          attempts.push(ctx.attempt)
          return ctx.attempt < 3 ? Effect.fail(new Error("not yet")) : Effect.succeed("ok")
        }))
      const dedupe = yield* store
      // The first delivery dies mid-way (its process lost the connection): its claim is dropped.
      const first = yield* Effect.fork(dedupe.once(key, ttl, Invocation.run(flaky, "{}", key)))
      yield* TestClock.adjust("150 millis")
      yield* Fiber.interrupt(first)
      assert.deepStrictEqual(attempts, [1, 2])
      const second = yield* Effect.fork(dedupe.once(key, ttl, Invocation.run(flaky, "{}", key)))
      yield* TestClock.adjust("1 second")
      const { result, reused } = yield* Fiber.join(second)
      assert.deepStrictEqual([result.value, reused], ["ok", false])
      assert.deepStrictEqual(attempts, [1, 2, 1, 2, 3])
    }).pipe(Effect.provide(Layer.merge(layer, RetryPolicy.layer({ toolRetry: Schedule.spaced("100 millis") })))))
})
