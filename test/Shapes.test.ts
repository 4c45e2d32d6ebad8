// Bodies that are not Effects (design: Handler shapes): async functions and plain functions, through the same pipeline.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Schedule, Schema, TestClock } from "effect"
import { Agent, Invocation, LanguageModel, Timing, Tool, ToolContext, Toolkit } from "../src/index.js"

/** Counts the process's unhandled rejections while `body` runs, after the promise jobs have drained. */
const countingUnhandled = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const seen: Array<unknown> = []
      const listener = (reason: unknown) => void seen.push(reason)
      process.on("unhandledRejection", listener)
      return { seen, listener }
    }),
    ({ seen }) =>
      Effect.gen(function*() {
        const value = yield* body
        // Node reports an unhandled rejection once the microtask queue is empty: wait past that.
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        return { value, unhandled: seen.length }
      }),
    ({ listener }) => Effect.sync(() => void process.off("unhandledRejection", listener))
  )

class RateLimited extends Error {
  override readonly name = "RateLimited"
}

const noJitter = Timing.layer({ toolRetry: Schedule.exponential("100 millis") })

describe("async bodies (design: Handler shapes)", () => {
  it.effect("a resolving body succeeds, its output encoded by the output Schema", () =>
    Effect.gen(function*() {
      const add = Tool.make("add", {
        description: "Add.",
        input: { a: Schema.Number, b: Schema.Number },
        output: Schema.Number,
        timeout: "1 second"
      }, async ({ a, b }) => {
        await Promise.resolve()
        return a + b
      })
      const result = yield* Invocation.run(add, "{\"a\":1,\"b\":2}")
      assert.deepStrictEqual([result.value, result.error], [3, undefined])
    }))

  it.effect("gets the call's ids, attempt and deadline, and remaining() follows the Clock", () =>
    Effect.gen(function*() {
      const seen: Array<unknown> = []
      const who = Tool.make("who", { description: "Who.", input: {}, timeout: "10 seconds" }, async (_, call) => {
        seen.push([call.taskId, call.toolCallId, call.attempt, call.deadlineAt, call.remaining(), call.isExpiring()])
        return null
      })
      yield* TestClock.setTime(1_000)
      yield* Invocation.run(who, {}, { taskId: "task-1", toolCallId: "call-1", deadlineAt: 5_000 })
      yield* TestClock.setTime(4_500)
      const { remaining } = ToolContext.makeCall({ deadlineAt: 5_000 }, { unsafeCurrentTimeMillis: () => 4_500 })
      assert.deepStrictEqual(seen, [["task-1", "call-1", 1, 5_000, 4_000, false]])
      assert.strictEqual(remaining(), 500)
    }))

  it.effect("a rejection is the call's failure, <ErrorName>: <message>, with no unhandled rejection", () =>
    Effect.gen(function*() {
      const limited = Tool.make("limited", { description: "Rejects.", input: {}, timeout: "1 second" }, async () => {
        throw new RateLimited("slow down")
      })
      const typed = Tool.make("typed", { description: "Rejects.", input: {}, timeout: "1 second" }, () =>
        Promise.reject(new TypeError("x is not a function")))
      const bare = Tool.make("bare", { description: "Rejects.", input: {}, timeout: "1 second" }, () =>
        Promise.reject("just a string"))
      const { unhandled, value } = yield* countingUnhandled(
        Effect.all([Invocation.run(limited, {}), Invocation.run(typed, {}), Invocation.run(bare, {})])
      )
      assert.deepStrictEqual(value.map((r) => r.error), [
        "RateLimited: slow down",
        "TypeError: x is not a function",
        "Error: just a string"
      ])
      assert.strictEqual(unhandled, 0)
    }))

  it.effect("a body that ignores its deadline has its signal aborted there; the outcome is unknown", () =>
    Effect.gen(function*() {
      const reasons: Array<string> = []
      const stuck = Tool.make("stuck", { description: "Hangs.", input: {}, timeout: "5 seconds" }, (_, { signal }) =>
        new Promise<never>((_, reject) => {
          signal.addEventListener("abort", () => {
            reasons.push((signal.reason as DOMException).name)
            // Rejects after the call has ended: still no unhandled rejection.
            setImmediate(() => reject(new Error("late")))
          })
        }))
      const { unhandled, value } = yield* countingUnhandled(Effect.gen(function*() {
        const fiber = yield* Effect.fork(Invocation.run(stuck, {}))
        yield* TestClock.adjust("4999 millis")
        assert.deepStrictEqual(reasons, [])
        yield* TestClock.adjust("1 millis")
        return yield* Fiber.join(fiber)
      }))
      assert.strictEqual(value.error, "stuck timed out after 5 s; its outcome is unknown")
      assert.deepStrictEqual(reasons, ["TimeoutError"])
      assert.strictEqual(unhandled, 0)
    }))

  it.effect("interrupting the call aborts the signal with an AbortError", () =>
    Effect.gen(function*() {
      const reasons: Array<string> = []
      const waits = Tool.make("waits", { description: "Waits.", input: {}, timeout: "5 seconds" }, (_, { signal }) =>
        new Promise<never>(() => {
          signal.addEventListener("abort", () => reasons.push((signal.reason as DOMException).name))
        }))
      const fiber = yield* Effect.fork(Invocation.run(waits, {}))
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(reasons, ["AbortError"])
    }))

  it.effect("retries re-run a rejecting body, each attempt with its own call; permanent stops at once", () =>
    Effect.gen(function*() {
      const attempts: Array<number> = []
      const flaky = Tool.make("flaky", { description: "Flaky.", input: {}, timeout: "10 seconds", retries: 2 }, async (_, call) => {
        attempts.push(call.attempt)
        if (call.attempt < 3) throw new RateLimited(`attempt ${call.attempt}`)
        return "done"
      })
      const fiber = yield* Effect.fork(Invocation.run(flaky, {}))
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual([result.value, attempts], ["done", [1, 2, 3]])

      let runs = 0
      const refused = Tool.make("refused", {
        description: "Refused.",
        input: {},
        timeout: "10 seconds",
        retries: 2,
        permanent: ["Declined"],
        retryable: (error) => error instanceof RateLimited
      }, async () => {
        runs++
        throw Object.assign(new Error("no"), { _tag: "Declined" })
      })
      const once = yield* Invocation.run(refused, {})
      assert.deepStrictEqual([once.error, runs], ["Declined: no", 1])
    }).pipe(Effect.provide(noJitter)))

  it.effect("an idempotent async tool emitted twice in a run runs once", () =>
    Effect.gen(function*() {
      let runs = 0
      const refund = Tool.make("refund", {
        description: "Refund.",
        input: { order_id: Schema.String },
        timeout: "10 seconds",
        idempotent: true
      }, async ({ order_id }) => `refunded ${order_id} (${++runs})`)
      const result = yield* Agent.run(Agent.make({ tools: [refund] }), "refund")
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.cached, c.result.value]), [
        [false, "refunded o1 (1)"],
        [true, "refunded o1 (1)"]
      ])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      {
        toolCalls: [
          { id: "a", name: "refund", arguments: "{\"order_id\":\"o1\"}" },
          { id: "b", name: "refund", arguments: "{\"order_id\":\"o1\"}" }
        ]
      },
      { text: "ok" }
    ]))))

  it("the handler is callable directly in a test, with ToolContext.makeCall()", async () => {
    const echo = Tool.make("echo", { description: "Echo.", input: { text: Schema.String }, timeout: "1 second" }, async (
      { text },
      { signal }
    ) => `${text} ${signal.aborted}`)
    const call = ToolContext.makeCall()
    assert.strictEqual(await echo.handler({ text: "hi" }, call), "hi false")
    call.abort(new Error("stop"))
    assert.strictEqual(await echo.handler({ text: "hi" }, call), "hi true")
  })
})

describe("plain synchronous bodies (design: Handler shapes)", () => {
  it.effect("run inline: a value is the output, a throw the failure text", () =>
    Effect.gen(function*() {
      const double = Tool.make("double", {
        description: "Double.",
        input: { n: Schema.Number },
        output: Schema.Number,
        timeout: "1 second"
      }, ({ n }) => {
        if (n > 100) throw new RangeError(`${n} is over 100`)
        return n * 2
      })
      assert.strictEqual((yield* Invocation.run(double, { n: 21 })).value, 42)
      assert.strictEqual((yield* Invocation.run(double, { n: 101 })).error, "RangeError: 101 is over 100")
      assert.strictEqual(yield* Tool.test(double, { n: 2 }), 4)
      assert.match(String(yield* Effect.flip(Effect.sandbox(Tool.test(double, { n: 101 })))), /RangeError: 101 is over 100/)
    }))

  it.effect("a return that is not JSON is an invalid-output result", () =>
    Effect.gen(function*() {
      const fn = Tool.make("fn", { description: "Fn.", input: {}, timeout: "1 second" }, () => () => 1)
      const big = Tool.make("big", { description: "Big.", input: {}, timeout: "1 second" }, () => 10n)
      const typed = Tool.make("typed", { description: "Typed.", input: {}, output: Schema.Number, timeout: "1 second" }, () =>
        "seven" as unknown as number)
      assert.match((yield* Invocation.run(fn, {})).error!, /^fn: invalid output: /)
      assert.match((yield* Invocation.run(big, {})).error!, /^big: invalid output: /)
      assert.match((yield* Invocation.run(typed, {})).error!, /^typed: invalid output: .*Expected number/)
    }))
})

describe("a handler of the wrong shape (design: Handler shapes)", () => {
  const wrong = (name: string, handler: unknown) =>
    Tool.make(name, { description: "Wrong.", input: {}, timeout: "1 second" }, handler as () => number)
  const fix = "the handler must be a function, (input, call) => Effect, async (input, call) => output " +
    "or (input, call) => output"

  it.effect("is refused by Toolkit.make, before any call, naming the tool and the fix", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Toolkit.make(wrong("bare_effect", Effect.succeed(1)), wrong("nothing", null)))
      assert.deepStrictEqual(error.violations.map((v) => [v.tool, v.rule, v.message]), [
        ["bare_effect", "handler-function", `"bare_effect": ${fix}; got an Effect (wrap it: () => effect)`],
        ["nothing", "handler-function", `"nothing": ${fix}; got null`]
      ])
    }))

  it.effect("run without a toolkit, it is the same text as a failure, never a crash", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(wrong("a_number", 42), {})
      assert.strictEqual(result.error, `HandlerShapeError: "a_number": ${fix}; got number`)
    }))
})
