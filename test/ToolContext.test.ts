import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, HashMap, Logger, Option, Redacted, TestClock } from "effect"
import { Ids, Invocation, Tool, ToolContext } from "../src/index.js"

describe("ToolContext.progress and ToolContext.log outside MCP", () => {
  it.effect("progress is heard by nobody; a log line goes to Effect's logger at the matching level, Redacted hidden", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.label} ${(Array.isArray(message) ? message : [message]).map(String).join(" ")}`)
      })
      const tool = Tool.make("work", { description: "Works.", input: {}, timeout: "5 seconds" }, () =>
        Effect.gen(function*() {
          yield* ToolContext.progress(1, 2, "half")
          yield* ToolContext.log("warning", `key ${Redacted.make("k-1")}`)
          yield* ToolContext.log("critical", { token: Redacted.make("s3cret") })
          return "done"
        }))
      // A body that is not an Effect: its Call's log goes through the caller's logger too.
      const plain = Tool.make("plain", { description: "Works.", input: {}, timeout: "5 seconds" }, async (_, call) => {
        call.progress(1)
        call.log("notice", "plain line")
        return "done too"
      })
      const withLogger = Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      const result = yield* Invocation.run(tool, {}).pipe(withLogger)
      const plainResult = yield* Invocation.run(plain, {}).pipe(withLogger)
      assert.strictEqual(result.value, "done")
      assert.strictEqual(plainResult.value, "done too")
      assert.deepStrictEqual(lines, ["WARN key <redacted>", "FATAL {\"token\":\"<redacted>\"}", "INFO plain line"])
    }))
})

describe("a call's clock and log lines are its caller's fiber's (design: Call context)", () => {
  /** A logger that keeps each line with its annotations, in place of the default one. */
  const capturing = () => {
    const lines: Array<string> = []
    const logger = Logger.make(({ annotations, logLevel, message }) => {
      const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
      const where = HashMap.get(annotations, "where").pipe(Option.getOrElse(() => "-"))
      lines.push(`${logLevel.label} ${text} [${String(where)}]`)
    })
    return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
  }

  // Both ways of reading the time left: the call's `remaining` and the service's (a body that needs the service).
  const left = Tool.make("left", { description: "Time left.", input: {}, timeout: "1 minute" }, (_, call) =>
    Effect.gen(function*() {
      yield* Effect.sleep("15 seconds")
      return { call: call.remaining(), service: Duration.toMillis(yield* ToolContext.remaining) }
    }))
  const leftByCall = Tool.make("left_by_call", { description: "Time left.", input: {}, timeout: "1 minute" }, (_, call) =>
    Effect.map(Effect.sleep("15 seconds"), () => call.remaining()))

  it.effect("remaining reads the TestClock: the call's and ToolContext.remaining, in Tool.test and in Invocation.run", () =>
    Effect.gen(function*() {
      const tested = yield* Effect.fork(Tool.test(leftByCall, {}))
      const given = yield* Effect.fork(
        Effect.flatMap(ToolContext.makeCallEffect({ deadlineAt: 20_000 }), (call) => Tool.test(left, {}, call))
      )
      const invoked = yield* Effect.fork(Invocation.run(left, {}))
      yield* TestClock.adjust("15 seconds")
      assert.strictEqual(yield* Fiber.join(tested), 45_000)
      assert.deepStrictEqual(yield* Fiber.join(given), { call: 5_000, service: 5_000 })
      assert.deepStrictEqual((yield* Fiber.join(invoked)).value, { call: 45_000, service: 45_000 })
    }))

  const talks = Tool.make("talks", { description: "Logs.", input: {}, timeout: "5 seconds" }, (_, call) =>
    Effect.gen(function*() {
      call.log("info", "from the call")
      yield* ToolContext.log("warning", "from the service")
      return "said"
    }))
  const talksPlain = Tool.make("talks_plain", { description: "Logs.", input: {}, timeout: "5 seconds" }, async (_, call) => {
    call.log("error", { plain: true })
    return "said"
  })

  it.effect("call.log and ToolContext.log reach the test's logger, with its annotations, in Tool.test", () =>
    Effect.gen(function*() {
      const { layer, lines } = capturing()
      yield* Effect.gen(function*() {
        assert.strictEqual(yield* Tool.test(talks, {}), "said")
        assert.strictEqual(yield* Tool.test(talksPlain, {}), "said")
        // A call made outside any fiber (makeCall) is given the test's logger by Tool.test.
        assert.strictEqual(yield* Tool.test(talks, {}, ToolContext.makeCall()), "said")
      }).pipe(Effect.annotateLogs("where", "test"), Effect.provide(layer))
      assert.deepStrictEqual(lines, [
        "INFO from the call [test]",
        "WARN from the service [test]",
        "ERROR {\"plain\":true} [test]",
        "INFO from the call [test]",
        "WARN from the service [test]"
      ])
    }))

  it.effect("call.log and ToolContext.log reach the caller's logger, with its annotations, in Invocation.run", () =>
    Effect.gen(function*() {
      const { layer, lines } = capturing()
      yield* Effect.gen(function*() {
        assert.strictEqual((yield* Invocation.run(talks, {})).value, "said")
        assert.strictEqual((yield* Invocation.run(talksPlain, {})).value, "said")
      }).pipe(Effect.annotateLogs("where", "caller"), Effect.provide(layer))
      assert.deepStrictEqual(lines, [
        "INFO from the call [caller]",
        "WARN from the service [caller]",
        "ERROR {\"plain\":true} [caller]"
      ])
    }))

  it.effect("a call made on the fiber (makeCallEffect) logs through it; one made outside any fiber (makeCall) writes nowhere", () =>
    Effect.gen(function*() {
      const { layer, lines } = capturing()
      yield* Effect.gen(function*() {
        const onFiber = yield* ToolContext.makeCallEffect()
        onFiber.log("notice", "heard")
        ToolContext.makeCall().log("notice", "unheard")
      }).pipe(Effect.annotateLogs("where", "fiber"), Effect.provide(layer))
      assert.deepStrictEqual(lines, ["INFO heard [fiber]"])
    }))
})

describe("a call given no id (design: Call context)", () => {
  const plain = Tool.make("ids_plain", { description: "Ids.", input: {}, timeout: "5 seconds" }, (_, call) =>
    [call.toolCallId, call.toolCallId])
  const effect = Tool.make("ids_effect", { description: "Ids.", input: {}, timeout: "5 seconds" }, (_, call) =>
    Effect.map(ToolContext.ToolContext, (context) => [call.toolCallId, { ...context }.toolCallId]))

  it.effect("has the Ids generator's id, the same wherever it is read (a spread of the context keeps it)", () =>
    Effect.gen(function*() {
      const [a, b] = (yield* Invocation.run(plain, {})).value as Array<string>
      assert.match(a!, /^call-[0-9a-f-]{36}$/)
      assert.strictEqual(b, a)
      const [d, e] = (yield* Invocation.run(effect, {})).value as Array<string>
      assert.match(d!, /^call-[0-9a-f-]{36}$/)
      assert.notStrictEqual(d, a)
      assert.strictEqual(e, d)
    }))

  it.effect("counts from 1 under Ids.layerDeterministic, each runtime its own count: nothing is counted for the process", () =>
    Effect.gen(function*() {
      const first = yield* Invocation.run(plain, {})
      const second = yield* Invocation.run(effect, {})
      assert.deepStrictEqual([first.value, second.value], [["call-1", "call-1"], ["call-2", "call-2"]])
      const again = yield* Invocation.run(plain, {}).pipe(Effect.provide(Ids.layerDeterministic))
      assert.deepStrictEqual(again.value, ["call-1", "call-1"])
    }).pipe(Effect.provide(Ids.layerDeterministic)))
})
