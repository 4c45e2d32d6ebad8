/**
 * What comes back to the tasks (Tasks.ts): the answers to their calls, taken only from the connection
 * they were delivered (or given) to, and the decisions on the calls a suspended task waits for, at the root of a
 * tree of tasks, each task on the way going on once it waits for nothing more.
 */
import { Clock, Effect, Exit } from "effect"
import * as Invocation from "../Invocation.js"
import * as Journal from "../Journal.js"
import { ApprovalsNeedJournal, NoPendingTaskApproval, type ToolCallResult, UnknownTask } from "../protocol/Protocol.js"
import type { Book, Task } from "./TaskBook.js"
import type { Loops } from "./TaskLoops.js"

// --- answers and approvals ---

/**
 * Whether an answer from `connection` to a call of `task` is taken (design: Hostile clients): only
 * from the connection its calls were delivered to, or from any of the agent's while none is attached.
 */
export const answersFrom = (task: Task, connection: string): boolean =>
  task.answerer === undefined || task.answerer === connection

/**
 * Whether an answer from `connection` to the call `toolCallId` of `task` is taken: a call given to a serving
 * process (TaskRoutes.ts) only from the connection it was given on (none while it waits for a process); any
 * other by the task's rule (`answersFrom`).
 */
export const answersCallFrom = (task: Task, toolCallId: string, connection: string): boolean => {
  const route = task.pending?.get(toolCallId)?.route
  return route === undefined ? answersFrom(task, connection) : route.worker?.connection === connection
}

/** An answer from a connection the call was not delivered to: ignored, and said so at debug level only. */
export const ignoredAnswer = (task: Task, toolCallId: string) =>
  Effect.logDebug(
    `task ${task.taskId}: an answer to call ${toolCallId} came from a connection it was not delivered to; ignored`
  )

/**
 * Answers from `connection`: each completes its call; one for a task the agent does not have fails,
 * after the others; one from a connection the call was not delivered to is ignored.
 */
export const completeOf = ({ own }: Book, config: Invocation.Config) =>
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
      if (!answersCallFrom(task, toolCallId, connection)) {
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
/** Whether the journal holds the call's approval decided as `approved` by `by` already. */
const decidedAlready = (
  journal: Journal.Journal["Type"],
  taskId: string,
  toolCallId: string,
  approved: boolean,
  by: string
): Effect.Effect<boolean> =>
  Effect.map(Effect.orElseSucceed(journal.task(taskId), () => undefined), (task) => {
    const approval = task?.approvals.find((a) => a.toolCallId === toolCallId)
    return approval?.decision === (approved ? "approved" : "denied") && approval.decidedBy === by
  })

/**
 * Decides a call a suspended task waits for (`decideNow`). A task held here but not suspended yet whose journal holds
 * the call's approval pending (taken over by this runner, or taken back at a start, and replaying up to its
 * suspension) is waited for, up to `replayWithin`, then decided: not refused as if nothing waited.
 */
export const decideOf = (book: Book, loops: Loops, elsewhere: ((taskId: string, toolCallId: string) => Effect.Effect<void>) | undefined) => {
  const now = decideNow(book, loops, elsewhere)
  return (agentId: string, decision: Parameters<typeof now>[1]) =>
    Effect.catchTag(now(agentId, decision), "NoPendingTaskApproval", (refused) =>
      Effect.gen(function*() {
        const task = book.own(agentId, decision.taskId)
        if (task === undefined || task.suspended !== undefined || task.final !== undefined || book.journal === undefined) {
          return yield* refused
        }
        const run = yield* Effect.orElseSucceed(book.journal.run(decision.taskId), () => undefined)
        const asked = run !== undefined && Journal.isOpen(run) ? run.approvals.get(decision.toolCallId) : undefined
        if (asked?.decision !== "pending") return yield* refused
        yield* Effect.ignore(Effect.timeout(Effect.raceFirst(task.suspending.await, task.ended.await), replayWithin))
        return yield* now(agentId, decision)
      }))
}

/** How long a decision waits for a task replaying up to its suspension (`decideOf`). */
const replayWithin = "5 seconds"

const decideNow = (
  { journal, own, tasks }: Book,
  { goOn }: Loops,
  elsewhere: ((taskId: string, toolCallId: string) => Effect.Effect<void>) | undefined
) =>
(
  agentId: string,
  { approved, by, reason, retried, taskId, toolCallId }: {
    readonly taskId: string
    readonly toolCallId: string
    readonly approved: boolean
    readonly reason?: string | undefined
    /** A retry after `PlatformBusy`: the same decision, found made by the same author, stands. */
    readonly retried?: boolean | undefined
    /** Who decides, journaled with the decision: an operator's name; by default the agent (`agent <id>`). */
    readonly by?: string | undefined
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
      // A retry of the same decision by the same author (its first answer an outage cut) that finds it made: it stands.
      if (retried === true && (yield* decidedAlready(journal, taskId, toolCallId, approved, by ?? `agent ${agentId}`))) return
      return yield* new NoPendingTaskApproval({ taskId, toolCallId })
    }
    const suspension = task.suspended!
    const path = asked.path ?? [{ runId: taskId, toolCallId, toolName: asked.toolName }]
    const last = path[path.length - 1]!
    // Taken at once: the same call decided twice at the same moment is refused the second time.
    suspension.undecided.delete(toolCallId)
    const now = yield* Clock.currentTimeMillis
    const decision = { approved, reason, now, by: by ?? `agent ${agentId}` }
    const decided = yield* journal.decide(last.runId, last.toolCallId, decision).pipe(
      Effect.orDie,
      Effect.onExit((exit) => Effect.sync(() => Exit.isFailure(exit) && suspension.undecided.add(toolCallId)))
    )
    if (decided) {
      yield* Effect.logInfo(`task ${taskId}: call ${toolCallId} ${approved ? "approved" : "denied"} by ${decision.by}`)
    }
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
export const decidedOn = (task: Task, toolCallId: string, goOn: Loops["goOn"]): Effect.Effect<void> =>
  Effect.suspend(() => {
    const suspension = task.suspended
    if (suspension === undefined || !suspension.undecided.delete(toolCallId) || suspension.undecided.size > 0) {
      return Effect.void
    }
    return goOn(task, suspension)
  })
