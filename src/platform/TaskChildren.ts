/**
 * The child tasks (Tasks.ts): the tasks other tasks' `exec_agent` calls start, each given to a serving
 * process of its agent and run to its end (or its suspension) while the call waits; and a task stopped,
 * as such a call past its deadline stops the task it started.
 */
import { Effect, Fiber, Schedule, Schema } from "effect"
import type { PendingApproval } from "../internal/agent/types.js"
import type { TaskEnd } from "../protocol/Protocol.js"
import type * as Tool from "../Tool.js"
import type { ToolCallInfo } from "../ToolContext.js"
import * as AgentCalls from "./AgentCalls.js"
import type { Book, Task } from "./TaskBook.js"
import type { Create } from "./TaskLoops.js"
import { EventJson, type Suspension } from "./TaskTypes.js"

// --- agent calls: the tasks other tasks start ---

/** The id of the task call `toolCallId` of task `taskId` starts: found again when the call runs again. */
export const childTaskId = (taskId: string, toolCallId: string): string => `${taskId}/${toolCallId}`

/** Cancels a task (TaskCancel.ts): false if it had ended already. */
export type Cancel = (task: Task, by: string, reason: string) => Effect.Effect<boolean>

/** The platform's tools of the tasks, as `makeChildren` gives them. */
export interface Children {
  /** The platform's tools for `task` (none when its agent may call no other). */
  readonly toolsOf: (task: Task) => ReadonlyArray<Tool.Any>
}

/**
 * The tasks started by other tasks' `exec_agent` calls (design: Agents that call agents), each given to
 * a serving process of its agent that watches for tasks (`WatchAssignments`). A call run again (its
 * task taken back from the journal) follows the task it started rather than start another.
 */
export const makeChildren = (
  book: Book,
  host: AgentCalls.Host,
  create: Create,
  hold: (taskId: string) => Effect.Effect<Task | undefined>,
  cancel: Cancel
): Children => {
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
        stop: (reason) => stopOrCancel(book, parent, child, reason, cancel)
      })
    })

  return {
    /** The platform's tools for `task` (none when its agent may call no other). */
    toolsOf: (task: Task): ReadonlyArray<Tool.Any> =>
      // In cluster mode the other agent's task is a cluster task, run wherever its shard is (the host's `execute`).
      AgentCalls.toolsFor(task.agentId, host, () => book.clock.unsafeCurrentTimeMillis(), host.execute?.(task) ?? execute(task))
  }
}

/** Stops `child` for `reason`; a parent cancelled (its end said, its loop interrupted next) cancels it the same way. */
const stopOrCancel = (book: Book, parent: Task, child: Task, reason: string, cancel: Cancel): Effect.Effect<void> =>
  parent.final?._tag === "TaskCancelled"
    ? Effect.asVoid(cancel(child, parent.final.by, `its parent task ${parent.taskId} was cancelled`))
    : stop(book, child, reason)

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
export const stop = (book: Book, task: Task, reason: string): Effect.Effect<void> =>
  end(book, task, { _tag: "TaskFailed", taskId: task.taskId, reason })

/**
 * Ends `task` with `final` (a stop's `TaskFailed`, a cancel's `TaskCancelled`): said on its stream and journaled
 * (a restart does not run it again); its loop is interrupted, and its expiry if it waits for approvals.
 */
export const end = ({ clock, journal }: Book, task: Task, final: TaskEnd): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (task.final !== undefined) return
    const suspension = task.suspended
    task.suspended = undefined
    // The end first: the loop's own calls, interrupted next, see their task has ended.
    task.emit(final)
    if (suspension?.expiry !== undefined) yield* Fiber.interrupt(suspension.expiry)
    if (task.loop !== undefined) yield* Fiber.interrupt(task.loop)
    if (journal === undefined || task.final === undefined) return
    const json = yield* Effect.orDie(Schema.encode(EventJson)(task.final))
    yield* Effect.orDie(journal.ended(task.taskId, { final: json }, task.endedAt ?? clock.unsafeCurrentTimeMillis()))
  })
