/**
 * The calls a serving process runs, interrupted (design: Cancelling a task): a cancelled call whose handler heeds
 * interruption stops at once (its finalizer runs); one whose handler does not (an uninterruptible region) is waited
 * for `stopWindow` at most, then said in a warning naming its task, call and tool, and again when it ends at last.
 * The follower that told it to stop is not held up by it. TestClock: the handler's 30 s pass in no time.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger, Ref, TestClock } from "effect"
import type { Door } from "../../../src/internal/call/door.js"
import { type Delivered, makeDeliveries } from "../../../src/internal/serve/deliveries.js"

const call = (toolCallId: string, name: string): Delivered => ({
  _tag: "ToolCallRequested",
  taskId: "task-1",
  toolCallId,
  name,
  arguments: "{}",
  deadlineAt: 60_000
})

/** The handlers run here never open the door: they are the tools' stand-ins. */
const door = {} as Door

/** The log lines, level and text, and a logger that records them. */
const recorded = () => {
  const lines: Array<readonly [string, string]> = []
  const logger = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ logLevel, message }) =>
      void lines.push([logLevel.label, Array.isArray(message) ? message.join(" ") : String(message)]))
  )
  return { lines, logger }
}

/** A handler that heeds interruption (its finalizer says so), and one that does not: 30 s, uninterruptible. */
const deliveriesOf = (stopped: Array<string>) =>
  Effect.flatMap(Ref.make({ drained: 0, interrupted: 0, notStarted: 0 }), (report) =>
    makeDeliveries((event) =>
      event.name === "stubborn"
        ? Effect.uninterruptible(Effect.sleep("30 seconds"))
        : Effect.onInterrupt(Effect.never, () => Effect.sync(() => void stopped.push(event.toolCallId))), report))

describe("serving: a call interrupted", () => {
  it.scoped("cancelled: stopped at once if its handler heeds it, else a warning naming task, call and tool", () => {
    const { lines, logger } = recorded()
    return Effect.gen(function*() {
      const stopped: Array<string> = []
      const deliveries = yield* deliveriesOf(stopped)
      yield* deliveries.deliver(call("c1", "polite"), door)
      yield* deliveries.deliver(call("c2", "stubborn"), door)
      yield* deliveries.cancel("task-1", "c1")
      assert.deepStrictEqual(stopped, ["c1"])
      assert.isTrue(lines.some(([level, text]) => level === "INFO" && text.includes("call c1 was cancelled; it was interrupted here")))
      assert.isFalse(lines.some(([level]) => level === "WARN"))

      // The stubborn one: the cancel waits one second, no more, and says it could not stop the call.
      const cancelling = yield* Effect.fork(deliveries.cancel("task-1", "c2"))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(cancelling)
      const warnings = lines.filter(([level]) => level === "WARN").map(([, text]) => text)
      assert.lengthOf(warnings, 1)
      assert.match(warnings[0]!, /^task task-1: call c2 \(tool stubborn\) was cancelled but could not be stopped within 1s: its handler does not heed interruption/)
      assert.isFalse(lines.some(([, text]) => text.includes("call c2 was cancelled; it was interrupted here")))

      // When it ends at last, said again; it answered nothing.
      yield* TestClock.adjust("30 seconds")
      yield* Effect.yieldNow()
      assert.isTrue(lines.some(([level, text]) =>
        level === "INFO" &&
        text === "task task-1: call c2 (tool stubborn), which could not be stopped when it was cancelled, has ended; it answered nothing"
      ))
    }).pipe(Effect.provide(logger))
  })

  it.scoped("its task ended: the calls still running are interrupted the same way, the stubborn one said", () => {
    const { lines, logger } = recorded()
    return Effect.gen(function*() {
      const stopped: Array<string> = []
      const deliveries = yield* deliveriesOf(stopped)
      yield* deliveries.deliver(call("c1", "polite"), door)
      yield* deliveries.deliver(call("c2", "stubborn"), door)
      const stopping = yield* Effect.fork(deliveries.stop("task-1"))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(stopping)
      assert.deepStrictEqual(stopped, ["c1"])
      assert.deepStrictEqual(
        lines.filter(([level]) => level === "WARN").map(([, text]) => text.split(":").slice(0, 2).join(":")),
        ["task task-1: call c2 (tool stubborn) was interrupted as its task ended but could not be stopped within 1s"]
      )
      // Its 30 s pass: the scope closes (it waits for the calls still running).
      yield* TestClock.adjust("30 seconds")
    }).pipe(Effect.provide(logger))
  })
})
