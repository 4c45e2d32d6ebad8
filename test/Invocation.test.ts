// These tests fail with plain Errors on purpose: the error text rules (design: Error text) say what the model reads for them.
// @effect-diagnostics globalErrorInEffectFailure:off lazyPromiseInEffectSync:off
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  Config,
  ConfigError,
  ConfigProvider,
  Data,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  LogLevel,
  Option,
  Runtime,
  Schedule,
  Schema,
  TestClock
} from "effect"
import * as fc from "fast-check"
import { Agent, Hooks, Invocation, LanguageModel, Timing, Tool, ToolContext, Toolkit, ToolResult } from "../src/index.js"
import { generatedCases } from "./support/generated.js"

/** A tool whose handler counts its runs. */
const counting = <I extends Schema.Struct.Fields>(name: string, input: I) => {
  const runs = { count: 0 }
  const tool = Tool.make(name, { description: "Counts its runs.", input, timeout: "10 seconds" }, () =>
    Effect.sync(() => {
      runs.count++
      return "ran"
    }))
  return { runs, tool }
}

const orderInput = {
  order: Schema.Struct({
    id: Schema.String,
    customer: Schema.Struct({ name: Schema.String, tier: Schema.optional(Schema.Literal("gold", "silver")) })
  }),
  note: Schema.optional(Schema.String)
}

const validOrder = { order: { id: "ord-1", customer: { name: "Ada" } } }

describe("Invocation.run: input (design: Input)", () => {
  it.effect("runs the handler on valid JSON text and on a value", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("order_tool", orderInput)
      const fromText = yield* Invocation.run(tool, JSON.stringify(validOrder))
      const fromValue = yield* Invocation.run(tool, validOrder)
      assert.deepStrictEqual([fromText.value, fromText.error, fromText.success], ["ran", undefined, true])
      assert.strictEqual(fromValue.value, "ran")
      assert.strictEqual(runs.count, 2)
    }))

  it.effect("refuses an unexpected key at depth 0, 1 and 2, naming its path", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("order_tool", orderInput)
      const depth0 = yield* Invocation.run(tool, { ...validOrder, extra: 1 })
      const depth1 = yield* Invocation.run(tool, { order: { ...validOrder.order, extra: 1 } })
      const depth2 = yield* Invocation.run(tool, { order: { id: "ord-1", customer: { name: "Ada", extra: 1 } } })
      assert.match(depth0.error!, /^order_tool: invalid input: extra: is unexpected/)
      assert.match(depth1.error!, /^order_tool: invalid input: order\.extra: is unexpected/)
      assert.match(depth2.error!, /^order_tool: invalid input: order\.customer\.extra: is unexpected/)
      assert.isFalse(depth0.success)
      assert.strictEqual(runs.count, 0)
    }))

  it.effect("lists all three problems of a payload with three problems", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("order_tool", orderInput)
      const result = yield* Invocation.run(tool, { order: { id: 7, customer: {} }, surprise: true })
      assert.strictEqual(
        result.error,
        "order_tool: invalid input: surprise: is unexpected, expected: \"order\" | \"note\"; " +
          "order.id: Expected string, actual 7; order.customer.name: is missing"
      )
      assert.strictEqual(runs.count, 0)
    }))

  it.effect("lists every problem of a payload at once, without optional-field noise", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("order_tool", orderInput)
      const result = yield* Invocation.run(
        tool,
        "{\"order\":{\"id\":7,\"customer\":{\"tier\":\"bronze\"}},\"note\":false}"
      )
      const issues = result.error!.replace("order_tool: invalid input: ", "").split("; ")
      assert.deepStrictEqual(issues, [
        "order.id: Expected string, actual 7",
        "order.customer.name: is missing",
        "order.customer.tier: Expected one of \"gold\", \"silver\", actual \"bronze\"",
        "note: Expected string, actual false"
      ])
      assert.notInclude(result.error!, "Expected undefined")
      assert.strictEqual(runs.count, 0)
    }))

  it.effect("an enum refused is one issue naming every member; a union of types keeps one per member", () =>
    Effect.gen(function*() {
      const { tool } = counting("pick", {
        kind: Schema.Literal("a", "b"),
        level: Schema.Literal(1, 2, 3),
        id: Schema.Union(Schema.String, Schema.Number)
      })
      const result = yield* Invocation.run(tool, { kind: "c", level: 4, id: true })
      assert.strictEqual(
        result.error,
        "pick: invalid input: kind: Expected one of \"a\", \"b\", actual \"c\"; level: Expected one of 1, 2, 3, actual 4; " +
          "id: Expected string, actual true; id: Expected number, actual true"
      )
    }))

  it.effect("refuses __proto__ and constructor keys, however spelled, in text and in values", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("any_tool", { payload: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })
      const texts = [
        "{\"payload\":{\"__proto__\":{\"admin\":true}}}",
        "{\"payload\":{\"a\":{\"constructor\":{\"prototype\":{}}}}}",
        "{\"payload\":{\"\\u005f_proto__\":{\"admin\":true}}}"
      ]
      for (const text of texts) {
        const result = yield* Invocation.run(tool, text)
        assert.match(result.error!, /^any_tool: invalid input: the key "(__proto__|constructor)" is not allowed$/, text)
      }
      const fromValue = yield* Invocation.run(tool, JSON.parse("{\"payload\":{\"__proto__\":{\"admin\":true}}}"))
      assert.strictEqual(fromValue.error, "any_tool: invalid input: the key \"__proto__\" is not allowed")
      assert.strictEqual(({} as Record<string, unknown>).admin, undefined)
      assert.strictEqual(runs.count, 0)
    }))

  it.effect("refuses a payload over the size limit (default 1 MiB, configurable)", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("text_tool", { text: Schema.String })
      const big = JSON.stringify({ text: "x".repeat(1024 * 1024) })
      const result = yield* Invocation.run(tool, big)
      assert.strictEqual(result.error, "text_tool: invalid input: the arguments exceed 1048576 bytes")
      // Multi-byte characters count as bytes, not characters.
      const small = yield* Invocation.run(tool, JSON.stringify({ text: "é".repeat(60) })).pipe(
        Effect.provide(Invocation.layer({ maxPayloadBytes: 100 }))
      )
      assert.strictEqual(small.error, "text_tool: invalid input: the arguments exceed 100 bytes")
      const asValue = yield* Invocation.run(tool, { text: "y".repeat(200) }).pipe(
        Effect.provide(Invocation.layer({ maxPayloadBytes: 100 }))
      )
      assert.strictEqual(asValue.error, "text_tool: invalid input: the arguments exceed 100 bytes")
      assert.strictEqual(runs.count, 0)
      const fits = yield* Invocation.run(tool, JSON.stringify({ text: "z".repeat(50) })).pipe(
        Effect.provide(Invocation.layer({ maxPayloadBytes: 100 }))
      )
      assert.strictEqual(fits.value, "ran")
    }))

  it.effect("the limits read through an Effect Config (layerConfig): given ones apply, a malformed one fails the layer", () =>
    Effect.gen(function*() {
      const { tool } = counting("config_tool", { text: Schema.String })
      const limits = Invocation.layerConfig(Config.all({ maxPayloadBytes: Config.integer("MAX_PAYLOAD_BYTES") }))
      const withEnv = (value: string) => Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["MAX_PAYLOAD_BYTES", value]])))
      const small = yield* Invocation.run(tool, { text: "y".repeat(200) }).pipe(
        Effect.provide(limits.pipe(Layer.provide(withEnv("100"))))
      )
      assert.strictEqual(small.error, "config_tool: invalid input: the arguments exceed 100 bytes")
      const malformed = yield* Effect.flip(Invocation.run(tool, "{}").pipe(Effect.provide(limits.pipe(Layer.provide(withEnv("many"))))))
      assert.strictEqual(ConfigError.isConfigError(malformed), true)
      assert.include(String(malformed), "MAX_PAYLOAD_BYTES")
    }))

  it.effect("a flat input (no struct below it) decodes as any: the same results and texts, whatever the arguments", () =>
    Effect.gen(function*() {
      // The pipeline checks a flat struct's keys itself (`flatKeys`); the suspended field makes the
      // second tool's input not flat, so it takes Effect's own check of unexpected keys.
      const fields = {
        name: Schema.String,
        count: Schema.Int.pipe(Schema.between(1, 9)),
        tier: Schema.optional(Schema.Literal("gold", "silver")),
        tags: Schema.Array(Schema.String)
      }
      const flat = counting("flat_tool", fields).tool
      const nested = counting("flat_tool", { ...fields, name: Schema.suspend(() => Schema.String) }).tool
      const value = fc.oneof(
        fc.string(),
        fc.integer({ min: -2, max: 12 }),
        fc.constantFrom("gold", "bronze"),
        fc.array(fc.string())
      )
      const keys = fc.constantFrom("name", "count", "tier", "tags", "extra")
      const runtime = yield* Effect.runtime<never>()
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.dictionary(keys, value), fc.boolean(), async (args, asText) => {
            const payload = asText ? JSON.stringify(args) : args
            const both = Effect.all([Invocation.run(flat, payload), Invocation.run(nested, payload)])
            const [a, b] = await Runtime.runPromise(runtime)(both)
            assert.deepStrictEqual([a!.value, a!.error], [b!.value, b!.error])
          }),
          { numRuns: 500 }
        )
      )
      // A value (not text) may have keys JSON.stringify leaves out: Effect's check sees them, so does the pipeline's.
      const hidden = Object.defineProperty({ name: "a", count: 2, tags: [] }, "secret", { value: 1, enumerable: false })
      const symbolic = { name: "a", count: 2, tags: [], [Symbol.for("x")]: 1 }
      for (const odd of [hidden, symbolic]) {
        const [a, b] = [yield* Invocation.run(flat, odd), yield* Invocation.run(nested, odd)]
        assert.match(a.error!, /is unexpected/)
        assert.strictEqual(a.error, b.error)
      }
      const valid = yield* Invocation.run(flat, { name: "a", count: 2, tags: [] })
      assert.strictEqual(valid.value, "ran")
      const extra = yield* Invocation.run(flat, { name: "a", count: 2, tags: [], extra: 1 })
      assert.match(extra.error!, /^flat_tool: invalid input: extra: is unexpected/)
    }))

  it.effect("refuses text that is not JSON, and values that are not JSON", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("text_tool", { text: Schema.String })
      const broken = yield* Invocation.run(tool, "{\"text\":")
      assert.match(broken.error!, /^text_tool: invalid input: not valid JSON \(/)
      const bigint = yield* Invocation.run(tool, { text: 1n })
      assert.match(bigint.error!, /^text_tool: invalid input: the arguments are not JSON/)
      assert.strictEqual(runs.count, 0)
    }))

  it.effect("a parsed value nested 100,000 deep is refused for its depth, by run and by the typed call, not with the engine's words", () =>
    Effect.gen(function*() {
      interface Node {
        readonly next?: Node | undefined
      }
      const NodeSchema: Schema.Schema<Node> = Schema.Struct({ next: Schema.optional(Schema.suspend(() => NodeSchema)) })
      let runs = 0
      const walk = Tool.make("walk", { description: "Walk.", input: { tree: NodeSchema }, output: Schema.Number, timeout: "1 second" }, () =>
        Effect.sync(() => ++runs))
      let tree: Node = {}
      for (let i = 0; i < 100_000; i++) tree = { next: tree }
      const result = yield* Invocation.run(walk, { tree })
      assert.strictEqual(result.error, "walk: invalid input: the value is nested deeper than 128 levels")
      const failure = yield* Effect.flip(Invocation.call(walk, { tree }))
      assert.strictEqual(failure._tag, "InvalidInput")
      assert.strictEqual(failure._tag === "InvalidInput" ? failure.reason : "", "the value is nested deeper than 128 levels")
      assert.strictEqual(runs, 0)
    }))

  it.effect("refuses arguments nested deeper than the limit whatever the Schema, so reusing an idempotent call cannot exhaust the stack", () =>
    Effect.gen(function*() {
      // `unknown` takes any depth; keying the input for reuse used to walk it and die.
      let runs = 0
      const echo = Tool.make("echo", { description: "Echo.", input: { x: Schema.Unknown }, timeout: "1 second", idempotent: true }, () =>
        Effect.sync(() => ++runs))
      let deep = "1"
      for (let i = 0; i < 100_000; i++) deep = `[${deep}]`
      const args = `{"x":${deep}}`
      const direct = yield* Invocation.run(echo, args)
      assert.strictEqual(direct.error, "echo: invalid input: the value is nested deeper than 128 levels")
      const call = (id: string) => ({ id, name: "echo", arguments: args })
      const run = yield* Agent.run(Agent.make({ tools: [echo] }), "go").pipe(
        Effect.provide(LanguageModel.layerScripted([{ toolCalls: [call("1"), call("2")] }, { text: "done" }]))
      )
      assert.deepStrictEqual(run.toolCalls.map((c) => c.result.failure?._tag), ["InvalidInput", "InvalidInput"])
      assert.strictEqual(run.output, "done")
      // Shallow enough: still taken, and reused.
      const shallow = yield* Invocation.run(echo, { x: [[[1]]] })
      assert.deepStrictEqual([shallow.value, runs], [1, 1])
    }))
}, generatedCases)

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}
class BillingDown extends Error {}
class GateJammed extends Data.TaggedError("GateJammed")<{ readonly gate: string }> {}

const failing = (name: string, fail: Effect.Effect<never, unknown>, options: Partial<Tool.Options<any, unknown>> = {}) =>
  Tool.make(name, { description: "Fails.", input: {}, timeout: "10 seconds", ...options }, () => fail)

describe("Invocation.run: error text (design: Error text)", () => {
  it.effect("a tagged error gives <tag>: <message>", () =>
    Effect.gen(function*() {
      const tool = failing("lookup_order", Effect.fail(new NotFound({ message: "no order with id=ord-4821" })))
      const result = yield* Invocation.run(tool, "{}")
      assert.strictEqual(result.error, "NotFound: no order with id=ord-4821")
      assert.isFalse(result.success)
      assert.strictEqual(result.value, undefined)
    }))

  it.effect("a tagged error without a message shows its fields", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(failing("gate", Effect.fail(new GateJammed({ gate: "g-7" }))), "{}")
      assert.strictEqual(result.error, "GateJammed: {\"gate\":\"g-7\"}")
    }))

  it.effect("a plain Error, an Error subclass and defects give their class names", () =>
    Effect.gen(function*() {
      const texts: Array<string | undefined> = []
      for (
        const effect of [
          Effect.fail(new Error("boom")),
          Effect.fail(new BillingDown("billing is down")),
          Effect.die(new RangeError("out of range")),
          Effect.sync(() => {
            throw new TypeError("x is not a function")
          }),
          Effect.die("a string defect")
        ]
      ) {
        texts.push((yield* Invocation.run(failing("t", effect), "{}")).error)
      }
      assert.deepStrictEqual(texts, [
        "Error: boom",
        "BillingDown: billing is down",
        "RangeError: out of range",
        "TypeError: x is not a function",
        "Error: a string defect"
      ])
    }))

  it.effect("a handler that throws instead of returning an effect is a defect, not a crash", () =>
    Effect.gen(function*() {
      const tool = Tool.make("thrower", { description: "Throws.", input: {}, timeout: "1 second" }, () => {
        throw new SyntaxError("bad handler")
      })
      assert.strictEqual((yield* Invocation.run(tool, {})).error, "SyntaxError: bad handler")
    }))

  it.effect("cuts a 10,000-character message to 2,048 characters", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(failing("long", Effect.fail(new Error("m".repeat(10_000)))), "{}")
      assert.strictEqual(result.error!.length, 2048)
      assert.isTrue(result.error!.startsWith("Error: mmm"))
    }))

  it.effect("uses errorTransform, and fails closed when it throws or returns a non-string", () =>
    Effect.gen(function*() {
      const secret = Effect.fail(new Error("password=hunter2"))
      const transformed = failing("login", secret, { errorTransform: () => "login failed: check the credentials" })
      const throws = failing("login", secret, {
        errorTransform: () => {
          throw new Error("transform broke")
        }
      })
      const nonString = failing("login", secret, { errorTransform: (() => 42) as any })
      assert.strictEqual((yield* Invocation.run(transformed, "{}")).error, "login failed: check the credentials")
      assert.strictEqual((yield* Invocation.run(throws, "{}")).error, "tool login failed")
      assert.strictEqual((yield* Invocation.run(nonString, "{}")).error, "tool login failed")
      const defect = failing("login", Effect.die(new Error("password=hunter2")), { errorTransform: () => "hidden" })
      assert.strictEqual((yield* Invocation.run(defect, "{}")).error, "hidden")
    }))

  it.effect("nothing escapes as a failure or a defect, whatever the arguments", () =>
    Effect.gen(function*() {
      const { tool } = counting("order_tool", orderInput)
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.oneof(fc.anything(), fc.json(), fc.string()), async (args) => {
            const exit = await Effect.runPromiseExit(Invocation.run(tool, args))
            return Exit.isSuccess(exit) && (exit.value.error === undefined) === exit.value.success
          }),
          { numRuns: 300 }
        )
      )
    }))
}, generatedCases)

describe("Invocation.run: the kind of each failure (design: Error text)", () => {
  it.effect("invalid input, a passed deadline, a failure, a defect, an interruption and invalid output each have their _tag", () =>
    Effect.gen(function*() {
      const { tool } = counting("typed", { n: Schema.Number })
      const error = new NotFound({ message: "no order" })
      const kinds = [
        yield* Invocation.run(tool, { n: "one" }),
        yield* Invocation.run(tool, { n: 1 }, { deadlineAt: -1 }),
        yield* Invocation.run(failing("fails", Effect.fail(error)), {}),
        yield* Invocation.run(failing("dies", Effect.die(error)), {}),
        yield* Invocation.run(failing("stops", Effect.interrupt), {}),
        yield* Invocation.run(Tool.make("bad", { description: "Bad.", input: {}, timeout: "1 second" }, () => 1n), {})
      ].map((result) => result.failure?._tag)
      assert.deepStrictEqual(kinds, ["InvalidInput", "DeadlinePassed", "HandlerFailed", "HandlerFailed", "Interrupted", "InvalidOutput"])
    }))

  it.effect("a handler's failure carries its cause; a timeout the time allowed", () =>
    Effect.gen(function*() {
      const error = new NotFound({ message: "no order" })
      const failed = (yield* Invocation.run(failing("fails", Effect.fail(error)), {})).failure
      assert.strictEqual(failed?._tag, "HandlerFailed")
      const squashed = failed?._tag === "HandlerFailed" ? Cause.squash(failed.cause) : undefined
      assert.isTrue(squashed instanceof NotFound)
      assert.strictEqual((squashed as NotFound).message, "no order")
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "5 seconds" }, () => Effect.never)
      const fiber = yield* Effect.fork(Invocation.run(slow, {}))
      yield* TestClock.adjust("5 seconds")
      const timedOut = (yield* Fiber.join(fiber)).failure
      assert.deepStrictEqual(timedOut?._tag === "TimedOut" ? [timedOut.toolName, timedOut.allowedMillis] : [], ["slow", 5_000])
    }))
})

describe("Invocation.run: time (design: Deadlines)", () => {
  it.effect("interrupts a handler that outlives its timeout; its finalizer runs; the outcome is unknown", () =>
    Effect.gen(function*() {
      const finalized = { count: 0 }
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "5 seconds" }, () =>
        Effect.sleep("1 minute").pipe(
          Effect.as("done"),
          Effect.ensuring(Effect.sync(() => finalized.count++))
        ))
      const fiber = yield* Effect.fork(Invocation.run(slow, "{}"))
      yield* TestClock.adjust("4999 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
      assert.strictEqual(finalized.count, 0)
      yield* TestClock.adjust("1 milli")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.error, "slow timed out after 5 s; its outcome is unknown")
      assert.strictEqual(finalized.count, 1)
    }))

  it.effect("refuses a call whose deadline has passed, without running it", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("late", {})
      yield* TestClock.adjust("10 seconds")
      const past = yield* Invocation.run(tool, "{}", { deadlineAt: 9_000 })
      const now = yield* Invocation.run(tool, "{}", { deadlineAt: new Date(10_000) })
      assert.strictEqual(past.error, "late: its deadline passed before it started; it did not run")
      assert.strictEqual(now.error, past.error)
      assert.strictEqual(runs.count, 0)
    }))

  it.effect("a deadlineAt earlier than the timeout interrupts at the deadline", () =>
    Effect.gen(function*() {
      const tool = Tool.make("patient", { description: "Sleeps.", input: {}, timeout: "60 seconds" }, () =>
        Effect.sleep("30 seconds"))
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}", { deadlineAt: 2_000 }))
      yield* TestClock.adjust("1999 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
      yield* TestClock.adjust("1 milli")
      assert.strictEqual((yield* Fiber.join(fiber)).error, "patient timed out after 2 s; its outcome is unknown")
    }))

  it.effect("a handler that finishes in time succeeds, and void output is null", () =>
    Effect.gen(function*() {
      const tool = Tool.make("prompt", { description: "Sleeps a bit.", input: {}, timeout: "5 seconds" }, () =>
        Effect.sleep("3 seconds"))
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
      yield* TestClock.adjust("3 seconds")
      const result = yield* Fiber.join(fiber)
      assert.isTrue(result.success)
      assert.strictEqual(result.value, null)
    }))

  it.effect("interrupting the caller interrupts the handler and runs its finalizers", () =>
    Effect.gen(function*() {
      const finalized = { count: 0 }
      const tool = Tool.make("held", { description: "Holds.", input: {}, timeout: "60 seconds" }, () =>
        Effect.never.pipe(Effect.ensuring(Effect.sync(() => finalized.count++))))
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
      yield* TestClock.adjust("1 second")
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(finalized.count, 1)
    }))
})

const noJitter = Timing.layer({ toolRetry: Schedule.exponential("100 millis") })

describe("Invocation.run: retries (design: Retries)", () => {
  it.effect("retries: 2 and a handler failing twice succeed on attempt 3, after the backoff", () =>
    Effect.gen(function*() {
      const seen: Array<[number, number]> = []
      const flaky = Tool.make("flaky", {
        description: "Fails twice.",
        input: {},
        timeout: "10 seconds",
        retries: 2
      }, () =>
        Effect.gen(function*() {
          const ctx = yield* ToolContext.ToolContext
          seen.push([ctx.attempt, yield* Effect.clockWith((clock) => clock.currentTimeMillis)])
          if (ctx.attempt < 3) return yield* Effect.fail(new Error(`attempt ${ctx.attempt} failed`))
          return "ok"
        }))
      const fiber = yield* Effect.fork(Invocation.run(flaky, "{}"))
      yield* TestClock.adjust("99 millis")
      assert.deepStrictEqual(seen, [[1, 0]])
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.value, "ok")
      assert.deepStrictEqual(seen, [[1, 0], [2, 100], [3, 300]])
    }).pipe(Effect.provide(noJitter)))

  it.effect("gives the last failure when every retry fails", () =>
    Effect.gen(function*() {
      let n = 0
      const tool = failing("down", Effect.suspend(() => Effect.fail(new Error(`failure ${++n}`))), { retries: 2 })
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(fiber)).error, "Error: failure 3")
    }).pipe(Effect.provide(noJitter)))

  it.effect("never retries an input error or an interruption", () =>
    Effect.gen(function*() {
      let runs = 0
      const tool = Tool.make("once", {
        description: "Interrupts itself.",
        input: { n: Schema.Number },
        timeout: "10 seconds",
        retries: 3
      }, () => Effect.suspend(() => (runs++, Effect.interrupt)))
      const bad = yield* Invocation.run(tool, { n: "one" })
      assert.match(bad.error!, /^once: invalid input: n: Expected number/)
      assert.strictEqual(runs, 0)
      const interrupted = yield* Invocation.run(tool, { n: 1 })
      assert.strictEqual(interrupted.error, "once: the call was interrupted; its outcome is unknown")
      assert.strictEqual(runs, 1)
    }).pipe(Effect.provide(noJitter)))

  it.effect("stops retrying at the deadline: a retry that cannot start before it is skipped", () =>
    Effect.gen(function*() {
      const starts: Array<number> = []
      const tool = failing(
        "stubborn",
        Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) => {
          starts.push(now)
          return Effect.fail(new Error(`failed at ${now}`))
        }),
        { retries: 5, timeout: "1 second" }
      )
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(fiber)
      // Backoff 100, 200, 400 ms: attempts at 0, 100, 300, 700; the next (1500) is past the deadline.
      assert.deepStrictEqual(starts, [0, 100, 300, 700])
      assert.strictEqual(result.error, "Error: failed at 700")
    }).pipe(Effect.provide(noJitter)))

  it.effect("logs one warning at the start when the retries cannot fit", () =>
    Effect.gen(function*() {
      const warnings: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ logLevel, message }) => {
          if (logLevel._tag === "Warning") warnings.push(String(message))
        })
      )
      const tight = failing("tight", Effect.fail(new Error("no")), { retries: 5, timeout: "1 second" })
      const roomy = failing("roomy", Effect.fail(new Error("no")), { retries: 2, timeout: "10 seconds" })
      yield* Effect.gen(function*() {
        const fibers = [yield* Effect.fork(Invocation.run(tight, "{}")), yield* Effect.fork(Invocation.run(roomy, "{}"))]
        yield* TestClock.adjust("20 seconds")
        yield* Fiber.joinAll(fibers)
      }).pipe(Effect.provide(capture))
      assert.strictEqual(warnings.length, 1)
      assert.match(warnings[0]!, /^tight: 5 retries do not fit before the deadline \(1 s away\); retry 4 and later/)
    }).pipe(Effect.provide(noJitter)))

  it.effect("a handler's failure is the call's result, not an \"unhandled error\" log line, at any log level", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => void lines.push(String(message)))
      )
      // It suspends first: it runs in a fiber of its own, whose failure the pipeline reports.
      const tool = failing("later", Effect.zipRight(Effect.sleep("1 second"), Effect.fail(new Error("no"))), {
        timeout: "10 seconds"
      })
      const result = yield* Effect.gen(function*() {
        const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
        yield* TestClock.adjust("2 seconds")
        return yield* Fiber.join(fiber)
      }).pipe(Effect.provide(capture), Logger.withMinimumLogLevel(LogLevel.All))
      assert.strictEqual(result.error, "Error: no")
      assert.deepStrictEqual(lines.filter((line) => line.includes("unhandled error")), [])
    }))

  it.effect("the default policy backs off with jitter", () =>
    Effect.gen(function*() {
      const starts: Array<number> = []
      const tool = failing(
        "jittery",
        Effect.flatMap(Effect.clockWith((clock) => clock.currentTimeMillis), (now) => {
          starts.push(now)
          return Effect.fail(new Error("no"))
        }),
        { retries: 2 }
      )
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(fiber)
      assert.strictEqual(starts.length, 3)
      // 200 ms then 400 ms, each jittered to 80-120 %.
      assert.isTrue(starts[1]! >= 160 && starts[1]! <= 240, `first retry at ${starts[1]}`)
      assert.isTrue(starts[2]! - starts[1]! >= 320 && starts[2]! - starts[1]! <= 480, `second at ${starts[2]}`)
    }))
})

class Busy extends Schema.TaggedError<Busy>()("Busy", { message: Schema.String }) {}

/** A refund tool whose handler counts its runs and fails with `failures[run - 1]`, then succeeds. */
const refund = (
  failures: ReadonlyArray<Effect.Effect<never, NotFound | Busy>>,
  options: Pick<Tool.Options<any, unknown, NotFound | Busy>, "permanent" | "retryable">
) => {
  const runs = { count: 0 }
  const tool = Tool.make("issue_refund", {
    description: "Refunds a charge.",
    input: {},
    timeout: "10 seconds",
    retries: 2,
    ...options
  }, () => Effect.suspend(() => failures[runs.count++] ?? Effect.succeed("refunded")))
  return { runs, tool }
}

const notFound = Effect.fail(new NotFound({ message: "no charge ch-1" }))
const busy = Effect.fail(new Busy({ message: "billing is busy" }))

/** Runs `tool` to its end on the TestClock, with the retry events it announced. */
const runToEnd = (tool: Tool.Any) =>
  Effect.gen(function*() {
    const retries: Array<Invocation.RetryEvent> = []
    const observer = Layer.succeed(Invocation.InvocationObserver, { onRetry: (event) => void retries.push(event) })
    const fiber = yield* Effect.fork(Invocation.run(tool, "{}").pipe(Effect.provide(observer)))
    yield* TestClock.adjust("10 seconds")
    return { result: yield* Fiber.join(fiber), retries }
  })

describe("Invocation.run: which failures are retried (design: Retries)", () => {
  it.effect("a _tag listed in permanent runs once, whatever retries says", () =>
    Effect.gen(function*() {
      const { runs, tool } = refund([notFound, notFound, notFound], { permanent: ["NotFound"] })
      const { result, retries } = yield* runToEnd(tool)
      assert.strictEqual(runs.count, 1)
      assert.strictEqual(result.error, "NotFound: no charge ch-1")
      assert.deepStrictEqual(retries, [])
    }).pipe(Effect.provide(noJitter)))

  it.effect("a failure that retryable calls not retryable runs once", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const { runs, tool } = refund([notFound, notFound, notFound], {
        retryable: (error) => (seen.push(error._tag), error._tag !== "NotFound")
      })
      const { result } = yield* runToEnd(tool)
      assert.strictEqual(runs.count, 1)
      assert.strictEqual(result.error, "NotFound: no charge ch-1")
      assert.deepStrictEqual(seen, ["NotFound"])
    }).pipe(Effect.provide(noJitter)))

  it.effect("a transient failure is retried as before, announced to the observer and the hooks", () =>
    Effect.gen(function*() {
      const attempts: Array<number> = []
      const recordAttempts = Hooks.layer({
        tool: [(call, proceed) => Effect.ensuring(proceed, Effect.sync(() => void attempts.push(call.attempts())))]
      })
      const byTag = refund([busy, busy], { permanent: ["NotFound"] })
      const byPredicate = refund([busy, busy], { retryable: (error) => error._tag === "Busy" })
      for (const { runs, tool } of [byTag, byPredicate]) {
        const { result, retries } = yield* runToEnd(tool).pipe(Effect.provide(recordAttempts))
        assert.strictEqual(result.value, "refunded")
        assert.strictEqual(runs.count, 3)
        assert.deepStrictEqual(retries.map((r) => [r.attempt, r.delayMillis, r.error]), [
          [2, 100, "Busy: billing is busy"],
          [3, 200, "Busy: billing is busy"]
        ])
      }
      assert.deepStrictEqual(attempts, [3, 3])
    }).pipe(Effect.provide(noJitter)))

  it.effect("stops at the first permanent failure after transient ones", () =>
    Effect.gen(function*() {
      const { runs, tool } = refund([busy, notFound, busy], { permanent: ["NotFound"] })
      const { result } = yield* runToEnd(tool)
      assert.strictEqual(runs.count, 2)
      assert.strictEqual(result.error, "NotFound: no charge ch-1")
    }).pipe(Effect.provide(noJitter)))

  it.effect("a predicate that throws, or answers anything but true, does not retry", () =>
    Effect.gen(function*() {
      const throws = refund([busy, busy], {
        retryable: () => {
          throw new Error("predicate broke")
        }
      })
      const truthy = refund([busy, busy], { retryable: (() => "yes") as any })
      for (const { runs, tool } of [throws, truthy]) {
        const { result } = yield* runToEnd(tool)
        assert.strictEqual(runs.count, 1)
        assert.strictEqual(result.error, "Busy: billing is busy")
      }
    }).pipe(Effect.provide(noJitter)))

  it.effect("defects are retried as before, unless permanent lists their _tag; retryable is not asked", () =>
    Effect.gen(function*() {
      const asked: Array<unknown> = []
      const died = refund([Effect.die(new Error("socket reset")) as Effect.Effect<never, Busy>], {
        retryable: (error) => (asked.push(error), false)
      })
      const orDied = refund([Effect.orDie(notFound), Effect.orDie(notFound)], { permanent: ["NotFound"] })
      assert.strictEqual((yield* runToEnd(died.tool)).result.value, "refunded")
      assert.strictEqual(died.runs.count, 2)
      assert.deepStrictEqual(asked, [])
      assert.strictEqual((yield* runToEnd(orDied.tool)).result.error, "NotFound: no charge ch-1")
      assert.strictEqual(orDied.runs.count, 1)
    }).pipe(Effect.provide(noJitter)))

  it.effect("malformed rules on a tool run without Toolkit.make retry nothing (fail closed)", () =>
    Effect.gen(function*() {
      const tag = refund([busy, busy], { permanent: "NotFound" as any })
      const flag = refund([busy, busy], { retryable: true as any })
      for (const { runs, tool } of [tag, flag]) {
        assert.strictEqual((yield* runToEnd(tool)).result.error, "Busy: billing is busy")
        assert.strictEqual(runs.count, 1)
      }
    }).pipe(Effect.provide(noJitter)))
})

describe("Invocation.run: ToolContext (design: Call context)", () => {
  const whoAmI = Tool.make("who_am_i", { description: "Reports its context.", input: {}, timeout: "30 seconds" }, () =>
    Effect.map(ToolContext.current, Option.getOrNull))

  it.effect("is None when the body runs directly (Tool.test), and the call given when one is", () =>
    Effect.gen(function*() {
      assert.isNull(yield* Tool.test(whoAmI, {}))
      const given = yield* Tool.test(whoAmI, {}, ToolContext.makeCall({ taskId: "task-1", toolCallId: "call-1", deadlineAt: 9_000 }))
      assert.deepInclude(given, { taskId: "task-1", toolCallId: "call-1", attempt: 1, deadlineAt: 9_000 })
    }))

  it.effect("is Some with the ids, the attempt and the effective deadline inside Invocation.run", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("5 seconds")
      const given = yield* Invocation.run(whoAmI, "{}", { taskId: "task-9", toolCallId: "call-3", deadlineAt: 20_000 })
      assert.deepStrictEqual(given.value, {
        taskId: "task-9",
        toolCallId: "call-3",
        attempt: 1,
        deadlineAt: 20_000,
        expiringThresholdMillis: 1000
      })
    }))

  it.effect("defaults the ids, and takes the timeout as the deadline when it is earlier", () =>
    Effect.gen(function*() {
      const tool = Tool.make("ctx", { description: "Context.", input: {}, timeout: "30 seconds" }, () =>
        Effect.map(ToolContext.ToolContext, ({ deadlineAt, taskId, toolCallId }) => ({ deadlineAt, taskId, toolCallId })))
      const result = (yield* Invocation.run(tool, "{}", { deadlineAt: 60_000 })).value as Record<string, unknown>
      assert.strictEqual(result.taskId, "local")
      assert.match(String(result.toolCallId), /^call-[0-9a-f-]{36}$/)
      assert.strictEqual(result.deadlineAt, 30_000)
    }))

  it.effect("remaining and isExpiring follow the Clock", () =>
    Effect.gen(function*() {
      const tool = Tool.make("watcher", { description: "Watches time.", input: {}, timeout: "10 seconds" }, () =>
        Effect.gen(function*() {
          const early = [yield* ToolContext.remaining, yield* ToolContext.isExpiring] as const
          yield* Effect.sleep("9500 millis")
          const late = [yield* ToolContext.remaining, yield* ToolContext.isExpiring] as const
          return { early: [early[0].toJSON(), early[1]], late: [late[0].toJSON(), late[1]] }
        }))
      const fiber = yield* Effect.fork(Invocation.run(tool, "{}"))
      yield* TestClock.adjust("9500 millis")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(result.value, {
        early: [{ _id: "Duration", _tag: "Millis", millis: 10_000 }, false],
        late: [{ _id: "Duration", _tag: "Millis", millis: 500 }, true]
      })
    }))
})

describe("Invocation.run: output", () => {
  it.effect("encodes the output with the tool's output Schema, dropping undeclared fields", () =>
    Effect.gen(function*() {
      const tool = Tool.make("order", {
        description: "An order.",
        input: {},
        output: Schema.Struct({ id: Schema.String, placedAt: Schema.Date }),
        timeout: "1 second"
      }, () => Effect.succeed({ id: "ord-1", placedAt: new Date("2026-11-30T10:00:00Z"), internalNote: "x" }))
      assert.deepStrictEqual((yield* Invocation.run(tool, "{}")).value, {
        id: "ord-1",
        placedAt: "2026-11-30T10:00:00.000Z"
      })
    }))

  it.effect("a value that fails the output Schema is an error result that says so", () =>
    Effect.gen(function*() {
      const tool = Tool.make("order", {
        description: "An order.",
        input: {},
        output: Schema.Struct({ id: Schema.String }),
        timeout: "1 second"
      }, () => Effect.succeed({ id: 42 } as any))
      assert.strictEqual((yield* Invocation.run(tool, "{}")).error, "order: invalid output: id: Expected string, actual 42")
    }))

  it.effect("a function, a bigint and a cycle are error results that say the output is not JSON", () =>
    Effect.gen(function*() {
      const cycle: Record<string, unknown> = { name: "loop" }
      cycle.self = cycle
      const outputs = [{ callback: () => 1 }, { total: 10n }, cycle, [1, Number.NaN], new Map()]
      const errors: Array<string | undefined> = []
      for (const output of outputs) {
        const tool = Tool.make("raw", { description: "Raw.", input: {}, timeout: "1 second" }, () =>
          Effect.succeed(output))
        errors.push((yield* Invocation.run(tool, "{}")).error)
      }
      assert.deepStrictEqual(errors, [
        "raw: invalid output: a function at callback is not JSON",
        "raw: invalid output: a bigint at total is not JSON",
        "raw: invalid output: a cycle at self is not JSON",
        "raw: invalid output: the number NaN at [1] is not JSON",
        "raw: invalid output: a Map is not JSON"
      ])
    }))

  it.effect("an output nested 100,000 deep, or over maxPayloadBytes, is an invalid-output result (design: Error text, Hostile clients)", () =>
    Effect.gen(function*() {
      let deep: unknown = []
      for (let i = 0; i < 100_000; i++) deep = [deep]
      const tool = (name: string, output: unknown, schema: Schema.Schema<any, any> = Schema.Unknown) =>
        Tool.make(name, { description: "Raw.", input: {}, output: schema, timeout: "1 second" }, () => Effect.succeed(output))
      const nested = yield* Invocation.run(tool("deep", deep), "{}")
      assert.match(nested.error ?? "", /^deep: invalid output: the value is nested deeper than 128 levels at \[0\]\[0\]/)
      assert.isAtMost(nested.error!.length, 2048)
      // In a typed field the Schema's own formatter would recurse into it.
      const typed = yield* Invocation.run(tool("typed", { id: deep }, Schema.Struct({ id: Schema.String })), "{}")
      assert.strictEqual(typed.error, "typed: invalid output: the value is nested deeper than 128 levels")
      const big = yield* Invocation.run(tool("big", { text: "x".repeat(1024 * 1024) }), "{}")
      assert.strictEqual(big.error, "big: invalid output: the value exceeds 1048576 bytes of JSON")
      // Just under both limits passes.
      let ok: unknown = 1
      for (let i = 0; i < 127; i++) ok = [ok]
      assert.isTrue((yield* Invocation.run(tool("ok", ok), "{}")).success)
      assert.isTrue((yield* Invocation.run(tool("fits", { text: "x".repeat(1024 * 1024 - 20) }), "{}")).success)
    }))

  it.effect("arguments nested 100,000 deep in a typed field are an invalid-input result, never a RangeError", () =>
    Effect.gen(function*() {
      const { runs, tool } = counting("typed", { id: Schema.String })
      const text = `{"id":${"[".repeat(100_000)}${"]".repeat(100_000)}}`
      const result = yield* Invocation.run(tool, text)
      assert.strictEqual(result.error, "typed: invalid input: the value is nested deeper than 128 levels")
      assert.strictEqual(runs.count, 0)
    }))
})

describe("Invocation.dispatcher: a toolkit's calls by name, with one run's state (design: The call pipeline)", () => {
  /** An idempotent tool whose handler counts its runs. */
  const idempotent = () => {
    const runs = { count: 0 }
    const tool = Tool.make("lookup", {
      description: "Looks a key up.",
      input: { key: Schema.String },
      timeout: "10 seconds",
      idempotent: true
    }, ({ key }) =>
      Effect.sync(() => {
        runs.count++
        return key
      }))
    return { runs, tool }
  }

  it.effect("runs a tool by name; an unknown name is the UnknownTool result, listing the tools there are", () =>
    Effect.gen(function*() {
      const { tool } = idempotent()
      const dispatcher = Invocation.dispatcher(yield* Toolkit.make(tool))
      const found = yield* dispatcher.run("lookup", { key: "a" }, { toolCallId: "c1" })
      const unknown = yield* dispatcher.run("nope", { key: "a" })
      assert.strictEqual(found.value, "a")
      assert.strictEqual(unknown.failure?._tag, "UnknownTool")
      assert.strictEqual(unknown.error, "nope: no such tool; the available tools are lookup")
      assert.strictEqual(dispatcher.lookup("lookup"), tool)
      assert.strictEqual((dispatcher.lookup("nope") as ToolResult.UnknownTool).text, unknown.error)
    }))

  it.effect("with reuse, an idempotent tool's same call is answered by the first's outcome; without, it runs again", () =>
    Effect.gen(function*() {
      const { runs, tool } = idempotent()
      const toolkit = yield* Toolkit.make(tool)
      const reusing = Invocation.dispatcher(toolkit, { reuse: { joinInFlight: false } })
      yield* reusing.run("lookup", { key: "a" }, { toolCallId: "c1" })
      const again = yield* reusing.run("lookup", JSON.stringify({ key: "a" }), { toolCallId: "c2" })
      assert.deepStrictEqual([again.value, runs.count], ["a", 1])
      assert.deepStrictEqual([reusing.wasReused("c1"), reusing.wasReused("c2")], [false, true])
      const plain = Invocation.dispatcher(toolkit)
      yield* plain.run("lookup", { key: "a" }, { toolCallId: "c1" })
      yield* plain.run("lookup", { key: "a" }, { toolCallId: "c2" })
      assert.deepStrictEqual([runs.count, plain.wasReused("c2")], [3, false])
    }))

  it.effect("its hook state is every call's run, shared when given", () =>
    Effect.gen(function*() {
      const { tool } = idempotent()
      const seen: Array<Hooks.RunState | undefined> = []
      const hooks = Hooks.layer({
        tool: [(call, proceed) => Effect.zipRight(Effect.sync(() => seen.push(call.run)), proceed)]
      })
      const toolkit = yield* Toolkit.make(tool)
      const own = Invocation.dispatcher(toolkit, { kind: "session" })
      const state = new Hooks.RunState("task")
      const shared = Invocation.dispatcher(toolkit, { state })
      yield* Effect.provide(
        Effect.all([own.run("lookup", { key: "a" }), own.run("lookup", { key: "b" }), shared.run("lookup", { key: "c" })]),
        hooks
      )
      assert.deepStrictEqual(seen, [own.state, own.state, state])
      assert.strictEqual(own.state.kind, "session")
    }))
})

describe("Invocation: what loading it loads", () => {
  /** The URLs of the modules a fresh `node` loads to import `module` (a path from the project's folder). */
  const loadedBy = (module: string) =>
    Effect.promise(async () => {
      const { execFile } = await import("node:child_process")
      const { mkdtemp, readFile, rm } = await import("node:fs/promises")
      const { tmpdir } = await import("node:os")
      const { join } = await import("node:path")
      const { fileURLToPath } = await import("node:url")
      const dir = await mkdtemp(join(tmpdir(), "loaded-"))
      const file = join(dir, "modules.txt")
      try {
        await new Promise<void>((resolve, reject) =>
          execFile(process.execPath, [
            "--import", "tsx",
            "--import", "./test/support/recordModules.mjs",
            "--input-type=module",
            "-e", `await import(${JSON.stringify(module)})`
          ], { cwd: fileURLToPath(new URL("..", import.meta.url)), env: { ...process.env, RECORD_MODULES: file } }, (error) =>
            error === null ? resolve() : reject(error))
        )
        return (await readFile(file, "utf8")).split("\n").filter((line) => line !== "")
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    })

  it.live("loading Invocation loads nothing of @effect/platform (its Terminal comes with Hooks.approval's UserPrompt)", () =>
    Effect.gen(function*() {
      const terminal = (urls: ReadonlyArray<string>) => urls.filter((url) => url.endsWith("/Terminal.js"))
      const invocation = yield* loadedBy("./src/Invocation.ts")
      assert.isTrue(invocation.some((url) => url.endsWith("/src/Invocation.ts")), "the recording sees the module itself")
      assert.deepStrictEqual(invocation.filter((url) => url.includes("/@effect/platform/")), [])
      // The same probe on the public Hooks module, which offers approval, does see Terminal.
      assert.strictEqual(terminal(yield* loadedBy("./src/Hooks.ts")).length, 1)
    }), 30_000)
})
