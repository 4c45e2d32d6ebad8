/**
 * The followers of a serving process's tasks (design: Serving): a task submitted or attached is
 * followed to its end, again after a dropped connection; the tasks held before a restart and the ones
 * the platform gives are followed the same way.
 */
import { Channel, Effect, Exit, Fiber, FiberMap, Mailbox, Runtime, Schedule, Stream } from "effect"
import * as Ids from "../../Ids.js"
import type { HeldTasksShape as HeldTasks } from "./heldTasks.js"
import type { Door } from "../call/door.js"
import {
  type AgentLimitExceeded,
  isTaskEnd,
  type TaskEvent,
  type TaskOutput,
  type Unauthorized,
  type UnknownTask
} from "../../protocol/Protocol.js"
import { type Caller, type PlatformClient, PlatformUnavailable } from "../../PlatformClient.js"
import type { ServeError } from "./errors.js"
import { type Failed, retryWhileAway } from "./away.js"
import { TaskFailedError, TaskLost, TaskTakenOverError } from "./errors.js"
import type { Delivered } from "./deliveries.js"

// --- Followers ---

/**
 * Where following a task stands between two attempts: its id once known, whether it started (and is
 * held), and the offset of the last event seen: the next attempt attaches after it, so no event comes twice.
 */
export interface Followed {
  readonly taskId: string | undefined
  readonly started: boolean
  readonly offset?: number | undefined
  /** A submit's key, made once and sent with each of its tries: a repeat gets the task the first made. */
  readonly submitKey?: string | undefined
  /** A submit with the key was sent already: the next is a retry. */
  readonly resubmit?: boolean | undefined
}

/** The key of a submit, and whether this one is a retry. */
export const submitted = (from: Followed) =>
  from.submitKey === undefined ? {} : from.resubmit === true ? { submitKey: from.submitKey, resubmit: true } : { submitKey: from.submitKey }

/** Where following a task starts: a known one from `after`; a submit with its key, made once for all its tries. */
export const firstTry = (known: string | undefined, after: number | undefined): Effect.Effect<Followed> =>
  known !== undefined
    ? Effect.succeed({ taskId: known, started: false, offset: after })
    : Effect.map(Ids.make("submit"), (submitKey) => ({ taskId: undefined, started: false, offset: after, submitKey }))

/** How a task is followed: the events wanted beside the calls, a typed output to ask for (a submit). */
export interface FollowOptions {
  readonly deltas?: boolean | undefined
  readonly output?: TaskOutput | undefined
}

/** What a follower needs. */
export interface FollowerDeps {
  readonly client: PlatformClient["Type"]
  readonly caller: Caller
  /** The record of the tasks this process holds (in the store's database). */
  readonly held: HeldTasks
  readonly reconnect: Schedule.Schedule<unknown, unknown>
  /** A door of its own for a task followed (`Door.open`): the task's hook state (design: Hooks). */
  readonly open: () => Door
  readonly deliver: (event: Delivered, door: Door) => Effect.Effect<void>
  /** Interrupts the calls of a task that ended failed (stopped) or cancelled still running here. */
  readonly stopCalls: (taskId: string) => Effect.Effect<void>
  /** Interrupts one call of a task, cancelled (design: Cancelling a task), if it runs here. */
  readonly cancelCall: (taskId: string, toolCallId: string) => Effect.Effect<void>
}

/**
 * One attempt of a follower (`makeFollowers`): the task's stream from `from` to the task's end, a take-over, or
 * the stream's end (undefined). One generator function for every attempt (design: Generators on hot paths).
 */
const attemptOn = Effect.fnUntraced(function*(
  deps: FollowerDeps,
  prompt: string,
  onEvent: ((event: TaskEvent) => void) | undefined,
  from: Followed,
  door: Door,
  options: FollowOptions
) {
  const { caller, client, held } = deps
  // Without a listener, the stream needs only the calls and the end.
  const events = onEvent === undefined ? "calls" as const : options.deltas === true ? "deltas" as const : "all" as const
  const after = from.offset === undefined ? {} : { after: from.offset }
  const output = options.output === undefined ? {} : { output: options.output }
  const mailbox: Mailbox.ReadonlyMailbox<TaskEvent, AgentLimitExceeded | UnknownTask | Unauthorized | PlatformUnavailable> =
    yield* (from.taskId === undefined
    ? client.submitTask({ ...caller, prompt, events, ...output, ...submitted(from) })
    : client.attachTask({ ...caller, taskId: from.taskId, events, ...after }))
  // This attempt's own state; the next attempt is given it through the failure (a submit sent, its retry says so).
  let at: Followed = from.taskId === undefined && from.submitKey !== undefined ? { ...from, resubmit: true } : from
  while (true) {
    const [chunk, done] = yield* Effect.mapError(mailbox.takeAll, (error): Failed<Followed> => ({
      // The platform knew the task a moment ago: it restarted and lost it, say so.
      error: error._tag === "UnknownTask" && at.started && from.taskId !== undefined
        ? new TaskLost({ taskId: from.taskId })
        : error,
      reached: at
    }))
    for (const event of chunk) {
      if (event._tag === "TaskStarted") {
        if (!at.started) yield* held.holdTask(caller.agentId, event.taskId)
        at = { ...at, taskId: event.taskId, started: true }
      } else if (event._tag === "ToolCallRequested") yield* deps.deliver(event, door)
      else if (event._tag === "ToolCallCancelled") yield* deps.cancelCall(event.taskId, event.toolCallId)
      // The highest seen: a call delivered again without a replay comes with its older offset.
      if (event.offset !== undefined && event.offset > (at.offset ?? -1)) at = { ...at, offset: event.offset }
      onEvent?.(event)
      if (isTaskEnd(event)) {
        if (event._tag !== "TaskCompleted") yield* deps.stopCalls(event.taskId)
        yield* held.releaseTask(caller.agentId, event.taskId)
        return event
      }
      // Another attach has the task now (its holder keeps it held): this follower stops.
      if (event._tag === "TaskTakenOver") return event
    }
    if (done) return undefined
  }
})

/**
 * The followers (design: Serving): a follower follows one task to its last event, submitted or
 * attached by id, handing its delivered calls to the deliveries; `onEvent` sees every event. The
 * held-task record (`HeldTasks`) holds the task from its start to its end, so that a restarted
 * process takes it back. After a
 * dropped connection the same task is attached again, from the state the attempt before reached, and
 * its pending calls come again. One follower per task here: an explicit attach takes a task over from
 * its re-attach at start (`resume`). At shutdown the re-attached followers stop after the drain; a
 * caller's follower stops with its caller. Each follower has the task's door, its hook state (`RunState`,
 * design: Hooks), given to every call it delivers and dropped with the follower and those calls.
 */
export const makeFollowers = (deps: FollowerDeps) =>
  Effect.gen(function*() {
    const { caller, held } = deps
    const resumed = yield* FiberMap.make<string>()

    /** One attempt (`attemptOn`), in a scope of its own. */
    const attempt = (
      prompt: string,
      onEvent: ((event: TaskEvent) => void) | undefined,
      from: Followed,
      door: Door,
      options: FollowOptions
    ): Effect.Effect<TaskEvent | undefined, Failed<Followed>> =>
      Effect.scoped(attemptOn(deps, prompt, onEvent, from, door, options))

    /** Follows a task, submitted (`known` undefined) or known by id; gives its last event. */
    const follow = (
      prompt: string,
      known: string | undefined,
      onEvent: ((event: TaskEvent) => void) | undefined,
      options: FollowOptions & { readonly after?: number | undefined } = {}
    ): Effect.Effect<TaskEvent | undefined, ServeError> =>
      Effect.flatMap(firstTry(known, options.after), (start) => {
        // The task's door (its hook state), across the attempts of this follower: a reconnect keeps it.
        const door = deps.open()
        return retryWhileAway(deps.reconnect, (from: Followed) => attempt(prompt, onEvent, from, door, options), start)
      }).pipe(
        // The platform does not know the task (any more): nothing is left to take back.
        Effect.tapError(({ error, reached }) =>
          (error._tag === "TaskLost" || error._tag === "UnknownTask") && reached.taskId !== undefined
            ? held.releaseTask(caller.agentId, reached.taskId)
            : Effect.void
        ),
        Effect.mapError(({ error }) => error)
      )

    return {
      /** Submits a task and follows it. */
      submit: (prompt: string, onEvent: ((event: TaskEvent) => void) | undefined, options?: FollowOptions) =>
        follow(prompt, undefined, onEvent, options),
      /** Follows a task known by id, for the caller: a re-attach of it from the start gives way first. */
      attach: (
        taskId: string,
        onEvent: ((event: TaskEvent) => void) | undefined,
        options?: FollowOptions & { readonly after?: number | undefined }
      ) => Effect.zipRight(FiberMap.remove(resumed, taskId), follow("", taskId, onEvent, options)),
      /** Follows a task held before a restart, in a fiber of its own; how it ended is logged. */
      resume: (taskId: string) =>
        FiberMap.run(
          resumed,
          taskId,
          follow("", taskId, undefined).pipe(
            Effect.flatMap((last) =>
              last === undefined
                ? Effect.logDebug(`task ${taskId}: its stream ended before the task did`)
                : Effect.logInfo(`task ${taskId}: ${endedAs(last)}`)
            ),
            Effect.catchAll((error) => Effect.logWarning(`task ${taskId}: could not be taken back: ${error.message}`))
          )
        )
    }
  })

export type Followers = Effect.Effect.Success<ReturnType<typeof makeFollowers>>

/** How a task's last event says it ended, for the log. */
export const endedAs = (last: TaskEvent): string =>
  last._tag === "TaskCompleted"
    ? "completed"
    : last._tag === "TaskFailed"
    ? "failed"
    : last._tag === "TaskCancelled"
    ? `cancelled by ${last.by}`
    : "taken over elsewhere"

/**
 * A follower as a Stream of the task's events: the follower in a fiber of its own, its events through a mailbox, the
 * fiber interrupted when the stream ends or its reader stops. Not `Stream.unwrapScoped` and `forkScoped`: a scope
 * and a child fiber a task cost the serving process 180 of its 840 Effect steps of a task's stream (measured).
 */
export const eventStream = (
  follow: (onEvent: (event: TaskEvent) => void) => Effect.Effect<unknown, ServeError>
): Stream.Stream<TaskEvent, ServeError> =>
  Stream.fromChannel(Channel.suspend(() => {
    let follower: Fiber.RuntimeFiber<unknown, unknown> | undefined
    return Channel.ensuring(
      Channel.unwrap(Effect.map(Effect.zip(Mailbox.make<TaskEvent, ServeError>(), Effect.runtime<never>()), ([out, runtime]) => {
        // Forked and kept in one step: the finalizer below, in force once the channel runs, sees it.
        follower = Runtime.runFork(runtime)(
          Effect.onExit(follow((event) => void out.unsafeOffer(event)), (exit) => out.done(Exit.asVoid(exit)))
        )
        return Mailbox.toChannel(out)
      })),
      Effect.suspend(() => follower === undefined ? Effect.void : Fiber.interrupt(follower))
    )
  }))

/** A task's output from its last event. */
export const outcome = (last: TaskEvent | undefined): Effect.Effect<string, TaskFailedError | TaskTakenOverError> => {
  if (last?._tag === "TaskCompleted") return Effect.succeed(last.output)
  if (last?._tag === "TaskFailed") return Effect.fail(new TaskFailedError({ taskId: last.taskId, reason: last.reason }))
  if (last?._tag === "TaskCancelled") {
    const reason = `cancelled by ${last.by}${last.reason === "" ? "" : `: ${last.reason}`}`
    return Effect.fail(new TaskFailedError({ taskId: last.taskId, reason }))
  }
  if (last?._tag === "TaskTakenOver") {
    return Effect.fail(new TaskTakenOverError({ taskId: last.taskId, reason: last.reason }))
  }
  return Effect.fail(new TaskFailedError({ taskId: "", reason: "the task's stream ended before the task did" }))
}

// --- Taking tasks back ---

/**
 * With a durable store, the tasks this agent held when a process stopped are attached again, each by
 * a follower of its own (design: Interruption and shutdown). Those followers stop right after the drain.
 */
export const resumeHeld = (agentId: string, held: HeldTasks, followers: Followers) =>
  Effect.gen(function*() {
    const tasks = yield* held.heldTasks(agentId)
    if (tasks.length > 0) {
      yield* Effect.logInfo(`agent ${agentId}: attaching ${tasks.length} unfinished task(s) again: ${tasks.join(", ")}`)
    }
    for (const taskId of tasks) yield* followers.resume(taskId)
  })

// --- Assignments ---

/**
 * What the platform gives this process to run (design: Agents that call agents, The platform): a stream
 * opened once registered and kept open (again after a dropped connection, on `Timing.reconnect`);
 * each task on it is followed as a task held before a restart is, its calls run here; each single call
 * on it (a call of a task this process does not hold, of a tool it serves) goes to `runCall`. A platform
 * that does not know the call (an older one) gives no assignments: said at debug level, and that is all.
 * A fiber of the scope, interrupted before the drain.
 */
export const watchAssignments = (
  client: PlatformClient["Type"],
  caller: Caller,
  followers: Followers,
  reconnect: Schedule.Schedule<unknown, unknown>,
  runCall: (call: Delivered) => Effect.Effect<void>,
  cancelCall: (taskId: string, toolCallId: string) => Effect.Effect<void> = () => Effect.void
) => {
  const watch = client.watchAssignments
  if (watch === undefined) return Effect.void
  const run = (taskId: string) =>
    Effect.zipRight(
      Effect.logInfo(`agent ${caller.agentId}: running task ${taskId}, given by the platform`),
      followers.resume(taskId)
    )
  const once = Effect.scoped(Effect.flatMap(watch({ ...caller, calls: true }), (mailbox) => {
    const take: Effect.Effect<void, Unauthorized | PlatformUnavailable> = Effect.flatMap(
      mailbox.takeAll,
      ([chunk, done]) =>
        Effect.zipRight(
          Effect.forEach(
            chunk,
            ({ call, cancelled, taskId }) =>
              cancelled !== undefined ? cancelCall(taskId, cancelled) : call === undefined ? run(taskId) : runCall(call),
            { discard: true }
          ),
          done ? Effect.void : take
        )
    )
    return take
  }))
  const away = (error: Unauthorized | PlatformUnavailable) => error._tag === "PlatformUnavailable"
  // A stream that ends is opened again; an outage longer than `reconnect` starts a new round, not the end.
  const round = once.pipe(
    Effect.retry({ schedule: reconnect, while: away }),
    Effect.repeat(reconnect),
    Effect.catchIf(away, () => Effect.void)
  )
  const kept = Effect.forever(round).pipe(
    Effect.catchAllCause((cause) =>
      Effect.logDebug(`agent ${caller.agentId}: the platform gives this process no tasks to run`, cause))
  )
  return Effect.asVoid(Effect.forkScoped(kept))
}
