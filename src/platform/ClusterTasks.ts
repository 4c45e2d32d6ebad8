/**
 * What a cluster runner (Cluster.ts) adds to the tasks of Tasks.ts: the task entity's handlers on the
 * owner of its shard. A task is taken up from the journal on the first message for it, runs here
 * until it ends or its shard moves, and its answers are journaled before its loop sees them.
 * Nothing of its own to stop: a task let go is interrupted by the entity's `Run` ending.
 */
import { Deferred, type Duration, Effect, Exit, Fiber, FiberId, Option } from "effect"
import * as SqlStore from "../internal/sql/store.js"
import * as Invocation from "../Invocation.js"
import * as Journal from "../Journal.js"
import { type EventsWanted, type ToolCallResult, UnknownTask } from "../protocol/Protocol.js"
import { answersCallFrom, attachTo, type Follower, ignoredAnswer, type Task, type Tasks } from "./Tasks.js"

/** An attachment to a task: whose, which events, its follower, and the connection it comes from. */
interface Attaching {
  readonly agentId: string
  readonly taskId: string
  readonly events?: EventsWanted | undefined
  readonly follower?: Follower | undefined
  readonly connection?: string | undefined
  /** A task just submitted: every event it keeps first (its loop started before this attach). */
  readonly fromStart?: boolean | undefined
}

/** What `Task.attach` is given for `fromStart`: every event past offset 0, all the task keeps. */
const afterOf = (fromStart: boolean | undefined): number | undefined => fromStart === true ? 0 : undefined

/** The cluster's ways into the tasks of this runner, all on the journal of the cluster's database. */
export const make = (tasks: Tasks, journal: Journal.Journal["Type"]) =>
  Effect.map(Invocation.InvocationConfig, (config) => {
    const running = makeRunning()
    /** The tasks a `Run` is taking up or holds here: a second `Run` of one (sent again: a sweep, a retried submit) ends at once. */
    const taking = new Set<string>()
    return {
      /** The agent's task, held here (taken up from the journal if need be). */
      heldBy: tasks.held,
      /**
       * Resolves once the task's loop here has finished, so its end is in the journal (the loop writes
       * it after its final event): what the agent's tasks not ended count (`openUsage`) then leaves it out.
       */
      endJournaled: (agentId: string, taskId: string): Effect.Effect<void> =>
        Effect.flatMap(Effect.option(tasks.held(agentId, taskId)), (task) => {
          const loop = Option.getOrUndefined(task)?.loop
          return loop === undefined ? Effect.void : Effect.asVoid(Fiber.await(loop))
        }),
      /** `attach`, to a task held here (taken up from the journal if need be), from `connection` on the client's front. */
      attachHeld: (
        { agentId, connection, events, follower, fromStart, taskId }: Attaching
      ) => Effect.flatMap(tasks.held(agentId, taskId), (task) => attachTo(task, events, follower, connection, afterOf(fromStart))),
      /** Whether the task's `Run` holds it here now (see `makeRunning`). */
      runsHere: running.runsHere,
      heldByRun: running.heldByRun,
      /**
       * `attachHeld` without the engine, to a task whose `Run` holds it here (never taken up here):
       * a defect if it holds it no more, before or just after the attach (the follower attaches again).
       */
      attachRunning: (
        { agentId, connection, events, follower, fromStart, taskId }: Attaching
      ) =>
        Effect.flatMap(running.task(agentId, taskId), (task) =>
          Effect.tap(attachTo(task, events, follower, connection, afterOf(fromStart)), (mailbox) =>
            Effect.sync(() => {
              // Let go meanwhile: its Run ended the attachments it had, not this one.
              if (!running.holds(taskId, task)) mailbox.unsafeDone(Exit.void)
            }))),
      /**
       * Runs the task here until it ends (its loop taken up from the journal); interrupted (its shard
       * moved, the runner stops), the loop stops and the task is let go: its journal is where the next
       * owner takes it up, and a call it had started reads as started without an answer there.
       */
      runHere: (taskId: string): Effect.Effect<void> =>
        Effect.suspend(() => {
          if (taking.has(taskId)) return Effect.void
          taking.add(taskId)
          return Effect.ensuring(heldUntilEnd(taskId), Effect.sync(() => taking.delete(taskId)))
        }),
      answer: answerOf(tasks, journal, config, running)
    }

    /** `runHere`'s task, held until it ends or is interrupted. */
    function heldUntilEnd(taskId: string): Effect.Effect<void> {
      // Held and watched in one step: interrupted once it holds the task, it always lets it go.
      return Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(restore(tasks.hold(taskId)), (task) => {
            if (task === undefined) return Effect.logWarning(`task ${taskId}: the journal does not hold it; nothing to run`)
            running.held(taskId, task)
            return Effect.onExit(restore(task.ended.await), (exit) =>
              Effect.suspend(() => {
                running.released(taskId, task)
                if (!Exit.isInterrupted(exit)) return Effect.void
                tasks.letGo(task)
                task.attachment?.unsafeDone(Exit.void)
                task.attachment = undefined
                const fibers = [task.loop, task.suspended?.expiry].filter((f) => f !== undefined)
                return Fiber.interruptAll(fibers)
              }))
          }))
    }
  })

/**
 * The tasks whose entity's `Run` holds them here, until it ends or is interrupted (the shard moved). Only
 * such a task is reached in process (ClusterFollow.ts, `Here`): its `Run`, interrupted, lets it go and ends its
 * attachment. A task taken up here by another message while its `Run` had not held it (or never would: the
 * shard moved first) has no one to let it go.
 */
const makeRunning = () => {
  const running = new Map<string, Task>()
  /** Followers waiting for a task's `Run` to hold it here (`heldByRun`). */
  const waiters = new Map<string, Deferred.Deferred<void>>()
  return {
    /** The task its `Run` holds here, of that agent; a defect if its `Run` does not hold it here. */
    task: (agentId: string, taskId: string): Effect.Effect<Task, UnknownTask> =>
      Effect.suspend(() => {
        const task = running.get(taskId)
        if (task === undefined) return Effect.die(new Error(`task ${taskId}: its Run does not hold it here`))
        return task.agentId === agentId ? Effect.succeed(task) : Effect.fail(new UnknownTask({ taskId }))
      }),
    runsHere: (taskId: string): boolean => running.has(taskId),
    /** Whether this very task (not one taken up again since) is the one its `Run` holds here. */
    holds: (taskId: string, task: Task): boolean => running.get(taskId) === task,
    /**
     * Whether the task's `Run` holds it here, waiting up to `within` for it to: a follower attaching
     * as its task is submitted comes before the task's `Run` does.
     */
    heldByRun: (taskId: string, within: Duration.DurationInput): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        if (running.has(taskId)) return Effect.succeed(true)
        const waiter = waiters.get(taskId) ?? Deferred.unsafeMake<void>(FiberId.none)
        waiters.set(taskId, waiter)
        return Deferred.await(waiter).pipe(
          Effect.timeoutOption(within),
          Effect.ensuring(Effect.sync(() => {
            if (waiters.get(taskId) === waiter) waiters.delete(taskId)
          })),
          Effect.map(() => running.has(taskId))
        )
      }),
    /** The task's `Run` holds it here now: the followers waiting for that go on. */
    held: (taskId: string, task: Task): void => {
      running.set(taskId, task)
      const waiter = waiters.get(taskId)
      waiters.delete(taskId)
      if (waiter !== undefined) Deferred.unsafeDone(waiter, Exit.void)
    },
    /** The task's `Run` let it go. */
    released: (taskId: string, task: Task): void => {
      if (running.get(taskId) === task) running.delete(taskId)
    }
  }
}

type Running = ReturnType<typeof makeRunning>

/**
 * An answer taken through the cluster: checked against the output limits and journaled (the first
 * answer wins) before the call's waiter sees it, so that a loop going on from the journal, here or
 * on the next owner, finds it; kept for the task's life, so that a call delivered again after it
 * was answered is answered at once. One from a connection the call was not delivered to is ignored.
 */
const answerOf = (
  tasks: Tasks,
  journal: Journal.Journal["Type"],
  config: Invocation.InvocationConfig["Type"],
  running: Running
) =>
(
  agentId: string,
  answer: ToolCallResult,
  connection: string,
  inProcess = false
): Effect.Effect<void, UnknownTask> => answered(tasks, journal, config, running, agentId, answer, connection, inProcess)

/** `answerOf`'s answer, by one generator function for every answer (design: Generators on hot paths). */
const answered = Effect.fnUntraced(function*(
  tasks: Tasks,
  journal: Journal.Journal["Type"],
  config: Invocation.InvocationConfig["Type"],
  running: Running,
  agentId: string,
  { result, taskId, toolCallId }: ToolCallResult,
  connection: string,
  inProcess: boolean
) {
  // In process (ClusterFollow.ts, `Here`), only to a task its `Run` holds here: never one taken up here.
  const task = inProcess ? yield* running.task(agentId, taskId) : yield* tasks.held(agentId, taskId)
  if (task.final !== undefined) return
  if (!answersCallFrom(task, toolCallId, connection)) return yield* ignoredAnswer(task, toolCallId)
  const pending = task.pending?.get(toolCallId)
  const name = pending?.event.name ?? (yield* Effect.map(Effect.orDie(journal.run(taskId)), (run) =>
    run !== undefined && Journal.isOpen(run) ? run.calls.get(toolCallId)?.name : undefined))
  // A call the task never delivered: nothing waits for it.
  if (name === undefined) return
  const stored = yield* journal.callEnded(taskId, toolCallId, Invocation.checkResult(name, result, config)).pipe(
    Effect.locally(SqlStore.currentOnUnreachable, (reason) => Effect.sync(() => task.waiting(reason)))
  )
  task.answered?.set(toolCallId, stored)
  pending?.done.succeed(stored)
})

/** The cluster's ways into the tasks, as `make` gives them. */
export type ClusterTasks = Effect.Effect.Success<ReturnType<typeof make>>
