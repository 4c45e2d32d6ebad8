/**
 * The call's Scope (design: Deadlines, Call context): a handler acquires with `Effect.acquireRelease`, no
 * `Effect.scoped`, and the pipeline releases when the attempt ends: on success, on failure, on interruption
 * and at the deadline (before the call answers), each attempt its own. `Tool.test` closes it when the body ends.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Schema, TestClock } from "effect"
import { Invocation, Tool } from "../src/index.js"

/** A resource whose acquisition and release are written down, with the time of each on the fiber's clock. */
const resource = (events: Array<string>) =>
  Effect.acquireRelease(
    Effect.map(Effect.clockWith((clock) => clock.currentTimeMillis), (at) => void events.push(`acquired at ${at}`)),
    (_, exit) =>
      Effect.map(
        Effect.clockWith((clock) => clock.currentTimeMillis),
        (at) => void events.push(`released at ${at} (${Exit.isSuccess(exit) ? "success" : Exit.isInterrupted(exit) ? "interrupted" : "failure"})`)
      )
  )

/** A tool that holds the resource, then does `then`. */
const holding = <A, E>(events: Array<string>, then: Effect.Effect<A, E>, options?: { readonly retries?: number }) =>
  Tool.make("hold", {
    description: "Holds a resource.",
    input: {},
    timeout: "10 seconds",
    retries: options?.retries ?? 0,
    retryable: () => true
  }, () =>
    Effect.gen(function*() {
      yield* resource(events)
      return yield* then
    }))

describe("the call's Scope (design: Deadlines)", () => {
  it.effect("a body's acquireRelease is released at the deadline under TestClock: not before, right then; the call reads TimedOut", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const running = yield* Effect.fork(Invocation.run(holding(events, Effect.never), {}))
      yield* TestClock.adjust("9999 millis")
      assert.deepStrictEqual(events, ["acquired at 0"])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(events, ["acquired at 0", "released at 10000 (interrupted)"])
      const result = yield* Fiber.join(running)
      assert.strictEqual(result.failure?._tag, "TimedOut")
    }))

  it.live("on the live clock too: released at the deadline, before the call answers", () =>
    Effect.gen(function*() {
      let releasedAfter: number | undefined
      const started = performance.now()
      const tool = Tool.make("hold_live", { description: "Holds.", input: {}, timeout: "200 millis" }, () =>
        Effect.zipRight(
          Effect.acquireRelease(Effect.void, () => Effect.sync(() => void (releasedAfter = performance.now() - started))),
          Effect.never
        ))
      const result = yield* Invocation.run(tool, {})
      assert.strictEqual(result.failure?._tag, "TimedOut")
      assert.isDefined(releasedAfter)
      assert.isAtLeast(releasedAfter!, 195)
      assert.isBelow(releasedAfter!, 2000)
    }))

  it.effect("released when the body succeeds, at once or after suspending, before the call answers", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const now = yield* Invocation.run(holding(events, Effect.succeed("done")), {})
      assert.strictEqual(now.value, "done")
      assert.deepStrictEqual(events, ["acquired at 0", "released at 0 (success)"])
      events.length = 0
      const later = yield* Effect.fork(Invocation.run(holding(events, Effect.as(Effect.sleep("2 seconds"), "later")), {}))
      yield* TestClock.adjust("2 seconds")
      assert.strictEqual((yield* Fiber.join(later)).value, "later")
      assert.deepStrictEqual(events, ["acquired at 0", "released at 2000 (success)"])
    }))

  it.effect("released when the body fails, and when the caller interrupts the call", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const failed = yield* Invocation.run(holding(events, Effect.fail(new Refused())), {})
      assert.strictEqual(failed.error, "Refused: no")
      assert.deepStrictEqual(events, ["acquired at 0", "released at 0 (failure)"])
      events.length = 0
      const running = yield* Effect.fork(Invocation.run(holding(events, Effect.never), {}))
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(running)
      assert.deepStrictEqual(events, ["acquired at 0", "released at 1000 (interrupted)"])
    }))

  it.effect("each attempt has its own scope: a retried call's first resource is released before the retry acquires", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      let attempts = 0
      const flaky = Effect.suspend(() => ++attempts === 1 ? Effect.fail(new Refused()) : Effect.succeed("second"))
      const running = yield* Effect.fork(Invocation.run(holding(events, flaky, { retries: 1 }), {}))
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(running)
      assert.strictEqual(result.value, "second")
      assert.deepStrictEqual(events.map((e) => e.replace(/ at [\d.]+/, "")), [
        "acquired",
        "released (failure)",
        "acquired",
        "released (success)"
      ])
    }))

  it.effect("a fiber the body forks into its scope is interrupted when the call ends", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const tool = Tool.make("forks", { description: "Forks.", input: {}, timeout: "10 seconds" }, () =>
        Effect.gen(function*() {
          yield* Effect.forkScoped(Effect.onInterrupt(Effect.never, () => Effect.sync(() => events.push("background stopped"))))
          yield* Effect.sleep("1 second")
          return "done"
        }))
      const running = yield* Effect.fork(Invocation.run(tool, {}))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(running)).value, "done")
      assert.deepStrictEqual(events, ["background stopped"])
    }))

  it.effect("Tool.test gives the body a Scope, closed when it ends: its type needs none", () =>
    Effect.gen(function*() {
      const events: Array<string> = []
      const tool = holding(events, Effect.succeed("done"))
      // The body needs a Scope; Tool.test's effect does not.
      const tested: Effect.Effect<unknown, never, never> = Tool.test(tool, {})
      assert.strictEqual(yield* tested, "done")
      assert.deepStrictEqual(events, ["acquired at 0", "released at 0 (success)"])
    }))
})

class Refused extends Schema.TaggedError<Refused>()("Refused", { message: Schema.optionalWith(Schema.String, { default: () => "no" }) }) {}
