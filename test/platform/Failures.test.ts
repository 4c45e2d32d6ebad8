/**
 * A served call's failure keeps its kind across the platform's wire (design: Error text): the serving
 * process's `TimedOut` reaches the platform as `TimedOut`, with its fields, so a platform-side tool
 * hook can tell it by its `_tag`; the model reads the same text as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Effect, Layer, Schedule, Schema, Stream } from "effect"
import { Hooks, LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { Serve } from "../../src/exports/serve.js"
import * as ToolResult from "../../src/ToolResult.js"
import { clientLayer, resultsText } from "../support/platform.js"

const tokens = new Map([["tok-1", "agent-1"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("5 seconds"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

/** The live clock, `skewMillis` ahead: a serving process on a machine whose clock runs ahead of the platform's. */
const aheadBy = (skewMillis: number): Clock.Clock => {
  const live = Clock.make()
  const now = () => live.unsafeCurrentTimeMillis() + skewMillis
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: now,
    currentTimeMillis: Effect.sync(now),
    unsafeCurrentTimeNanos: () => BigInt(now()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now()) * 1_000_000n),
    sleep: (duration) => live.sleep(duration)
  }
}

describe("a served failure's kind over the wire", () => {
  it.live("a serving process's TimedOut is TimedOut to a platform-side hook; the model reads its text", () =>
    Effect.gen(function*() {
      const seen: Array<ToolResult.ToolFailure | undefined> = []
      // A hook that would retry only a call that timed out: it must be told so by the kind, not the text.
      const watch: Hooks.ToolHook = (_call, proceed) => Effect.tap(proceed, (result) => Effect.sync(() => seen.push(result.failure)))
      const url = yield* Effect.flatMap(
        Layer.build(
          PlatformServer.layerWebSocket({ port: 0 }).pipe(
            Layer.provide(PlatformServer.layerHandlers({ tokens })),
            Layer.provide(LanguageModel.layerScripted([
              { toolCalls: [{ id: "a", name: "slow", arguments: "{}" }] },
              (request) => ({ text: resultsText(request) })
            ])),
            Layer.provide(Hooks.layer({ tool: [watch] })),
            Layer.provide(policy)
          )
        ),
        (context) => Effect.provide(PlatformServer.url, context)
      )
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "3 seconds" }, () =>
        Effect.as(Effect.sleep("1 minute"), "never"))
      // Its clock 2 s ahead: the delivered deadline ends its call about 1 s in, 2 s before the platform's own.
      const events = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(slow))
        return yield* Stream.runCollect(served.submitTask("go"))
      }).pipe(Effect.scoped, Effect.withClock(aheadBy(2_000)), Effect.provide(clientLayer({ url }, policy)))

      const [failure] = seen
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(failure?._tag, "TimedOut")
      assert.isTrue(failure instanceof ToolResult.TimedOut)
      const timedOut = failure as ToolResult.TimedOut
      assert.strictEqual(timedOut.toolName, "slow")
      // Its own allowance on the serving side, cut by the delivered deadline: under the 3 s the platform allows.
      assert.isTrue(timedOut.allowedMillis > 0 && timedOut.allowedMillis < 3_000, `allowed ${timedOut.allowedMillis} ms`)
      const done = [...events].find((e): e is Extract<Protocol.TaskEvent, { _tag: "TaskCompleted" }> => e._tag === "TaskCompleted")
      assert.strictEqual(done?.output, `a:${timedOut.text}`)
      assert.match(timedOut.text, /^slow timed out after [\d.]+ m?s; its outcome is unknown$/)
    }).pipe(Effect.scoped), { timeout: 20_000 })
})

describe("TypedToolResultFromJson (the platform wire's form of a result)", () => {
  const codec = Schema.parseJson(ToolResult.TypedToolResultFromJson)
  const failures: ReadonlyArray<ToolResult.ToolFailure> = [
    new ToolResult.InvalidInput({ toolName: "t", reason: "n: Expected number, actual \"x\"" }),
    new ToolResult.DeadlinePassed({ toolName: "t" }),
    new ToolResult.TimedOut({ toolName: "t", allowedMillis: 1_500 }),
    new ToolResult.HandlerFailed({ toolName: "t", cause: Cause.fail(new Error("down")), text: "Error: down" }),
    new ToolResult.Interrupted({ toolName: "t" }),
    new ToolResult.InvalidOutput({ toolName: "t", reason: "a Map is not JSON" }),
    new ToolResult.InvalidOutput({ reason: "the result is 9 bytes, over the platform's frame limit of 8" }),
    new ToolResult.HookFailed({ toolName: "t", cause: Cause.fail(new Error("hook down")) }),
    new ToolResult.Denied({ toolName: "t", reason: "the user did not approve this call; it did not run" }),
    new ToolResult.UnknownTool({ toolName: "t", available: ["a", "b"] }),
    new ToolResult.UnknownTool({ toolName: "t" }),
    new ToolResult.OutcomeUnknown({ toolName: "t", earlierAttempt: "unfinished" }),
    new ToolResult.Unclassified({ text: "only a text" })
  ]

  it("every kind comes back as itself, with its fields and the same text", () => {
    for (const failure of failures) {
      const received = Schema.decodeSync(codec)(Schema.encodeSync(codec)(ToolResult.ToolResult.failure(failure)))
      assert.strictEqual(received.failure?._tag, failure._tag)
      assert.strictEqual(received.error, failure.text)
      assert.strictEqual(received.failure?.text, failure.text)
    }
    const timedOut = Schema.decodeSync(codec)(Schema.encodeSync(codec)(ToolResult.ToolResult.failure(failures[2]!)))
    assert.strictEqual((timedOut.failure as ToolResult.TimedOut).allowedMillis, 1_500)
    assert.strictEqual(Schema.decodeSync(codec)("{\"value\":3}").value, 3)
  })

  it("an answer without a kind, or with one its text does not match, is Unclassified with its text", () => {
    const plain = Schema.decodeSync(codec)("{\"error\":\"slow timed out after 1s; its outcome is unknown\"}")
    assert.deepStrictEqual([plain.failure?._tag, plain.error], ["Unclassified", "slow timed out after 1s; its outcome is unknown"])
    const mismatched = Schema.decodeSync(codec)(
      "{\"error\":\"slow timed out after 1s; its outcome is unknown\",\"failure\":{\"_tag\":\"TimedOut\",\"toolName\":\"slow\",\"allowedMillis\":9}}"
    )
    assert.deepStrictEqual([mismatched.failure?._tag, mismatched.error], ["Unclassified", "slow timed out after 1s; its outcome is unknown"])
    const unknownKind = Schema.decodeSync(codec)("{\"error\":\"x\",\"failure\":{\"_tag\":\"Exploded\",\"deep\":[[[]]]}}")
    assert.deepStrictEqual([unknownKind.failure?._tag, unknownKind.error], ["Unclassified", "x"])
  })
})
