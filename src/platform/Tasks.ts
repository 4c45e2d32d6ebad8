/**
 * The tasks (design: The platform): each one's loop (TaskRunner) runs in a fiber of the platform's
 * own, its calls go out on whichever stream attached to it last and wait for their answers. With a
 * journal, every step is journaled, and the tasks the journal holds are taken back at start; a task
 * that waits for approvals suspends and goes on from the journal once they are decided.
 *
 * Shutdown: the loops and the approvals' expiry timers are fibers of one `FiberSet`, interrupted when
 * the platform's scope closes them, after the retention sweep and the redelivery have stopped and
 * before the journal closes (see Parts.ts).
 */
import { Clock, Effect, Exit, Fiber, Option, Schedule, Schema } from "effect"
import { Ids } from "../Ids.js"
import type { PendingApproval } from "../internal/agent/types.js"
import * as Metrics from "../internal/util/metrics.js"
import * as Invocation from "../Invocation.js"
import * as Journal from "../Journal.js"
import {
  ApprovalsNeedJournal,
  type Caller,
  type EventsWanted,
  NoPendingTaskApproval,
  type TaskOutput,
  type ToolCallResult,
  UnknownTask
} from "../protocol/Protocol.js"
import type * as Tool from "../Tool.js"
import type { ToolCallInfo } from "../ToolContext.js"
import * as AgentCalls from "./AgentCalls.js"
import type { Limits, Options } from "./Options.js"
import { type Book, makeBook, type Task } from "./TaskBook.js"
import { attachTo, upkeep } from "./TaskDelivery.js"
import { type Create, createOf, type Loops, makeHolding, makeLoops } from "./TaskLoops.js"
import { EventJson, type Suspension } from "./TaskTypes.js"

export { type Task, usageProblem } from "./TaskBook.js"
export { attachTo } from "./TaskDelivery.js"
export type { Follower } from "./TaskTypes.js"

/** How many submit keys the platform remembers (with the task each made), the oldest forgotten first. */
const maxSubmitKeys = 10_000

// --- answers and approvals ---

/**
 * Whether an answer from `connection` to a call of `task` is taken (design: Hostile clients): only
 * from the connection its calls were delivered to, or from any of the agent's while none is attached.
 */
export const answersFrom = (task: Task, connection: string): boolean =>
  task.answerer === undefined || task.answerer === connection

/** An answer from a connection the call was not delivered to: ignored, and said so at debug level only. */
export const ignoredAnswer = (task: Task, toolCallId: string) =>
  Effect.logDebug(
    `task ${task.taskId}: an answer to call ${toolCallId} came from a connection it was not delivered to; ignored`
  )

/**
 * Answers from `connection`: each completes its call; one for a task the agent does not have fails,
 * after the others; one from a connection the call was not delivered to is ignored.
 */
const completeOf = ({ own }: Book, config: Invocation.Config) =>
(agentId: string, results: ReadonlyArray<ToolCallResult>, connection: string): Effect.Effect<void, UnknownTask> =>
  Effect.suspend(() => {
    let unknown: string | undefined
    const ignored: Array<readonly [Task, string]> = []
    for (const { result, taskId, toolCallId } of results) {
      const task = own(agentId, taskId)
      if (task === undefined) {
        unknown ??= taskId
        continue
      }
      if (!answersFrom(task, connection)) {
        ignored.push([task, toolCallId])
        continue
      }
      // A late or repeated answer (at least once) is fine: the first one counts. One past the output limits
      // is the invalid-output result the model reads (design: Error text, Hostile clients), never a failed task.
      const pending = task.pending?.get(toolCallId)
      pending?.done.succeed(Invocation.checkResult(pending.event.name, result, config))
    }
    const logged = Effect.forEach(ignored, ([task, toolCallId]) => ignoredAnswer(task, toolCallId), { discard: true })
    const outcome = unknown === undefined ? Effect.void : Effect.fail(new UnknownTask({ taskId: unknown }))
    return Effect.zipRight(logged, outcome)
  })

/**
 * A person's decision on a call a suspended task of the agent's waits for (design: Durable runs),
 * journaled; once every call of its `TaskSuspended` is decided, the task goes on from the journal.
 * Only a call of the task's last suspension can be decided, and once. A tree of tasks (`exec_agent`) is
 * decided at its root (design: Agents that call agents): a call `a2/b1` is call `b1` of the task `a2`
 * started, journaled there; each task on the way that waited for it goes on once it waits for nothing
 * more, the deepest first. A task an `exec_agent` call started takes no decision itself: it names its root.
 */
const decideOf = (
  { journal, own, tasks }: Book,
  { goOn }: Loops,
  elsewhere: ((taskId: string, toolCallId: string) => Effect.Effect<void>) | undefined
) =>
(
  agentId: string,
  { approved, reason, taskId, toolCallId }: {
    readonly taskId: string
    readonly toolCallId: string
    readonly approved: boolean
    readonly reason?: string | undefined
  }
): Effect.Effect<void, UnknownTask | NoPendingTaskApproval | ApprovalsNeedJournal> =>
  Effect.gen(function*() {
    const task = own(agentId, taskId)
    if (task === undefined) return yield* new UnknownTask({ taskId })
    if (journal === undefined) return yield* new ApprovalsNeedJournal({ taskId })
    const below = taskId.indexOf("/")
    if (below > 0) {
      const decideAt = { taskId: taskId.slice(0, below), toolCallId: `${taskId.slice(below + 1)}/${toolCallId}` }
      return yield* new NoPendingTaskApproval({ taskId, toolCallId, decideAt })
    }
    const asked = task.suspended?.event.pending.find((p) => p.toolCallId === toolCallId)
    if (asked === undefined || !task.suspended!.undecided.has(toolCallId)) {
      return yield* new NoPendingTaskApproval({ taskId, toolCallId })
    }
    const suspension = task.suspended!
    const path = asked.path ?? [{ runId: taskId, toolCallId, toolName: asked.toolName }]
    const last = path[path.length - 1]!
    // Taken at once: the same call decided twice at the same moment is refused the second time.
    suspension.undecided.delete(toolCallId)
    const now = yield* Clock.currentTimeMillis
    const decided = yield* journal.decide(last.runId, last.toolCallId, { approved, reason, now }).pipe(
      Effect.orDie,
      Effect.onExit((exit) => Effect.sync(() => Exit.isFailure(exit) && suspension.undecided.add(toolCallId)))
    )
    if (decided) yield* Effect.logInfo(`task ${taskId}: call ${toolCallId} ${approved ? "approved" : "denied"}`)
    // Expired, when not decided: nothing can decide it any more; the tasks go on without it (their loops deny it).
    // The tasks on the way, the deepest first, each with the call as it names it: (root/a2, b1), then the root.
    for (let depth = path.length - 1; depth > 0; depth--) {
      const call = path.slice(depth).map((hop) => hop.toolCallId).join("/")
      const held = tasks.get(path[depth]!.runId)
      if (held !== undefined) yield* decidedOn(held, call, goOn)
      else if (elsewhere !== undefined) yield* elsewhere(path[depth]!.runId, call)
    }
    if (suspension.undecided.size === 0) yield* goOn(task, suspension)
    if (!decided) return yield* new NoPendingTaskApproval({ taskId, toolCallId })
  })

/**
 * A decision on `toolCallId`, journaled already, reached `task`: the call no longer keeps it waiting, and
 * it goes on once nothing does (a task of a tree, decided at the root: `decideOf`).
 */
const decidedOn = (task: Task, toolCallId: string, goOn: Loops["goOn"]): Effect.Effect<void> =>
  Effect.suspend(() => {
    const suspension = task.suspended
    if (suspension === undefined || !suspension.undecided.delete(toolCallId) || suspension.undecided.size > 0) {
      return Effect.void
    }
    return goOn(task, suspension)
  })

// --- agent calls: the tasks other tasks start ---

/** The id of the task call `toolCallId` of task `taskId` starts: found again when the call runs again. */
export const childTaskId = (taskId: string, toolCallId: string): string => `${taskId}/${toolCallId}`

/**
 * The tasks started by other tasks' `exec_agent` calls (design: Agents that call agents), each given to
 * a serving process of its agent that watches for tasks (`WatchAssignments`). A call run again (its
 * task taken back from the journal) follows the task it started rather than start another.
 */
const makeChildren = (
  book: Book,
  host: AgentCalls.Host,
  create: Create,
  hold: (taskId: string) => Effect.Effect<Task | undefined>
) => {
  const failed = (agentId: string, reason: string) => new AgentCalls.AgentCallFailed({ agentId, reason })

  /** The process each started task was last given to, while its call waits for it (memory only). */
  const givenTo = new Map<string, string>()

  /** The task of `parent`'s call, new or held already; one no process is attached to is given to one. */
  const childOf = (parent: Task, toolCallId: string, agentId: string, prompt: string) =>
    Effect.gen(function*() {
      const taskId = childTaskId(parent.taskId, toolCallId)
      const now = book.clock.unsafeCurrentTimeMillis()
      const processId = host.pick(agentId, now)
      const held = yield* hold(taskId)
      if (held !== undefined && held.agentId !== agentId) {
        return yield* failed(agentId, `this call started task ${taskId} of agent ${held.agentId} already`)
      }
      if (held !== undefined) {
        if (processId !== undefined && held.final === undefined && held.attachment === undefined) {
          if (host.assign(agentId, processId, taskId)) givenTo.set(taskId, processId)
        }
        return held
      }
      if (processId === undefined) {
        return yield* failed(
          agentId,
          `agent ${agentId} has no serving process connected (none watches for tasks to run); no task was started`
        )
      }
      const tools = host.toolsOf(agentId, processId, now)
      const task = yield* Effect.mapError(
        create({ taskId, agentId, processId, prompt, tools }, Effect.succeed),
        (refused) => failed(agentId, `${refused.message}; no task was started`)
      )
      host.assign(agentId, processId, taskId)
      yield* Effect.logInfo(`task ${parent.taskId}: call ${toolCallId} started task ${taskId} of agent ${agentId}`)
      return task
    })

  /**
   * Gives `child` to another live process of its agent that watches for tasks, every second while no process
   * is attached to it and the one it was last given to is no longer live (deregistered, or silent past its
   * heartbeats): a process that went away is replaced, one reconnecting is not (its follower attaches again).
   * Never ends; the wait for the child's end races it.
   */
  const regiving = (child: Task): Effect.Effect<never> =>
    Effect.suspend(() => {
      const now = book.clock.unsafeCurrentTimeMillis()
      const given = givenTo.get(child.taskId) ?? child.processId
      if (child.final !== undefined || child.attachment !== undefined || host.isLive(child.agentId, given, now)) {
        return Effect.void
      }
      const next = host.pick(child.agentId, now)
      if (next === undefined || next === given || !host.assign(child.agentId, next, child.taskId)) return Effect.void
      givenTo.set(child.taskId, next)
      return Effect.logInfo(`task ${child.taskId}: process ${given} of agent ${child.agentId} went away; given to ${next}`)
    }).pipe(
      Effect.repeat(Schedule.spaced("1 second")),
      Effect.delay(AgentCalls.regiveAfter),
      Effect.zipRight(Effect.never),
      Effect.ensuring(Effect.sync(() => givenTo.delete(child.taskId)))
    )

  /**
   * Runs the task of `parent`'s call to its end: its answer, or why it gave none. A child that suspends for
   * approvals makes the parent's call wait with its task (design: Agents that call agents): the call answers
   * nothing (null), the parent suspends listing the child's calls under it, and once they are decided at the
   * root both go on, the call following the same child again.
   */
  const execute = (parent: Task) => (call: ToolCallInfo, agentId: string, prompt: string) =>
    Effect.gen(function*() {
      // One child made a turn of the event loop (`childTurn`): a turn's hundreds of calls do not hold it.
      yield* book.childTurn
      const child = yield* childOf(parent, call.toolCallId, agentId, prompt)
      child.deadlineAt = call.deadlineAt
      return yield* AgentCalls.awaitChild(parent, call, agentId, child.taskId, {
        // Given to another process of its agent if the one it was given to goes away while it waits.
        settled: Effect.map(Effect.raceFirst(settled(child), regiving(child)), (): AgentCalls.Settled =>
          child.final === undefined && child.suspended !== undefined
            ? { _tag: "Waiting", pending: nestedOf(child, child.suspended.event) }
            : { _tag: "Ended", final: child.final }),
        stop: (reason) => stop(book, child, reason)
      })
    })

  return {
    /** The platform's tools for `task` (none when its agent may call no other). */
    toolsOf: (task: Task): ReadonlyArray<Tool.Any> =>
      // In cluster mode the other agent's task is a cluster task, run wherever its shard is (the host's `execute`).
      AgentCalls.toolsFor(task.agentId, host, () => book.clock.unsafeCurrentTimeMillis(), host.execute?.(task) ?? execute(task))
  }
}

/** Waits for the task's end, or for it to suspend for approvals (`Task.suspended`), whichever comes first. */
const settled = (task: Task): Effect.Effect<void> =>
  Effect.suspend(() =>
    task.final !== undefined || task.suspended !== undefined
      ? Effect.void
      : Effect.raceFirst(task.ended.await, task.suspending.await)
  )

/** The calls `child`'s suspension waits for, as its parent's run lists them (one hop for the child's own calls). */
const nestedOf = (child: Task, event: Suspension["event"]): ReadonlyArray<PendingApproval> =>
  event.pending.map((p) => ({
    ...p,
    path: p.path ?? [{ runId: child.taskId, toolCallId: p.toolCallId, toolName: p.toolName }]
  }))

/**
 * Stops `task` for `reason`: its end is `TaskFailed`, said on its stream and journaled; its loop (and
 * with it any task it started the same way) is interrupted.
 */
const stop = ({ clock, journal }: Book, task: Task, reason: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (task.final !== undefined) return
    const suspension = task.suspended
    task.suspended = undefined
    // The end first: the loop's own calls, interrupted next, see their task has ended.
    task.emit({ _tag: "TaskFailed", taskId: task.taskId, reason })
    if (suspension?.expiry !== undefined) yield* Fiber.interrupt(suspension.expiry)
    if (task.loop !== undefined) yield* Fiber.interrupt(task.loop)
    if (journal === undefined || task.final === undefined) return
    const final = yield* Effect.orDie(Schema.encode(EventJson)(task.final))
    yield* Effect.orDie(journal.ended(task.taskId, { final }, task.endedAt ?? clock.unsafeCurrentTimeMillis()))
  })

// --- the tasks ---

/**
 * The tasks of this process; with `journal`, journaled and taken up from it; with `host`, the tasks
 * of an agent allowed to call others are offered `exec_agent` and `list_agents`.
 */
export const makeTasks = (
  options: Options,
  limits: Limits,
  journal: Journal.Journal["Type"] | undefined,
  host?: AgentCalls.Host
) =>
  Effect.gen(function*() {
    const book = yield* makeBook(options, journal)
    const config = yield* Invocation.InvocationConfig
    const ids = yield* Ids
    // A task's platform tools start tasks, which needs the loops: bound once both exist.
    let children: ReturnType<typeof makeChildren> | undefined
    const loops = makeLoops(book, (task) => children?.toolsOf(task) ?? [])
    const { held, hold, takeBack } = yield* makeHolding(book, loops)
    const create = createOf(book, limits, loops)
    // The tasks submits with a key made, by agent and key: a repeat finds its task while the platform holds it.
    const submitted = new Map<string, string>()
    const remember = (key: string, taskId: string) => {
      submitted.delete(key)
      submitted.set(key, taskId)
      // The oldest go first: a retry comes within seconds, not after thousands of other submits.
      if (submitted.size > maxSubmitKeys) submitted.delete(submitted.keys().next().value!)
    }
    if (host !== undefined) children = makeChildren(book, host, create, hold)
    return {
      /**
       * A new task, attached at once to `connection`; its loop starts. Refused with
       * `AgentLimitExceeded` past the agent's `maxTasksPerAgent` or `maxPromptBytesPerAgent`.
       */
      submit: (
        { agentId, events, output, processId, prompt, submitKey }: Caller & {
          readonly prompt: string
          readonly events?: EventsWanted | undefined
          readonly output?: TaskOutput | undefined
          readonly submitKey?: string | undefined
        },
        tools: Journal.TaskTools,
        connection: string
      ) =>
        Effect.suspend(() => {
          // A submit retried with its key (its answer was lost) is answered with the task the first made.
          const key = submitKey === undefined ? undefined : `${agentId}\n${submitKey}`
          const made = key === undefined ? undefined : submitted.get(key)
          const task = made === undefined ? undefined : book.own(agentId, made)
          if (task !== undefined) return attachTo(task, events, undefined, connection)
          // Unguessable as well as unique: knowing one task's id tells nothing of another's.
          const taskId = ids.make("task")
          if (key !== undefined) remember(key, taskId)
          return create(
            { taskId, agentId, processId, prompt, tools, output },
            (task) => attachTo(task, events, undefined, connection)
          )
        }),
      /** Another attachment to a task of the agent's, from `connection`. */
      attach: (
        { after, agentId, connection, events, taskId }: {
          readonly agentId: string
          readonly taskId: string
          readonly events?: EventsWanted | undefined
          readonly connection: string
          readonly after?: number | undefined
        }
      ) =>
        Effect.suspend(() => {
          const task = book.own(agentId, taskId)
          return task === undefined
            ? Effect.fail(new UnknownTask({ taskId }))
            : attachTo(task, events, undefined, connection, after)
        }),
      complete: completeOf(book, config),
      decide: decideOf(book, loops, host?.decidedElsewhere),
      /**
       * Cluster mode: a decision on `toolCallId` of `taskId`, a task of a tree decided at its root on another
       * runner (journaled there), reached the task's owner: it goes on once it waits for nothing more.
       */
      decided: (taskId: string, toolCallId: string): Effect.Effect<void> =>
        Effect.flatMap(hold(taskId), (task) => task === undefined ? Effect.void : decidedOn(task, toolCallId, loops.goOn)),
      /**
       * Stops the agent's task for `reason` (held here, taken up from the journal if need be), as an
       * `exec_agent` call past its deadline stops the task it started (cluster mode: on the task's owner).
       */
      stop: (agentId: string, taskId: string, reason: string): Effect.Effect<void> =>
        Effect.flatMap(Effect.option(held(agentId, taskId)), (task) =>
          Option.isSome(task) ? stop(book, task.value, reason) : Effect.void),
      takeBack,
      ...upkeep(book, yield* Metrics.Exporting),
      /** The task, held here (taken up from the journal if need be); undefined if the journal does not hold it. */
      hold,
      /** The agent's task, held here (taken up from the journal if need be). */
      held
    }
  })

/** The tasks, as `makeTasks` gives them. */
export type Tasks = Effect.Effect.Success<ReturnType<typeof makeTasks>>
