/**
 * The calls a serving process runs (design: Serving, Delivery dedupe): each delivered call through
 * dedupe and the pipeline, the answers batched back, the deliveries counted, stopped and drained.
 */
import { Chunk, Duration, Effect, Fiber, FiberSet, Mailbox, Option, Ref, type Scope } from "effect"
import type { Door } from "../call/door.js"
import { sameDelivery } from "../call/reuse.js"
import type { ToolResult } from "../../ToolResult.js"
import type { TaskEvent, ToolCallResult } from "../../protocol/Protocol.js"
import type * as Toolkit from "../../Toolkit.js"
import { boundedInFinalizer, type Stopped } from "./registration.js"

/** A delivered call, as it comes on a task's stream. */
export type Delivered = Extract<TaskEvent, { _tag: "ToolCallRequested" }>

// --- Running a delivered call ---

/**
 * The one call into dedupe (design: Delivery dedupe) and the pipeline, through the door of the task's follower
 * (its hook state, design: Hooks; the store as its `dedupe`) over the toolkit served now: a delivered call runs
 * once however often it is delivered, and gives its result. A call for a tool this process does not serve is
 * answered as the door answers an unknown tool on every face (`Toolkit.unknownTool`: the tools it serves).
 */
export const runDelivered = (door: Door, toolkit: Toolkit.Toolkit<any>, event: Delivered): Effect.Effect<ToolResult> =>
  door.over(toolkit).run(event.name, event.arguments, {
    taskId: event.taskId,
    toolCallId: event.toolCallId,
    deadlineAt: event.deadlineAt,
    // Approved through the platform (a suspended task's DecideApproval): Hooks.approval does not ask again.
    approved: event.approved,
    // The platform's span of the call, when it carried one: this process's span continues its trace.
    traceparent: event.traceparent
  })


/** How many tasks' doors a serving process keeps for the single calls the platform gives it (`routedDoors`). */
export const routedDoorsKept = 256

/**
 * The doors of the tasks whose single calls the platform gives this process (design: The platform): one a task,
 * opened at its first call (its hook state, design: Hooks, spans its calls here), the least recently used let go
 * past `routedDoorsKept`.
 */
export const routedDoors = (open: () => Door) => {
  const doors = new Map<string, Door>()
  return (taskId: string): Door => {
    const door = doors.get(taskId) ?? open()
    doors.delete(taskId)
    doors.set(taskId, door)
    if (doors.size > routedDoorsKept) doors.delete(doors.keys().next().value!)
    return door
  }
}

// --- Answers ---

/** The most answers sent in one call. */
export const answersPerCall = 512

/**
 * How many calls of answers may wait for the platform's acknowledgment at once: one more than one, so that an
 * answer ready while the last one's acknowledgment is on its way (the platform sends it after the next call that
 * answer lets out) goes at once.
 */
export const answersInFlight = 2

/**
 * The answers' sender (design: Serving): answers ready at the same moment go to the platform in one
 * call. The calls only queue theirs; `answersInFlight` senders, living as long as serving, each take
 * every answer waiting whenever it is free and send them (so that as many calls at most wait for the
 * platform at once), retried while the platform is away: no fiber a call of answers. At shutdown the
 * drain ends the queue and waits (a while) for the last answers to go out, before the deregistration;
 * the senders are interrupted after the re-attached followers stop.
 */
export const makeAnswers = (send: (results: ReadonlyArray<ToolCallResult>) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const waiting = yield* Mailbox.make<ToolCallResult>()
    // Whatever one send ends with (a defect of the platform's, the call cut short under it), its sender lives on:
    // its calls are delivered again and answered again (at least once).
    const sent = (batch: Chunk.Chunk<ToolCallResult>) =>
      Effect.catchAllCause(send(Chunk.toReadonlyArray(batch)), (cause) =>
        Effect.logWarning(`could not answer ${batch.length} call(s); they will be delivered again`, cause))
    // One sender: done once the queue has ended and its last call has its acknowledgment.
    const sender = Effect.gen(function*() {
      while (true) {
        const [results, done] = yield* waiting.takeAll
        for (const batch of Chunk.chunksOf(results, answersPerCall)) yield* sent(batch)
        if (done) return
      }
    })
    const senders = yield* Effect.forkScoped(
      Effect.all(Array.from({ length: answersInFlight }, () => sender), { concurrency: "unbounded", discard: true })
    )
    return {
      answer: (result: ToolCallResult): Effect.Effect<void> => Effect.asVoid(waiting.offer(result)),
      /** No answer after this; the ones waiting go out, within `limit`. */
      flush: (limit: Duration.DurationInput) =>
        Effect.zipRight(waiting.end, boundedInFinalizer(Fiber.await(senders), limit))
    }
  })

export type Answers = Effect.Effect.Success<ReturnType<typeof makeAnswers>>

// --- Deliveries ---

/** A delivered call's key in the calls running now. */
export const callKey = (event: Delivered): string => sameDelivery(event)

/** Counts a fiber of the call `key` in or out of `calls` (a redelivery of a call running joins it in a fiber of its own). */
const counted = (calls: Map<string, number>, key: string, by: 1 | -1) => {
  const n = (calls.get(key) ?? 0) + by
  if (n > 0) calls.set(key, n)
  else calls.delete(key)
}

/** How long an interrupted call's handler has to stop before it is said that it could not be (`interruptCalls`). */
export const stopWindow = Duration.seconds(1)

/**
 * Interrupts the running calls `calls` (design: Cancelling a task), waiting `stopWindow` at most: their handlers'
 * scopes close and their finalizers run. One that has not stopped by then (its handler does not heed interruption:
 * an uninterruptible region, a finalizer that does not end) is said in a warning naming its task, call and tool, and in
 * a line again when it ends at last (in `scope`); it answers nothing either way. Whether each stopped.
 */
const interruptCalls = (
  calls: ReadonlyArray<readonly [Fiber.RuntimeFiber<void>, Delivered | undefined]>,
  why: string,
  scope: Scope.Scope
): Effect.Effect<ReadonlyArray<boolean>> =>
  Effect.forEach(calls, ([fiber, event]) =>
    Effect.gen(function*() {
      yield* Fiber.interruptFork(fiber)
      if (Option.isSome(yield* Effect.timeoutOption(Fiber.await(fiber), stopWindow))) return true
      const call = `task ${event?.taskId}: call ${event?.toolCallId} (tool ${event?.name})`
      yield* Effect.logWarning(
        `${call} was ${why} but could not be stopped within ${Duration.format(stopWindow)}: its handler does not ` +
          "heed interruption (an uninterruptible region, a finalizer that does not end); it runs on here, and " +
          "what it answers goes nowhere"
      )
      yield* Effect.forkIn(
        Effect.zipRight(
          Fiber.await(fiber),
          Effect.logInfo(`${call}, which could not be stopped when it was ${why}, has ended; it answered nothing`)
        ),
        scope
      )
      return false
    }).pipe(Effect.annotateLogs({ taskId: event?.taskId, toolCallId: event?.toolCallId, tool: event?.name })), {
    concurrency: "unbounded"
  })

/**
 * The delivered calls running now, whichever task they are of (design: Serving, Delivery dedupe):
 * each delivery runs `handle` in a fiber of its own, started on the follower's stack (a call that
 * completes at once is answered at once) in the context `make` was given (the tools' services, hooks,
 * the clock). They outlive the follower that started them, which may be interrupted first at
 * shutdown. `drain` runs first when serving stops: a new delivery is then left to the platform, which
 * delivers it again after a re-attach (a redelivery of a call still running is not one: that call
 * answers), the calls still running get the grace period, and what is left is interrupted.
 */
export const makeDeliveries = (handle: (event: Delivered, door: Door) => Effect.Effect<void>, report: Ref.Ref<Stopped>) =>
  Effect.gen(function*() {
    const running = yield* FiberSet.make<void>()
    // The runtime holds make's context: the calls run in it, not in the follower's.
    const run = yield* FiberSet.runtime(running)<never>()
    // Whether the drain began, and the calls running now by key: read and changed only in synchronous steps.
    let draining = false
    const calls = new Map<string, number>()
    // The running calls of each task: a task that ended failed (stopped: its exec_agent call's deadline passed)
    // has its calls interrupted, not left to run to their own timeouts.
    const byTask = new Map<string, Set<Fiber.RuntimeFiber<void>>>()
    // The running fibers of each call (a redelivery of a call still running joins it in a fiber of its own).
    const byCall = new Map<string, Set<Fiber.RuntimeFiber<void>>>()
    // The call each running fiber runs, for what is said of one that cannot be stopped.
    const delivered = new Map<Fiber.RuntimeFiber<void>, Delivered>()
    // Those told to stop already (a cancelled call, then its task's end): not waited for, nor said, twice.
    const told = new Set<Fiber.RuntimeFiber<void>>()
    const withCalls = (fibers: Set<Fiber.RuntimeFiber<void>>) =>
      [...fibers].filter((fiber) => !told.has(fiber)).map((fiber) => (told.add(fiber), [fiber, delivered.get(fiber)] as const))
    const scope = yield* Effect.scope
    const track = (index: Map<string, Set<Fiber.RuntimeFiber<void>>>, key: string, fiber: Fiber.RuntimeFiber<void>) => {
      let fibers = index.get(key)
      if (fibers === undefined) index.set(key, fibers = new Set())
      fibers.add(fiber)
      fiber.addObserver(() => {
        fibers.delete(fiber)
        if (fibers.size === 0 && index.get(key) === fibers) index.delete(key)
      })
    }
    return {
      /** Interrupts the calls of `taskId` still running here (`interruptCalls`). */
      stop: (taskId: string): Effect.Effect<void> =>
        Effect.suspend(() => {
          const fibers = byTask.get(taskId)
          byTask.delete(taskId)
          if (fibers === undefined) return Effect.void
          return Effect.asVoid(interruptCalls(withCalls(fibers), "interrupted as its task ended", scope))
        }),
      /**
       * Interrupts the call `toolCallId` of `taskId` if it runs here (design: Cancelling a task): its handler's
       * scope closes and its finalizers run; nothing is answered (its task has ended). A promise body is told by
       * its `signal` and cannot be made to stop; a worker job's thread is terminated. Said in a log line; a handler
       * that does not stop within `stopWindow`, in a warning (`interruptCalls`).
       */
      cancel: (taskId: string, toolCallId: string): Effect.Effect<void> =>
        Effect.suspend(() => {
          const key = sameDelivery({ taskId, toolCallId })
          const fibers = byCall.get(key)
          byCall.delete(key)
          if (fibers === undefined) return Effect.logDebug(`task ${taskId}: call ${toolCallId} was cancelled; it does not run here`)
          return Effect.flatMap(interruptCalls(withCalls(fibers), "cancelled", scope), (stopped) =>
            stopped.every((s) => s)
              ? Effect.logInfo(
                `task ${taskId}: call ${toolCallId} was cancelled; it was interrupted here (its finalizers ran; ` +
                  `a promise body was told by its signal, and stops only if it heeds it)`
              )
              : Effect.void)
        }),
      deliver: (event: Delivered, door: Door): Effect.Effect<void> =>
        Effect.suspend(() => {
          const key = callKey(event)
          if (draining) {
            return calls.has(key) ? Effect.void : Ref.update(report, (r) => ({ ...r, notStarted: r.notStarted + 1 }))
          }
          counted(calls, key, 1)
          const fiber = run(Effect.ensuring(handle(event, door), Effect.sync(() => counted(calls, key, -1))), { immediate: true })
          track(byTask, event.taskId, fiber)
          track(byCall, key, fiber)
          delivered.set(fiber, event)
          fiber.addObserver(() => (delivered.delete(fiber), told.delete(fiber)))
          return Effect.void
        }),
      /** No new delivery from now on; the calls running get `grace`, then are interrupted. */
      drain: (grace: Duration.Duration) =>
        Effect.gen(function*() {
          draining = true
          const before = yield* FiberSet.size(running)
          if (before > 0) yield* boundedInFinalizer(FiberSet.awaitEmpty(running), grace)
          const left = yield* FiberSet.size(running)
          if (left > 0) yield* FiberSet.clear(running)
          return { drained: before - left, interrupted: left }
        })
    }
  })

export type Deliveries = Effect.Effect.Success<ReturnType<typeof makeDeliveries>>


// --- Drain ---

/**
 * The drain (design: Interruption and shutdown), first when the scope closes: no new delivery is
 * started, the calls still running get `grace` (a call's own deadline ends it earlier), what is left is
 * interrupted, and the answers waiting go out before the deregistration.
 */
export const drainOnClose = (deliveries: Deliveries, answers: Answers, report: Ref.Ref<Stopped>, grace: Duration.Duration) =>
  Effect.addFinalizer(() =>
    Effect.gen(function*() {
      const { drained, interrupted } = yield* deliveries.drain(grace)
      yield* answers.flush("5 seconds")
      yield* Ref.update(report, (r) => ({ ...r, drained, interrupted }))
    })
  )
