/**
 * The book of the tasks (Tasks.ts): a task held in this process (`Task`: its attachment, its pending
 * calls, the events it keeps for attachments that come back, its end), and the book of those held
 * here with what running them needs (`Book`), each agent's tasks counted against its limits (`usageProblem`).
 */
import { type Clock, Effect, Exit, type Fiber, FiberSet, type Mailbox } from "effect"
import { Signal } from "../internal/util/signal.js"
import type * as Journal from "../Journal.js"
import type * as LanguageModel from "../LanguageModel.js"
import { AgentLimitExceeded, type EventsWanted, isTaskEnd, type TaskEvent, type TaskOutput } from "../protocol/Protocol.js"
import type { ToolResult } from "../ToolResult.js"
import * as Metrics from "./Metrics.js"
import type { Limits, Options } from "./Options.js"
import type { Follower, PendingCall, RunTask, Suspension, Usage } from "./TaskTypes.js"

// --- a task ---

/** The events only a `"deltas"` stream carries. */
const deltasOnly = new Set<TaskEvent["_tag"]>(["ModelTextDelta", "ReasoningDelta", "TurnRetried", "ToolCallStarted"])
/** The events a `"calls"` stream leaves out. */
const leftOutOfCalls = new Set<TaskEvent["_tag"]>([
  "TurnStarted",
  "ModelText",
  "ToolCallCompleted",
  "SubTaskStarted",
  "SubTaskEnded",
  ...deltasOnly
])

/** Whether a stream that wants `wanted` carries events tagged `tag`. */
export const carries = (wanted: EventsWanted, tag: TaskEvent["_tag"]): boolean =>
  wanted === "deltas" || !(wanted === "calls" ? leftOutOfCalls : deltasOnly).has(tag)

/**
 * The events a task keeps for attachments that come back with an offset (design: The model side):
 * the latest ones, between this many and twice as many (deltas included while it runs; they are
 * not journaled, and an ended task lets them go).
 */
export const replayEvents = 1024

/**
 * Where a task's events go to its attachment: the mailbox its stream reads, or, for a stream on a connection,
 * straight to the connection, its end still through the mailbox (TaskDelivery.ts, `attachTo`).
 */
export type Attachment = Pick<Mailbox.Mailbox<TaskEvent>, "unsafeOffer" | "unsafeDone">

/** One task held in this process: its attachment, its pending calls, its loop and its end. */
export class Task {
  attachment: Attachment | undefined
  /** Cluster mode: the id its follower gave the attachment, the same in each of its re-attaches (see `attach`). */
  attachmentId: string | undefined
  /**
   * The connection its calls were delivered to (its attachment's), the only one whose answers are
   * taken (design: Hostile clients); undefined while nothing is attached, when any of the agent's may answer.
   */
  answerer: string | undefined
  /** Bytes of its prompt counted against its agent's limits while it runs; let go at its end (see `Usage`). */
  promptBytes: number | undefined
  /** Called once at its end: its agent's usage goes down. */
  onEnd: (() => void) | undefined
  /** What the attachment wants: every event, or only what running the calls needs. */
  wanted: EventsWanted = "all"
  /**
   * The typed final output its submitter asked for. Kept in memory only: a task taken back from the
   * journal after a restart answers untyped (its `TaskCompleted` has no `value`).
   */
  output: TaskOutput | undefined
  final: TaskEvent | undefined
  /** When the task ended, for forgetting it a while later. */
  endedAt: number | undefined
  /** Calls delivered and not answered yet; let go when the task ends, after which a re-attach needs only `final`. */
  pending: Map<string, PendingCall> | undefined = new Map()
  /** What the task waits for when it suspended for approvals, until it goes on. */
  suspended: Suspension | undefined
  /** The fiber running its loop, while it runs. */
  loop: Fiber.RuntimeFiber<void> | undefined
  /** Completed with the final event. */
  readonly ended = new Signal<void>()
  /** Completed the next time the task suspends for approvals (then made anew): a parent's `exec_agent` call waits on it. */
  suspending = new Signal<void>()
  /** A child task (an `exec_agent` call's): that call's deadline, by which each call it delivers must end. */
  deadlineAt: number | undefined
  /** The tasks its `exec_agent` calls started, said on its stream (`SubTaskStarted`) once each. */
  readonly children = new Set<string>()
  /**
   * In cluster mode: the answers taken, journaled, by call id (see ClusterTasks.ts, `answer`); a call
   * delivered again after its answer was taken is answered from here. Let go with `pending`.
   */
  answered: Map<string, ToolResult> | undefined = new Map()
  /** Told of each event as it is emitted, offset and all (the book's watchers: `Book.watch`). */
  observe: ((task: Task, event: TaskEvent) => void) | undefined
  /** Told when it says it waits for its database (its metrics: Metrics.ts). */
  life: Metrics.TaskLife | undefined
  /** `TaskWaiting` was said since the last event. */
  private waitingSaid = false
  /** The offset of the last event; it starts from the clock (x1000), so a task taken back after a restart goes on above it. */
  private offset: number
  /** The latest events, for an attachment that comes back with an offset (see `replayEvents`). */
  private log: Array<TaskEvent> = []
  constructor(
    readonly taskId: string,
    readonly agentId: string,
    readonly processId: string,
    /** The platform's Clock (so that a TestClock drives when ended tasks are forgotten). */
    private readonly clock: Clock.Clock
  ) {
    this.offset = clock.unsafeCurrentTimeMillis() * 1000
  }

  /** The last event of an attachment another one took the task from. */
  private takenOver(): TaskEvent {
    return {
      _tag: "TaskTakenOver",
      taskId: this.taskId,
      reason: `another attachment of agent ${this.agentId} took task ${this.taskId} over; it goes on there`
    }
  }

  /**
   * The database the task journals to cannot be reached (a statement of its loop or of an answer
   * waits for it): `TaskWaiting` on its stream, once until its next event.
   */
  waiting(reason: string): void {
    if (this.waitingSaid || this.final !== undefined) return
    this.waitingSaid = true
    this.life?.waiting(this.agentId)
    this.attachment?.unsafeOffer({
      _tag: "TaskWaiting",
      taskId: this.taskId,
      reason: `the platform's database cannot be reached (${reason}); the task goes on from its journal once it is back`
    })
  }

  /** Tells the task's attachment of `event`, with the next offset, kept for attachments to come; gives the offset. */
  emit(unstamped: TaskEvent): number {
    this.waitingSaid = false
    const offset = ++this.offset
    const event = { ...unstamped, offset }
    this.log.push(event)
    if (this.log.length > 2 * replayEvents) this.log.splice(0, this.log.length - replayEvents)
    this.observe?.(this, event)
    if (isTaskEnd(event)) {
      this.final = event
      this.endedAt = this.clock.unsafeCurrentTimeMillis()
      this.pending = undefined
      this.answered = undefined
      // An ended task, kept a while for late attachments, keeps no deltas: its turns' whole texts say it all.
      this.log = this.log.filter((kept) => !deltasOnly.has(kept._tag) || kept._tag === "ToolCallStarted")
      this.onEnd?.()
      this.onEnd = undefined
      this.ended.succeed(undefined)
      this.attachment?.unsafeOffer(event)
      this.attachment?.unsafeDone(Exit.void)
      this.attachment = undefined
      return offset
    }
    if (carries(this.wanted, event._tag)) this.attachment?.unsafeOffer(event)
    return offset
  }

  /**
   * A new stream for this task: `TaskStarted`, then the end if it ended, else every pending call
   * again (but those given to other processes), or the `TaskSuspended` it waits on. A stream still attached is taken over: it ends with `TaskTakenOver`, never silently.
   * With `after` (the offset of the last event the client has), the events past it that the task
   * still keeps come first, in order, none twice; a pending call delivered at or before `after` is
   * delivered again, with a new offset; the end comes unless the client had it.
   *
   * Cluster mode: a follower attaches again when the task's shard moved (`reattach`, with the id of
   * its first attach). One that finds another attachment here was taken over while it moved (that
   * attach came later): it ends with `TaskTakenOver` itself, and the other keeps the task.
   */
  attach(
    mailbox: Attachment,
    wanted: EventsWanted,
    follower?: Follower,
    connection?: string,
    after?: number
  ): void {
    if (
      follower?.reattach === true && this.final === undefined && this.attachment !== undefined &&
      this.attachmentId !== follower.attachmentId
    ) {
      mailbox.unsafeOffer(this.takenOver())
      mailbox.unsafeDone(Exit.void)
      return
    }
    if (this.attachment !== undefined) {
      this.attachment.unsafeOffer(this.takenOver())
      this.attachment.unsafeDone(Exit.void)
    }
    this.attachment = mailbox
    this.attachmentId = follower?.attachmentId
    this.answerer = connection
    this.wanted = wanted
    mailbox.unsafeOffer({ _tag: "TaskStarted", taskId: this.taskId })
    if (after !== undefined) return this.resumeAfter(mailbox, after)
    if (this.final !== undefined) {
      mailbox.unsafeOffer(this.final)
      mailbox.unsafeDone(Exit.void)
      this.attachment = undefined
      this.answerer = undefined
      return
    }
    // A call given to another process of the agent (`route`) is not this stream's to run.
    for (const call of this.pending?.values() ?? []) {
      if (call.route === undefined) mailbox.unsafeOffer({ ...call.event, offset: call.offset })
    }
    if (this.suspended !== undefined) mailbox.unsafeOffer(this.suspended.event)
  }

  /** The events it keeps past `after` that a stream wanting `wanted` carries, in order (nothing is attached). */
  keptAfter(after: number, wanted: EventsWanted): Array<TaskEvent> {
    return this.log.filter((event) => (event.offset ?? 0) > after && carries(wanted, event._tag))
  }

  /** The rest of `attach` for a client that has every event up to `after`. */
  private resumeAfter(mailbox: Attachment, after: number): void {
    const wanted = this.wanted
    let sentFinal = false
    for (const event of this.log) {
      if ((event.offset ?? 0) <= after || !carries(wanted, event._tag)) continue
      mailbox.unsafeOffer(event)
      if (event === this.final) sentFinal = true
    }
    if (this.final !== undefined) {
      // A task taken back from the journal keeps no events: its end comes unless the client had it.
      if (!sentFinal && (this.final.offset === undefined || this.final.offset > after)) mailbox.unsafeOffer(this.final)
      mailbox.unsafeDone(Exit.void)
      this.attachment = undefined
      this.answerer = undefined
      return
    }
    // A call the client had and may not have answered: delivered again (at least once), past its offset.
    for (const call of this.pending?.values() ?? []) {
      if (call.route === undefined && call.offset <= after) {
        call.sentAt = this.clock.unsafeCurrentTimeMillis()
        call.offset = this.emit(call.event)
      }
    }
    // A suspension the client had is not said again (it is an event like the others, not a call to run).
  }
}

// --- the book: the tasks held here, and what running them needs ---

/** Per agent, what its tasks not ended yet hold, telling `changed` of each change of an agent's count (its gauge). */
export class UsageMap extends Map<string, Usage> {
  changed: (agentId: string, tasks: number) => void = () => {}
}

/** What the parts of the tasks share (Tasks.ts and the modules it is made of). */
export interface Book {
  readonly tasks: Map<string, Task>
  /** Per agent, what its tasks not ended yet hold; an agent with none has no entry. */
  readonly usage: UsageMap
  readonly options: Options
  readonly journal: Journal.Journal["Type"] | undefined
  readonly clock: Clock.Clock
  readonly runTask: RunTask
  readonly add: (taskId: string, agentId: string, processId: string) => Task
  /** The agent's task; another agent's task is unknown to it. */
  readonly own: (agentId: string, taskId: string) => Task | undefined
  /** Counts `task`'s prompt against its agent's usage until the task ends or is let go. */
  readonly count: (task: Task, prompt: string) => void
  /** Waits for a turn of the event loop of its own, for a child task's making and start (`makeChildTurns`). */
  readonly childTurn: Effect.Effect<void>
  /**
   * Tells `listener` of every event of every task held here from now on, as it is emitted (before its
   * attachment has it), until the function it gives is called. The operator API's feeds watch.
   */
  readonly watch: (listener: (task: Task, event: TaskEvent) => void) => () => void
}

/**
 * A platform's turns of the event loop for child tasks: each waits for one of its own, so that the child tasks
 * started at once (one turn's `exec_agent` calls) are made and start one a turn, each after the I/O that came
 * meanwhile (another tenant's messages) is read, and turns left idle between two (`childIdleTurns`: a child's slice
 * of the loop is then about a fourth of the time while hundreds start, so another tenant's message seldom waits behind
 * one). Chained: the n-th waits n times as many.
 */
const childIdleTurns = 4

const makeChildTurns = (): Effect.Effect<void> => {
  const idleTurns = (n: number, done: () => void): void => void setImmediate(() => n <= 1 ? done() : idleTurns(n - 1, done))
  let last: Promise<void> = Promise.resolve()
  return Effect.promise(() => {
    const turn = last.then(() => new Promise<void>((resolve) => idleTurns(childIdleTurns, resolve)))
    last = turn
    return turn
  })
}

/** The book: no task held yet, and the platform's own fiber set for their loops. */
export const makeBook = (options: Options, journal: Journal.Journal["Type"] | undefined) =>
  Effect.gen(function*() {
    const tasks = new Map<string, Task>()
    const usage = new UsageMap()
    const clock = yield* Effect.clock
    // Each task's end, suspension and waiting counted and logged (Metrics.ts).
    const life = yield* Metrics.taskLife
    usage.changed = life.open
    // Tasks run in the platform's own context, never the caller's (an in-process caller's services
    // and hooks must not leak into the platform's loop).
    const runTask: RunTask = yield* FiberSet.runtime(yield* FiberSet.make())<LanguageModel.LanguageModel>()
    const watchers = new Set<(task: Task, event: TaskEvent) => void>()
    const observe = (task: Task, event: TaskEvent) => {
      life.event(task, event)
      for (const watcher of watchers) watcher(task, event)
    }
    const book: Book = {
      tasks,
      usage,
      options,
      journal,
      clock,
      runTask,
      childTurn: makeChildTurns(),
      add: (taskId, agentId, processId) => {
        const task = new Task(taskId, agentId, processId, clock)
        task.observe = observe
        task.life = life
        tasks.set(taskId, task)
        return task
      },
      watch: (listener) => {
        watchers.add(listener)
        return () => void watchers.delete(listener)
      },
      own: (agentId, taskId) => {
        const task = tasks.get(taskId)
        return task === undefined || task.agentId !== agentId ? undefined : task
      },
      count: (task, prompt) => {
        if (task.promptBytes !== undefined || task.final !== undefined) return
        const bytes = Buffer.byteLength(prompt)
        const held = usage.get(task.agentId) ?? { tasks: 0, promptBytes: 0 }
        held.tasks++
        held.promptBytes += bytes
        usage.set(task.agentId, held)
        usage.changed(task.agentId, held.tasks)
        task.promptBytes = bytes
        task.onEnd = () => uncount(usage, task)
      }
    }
    return book
  })

/** Lets go of what `task` counted against its agent's usage (once). */
export const uncount = (usage: Map<string, Usage>, task: Task): void => {
  const bytes = task.promptBytes
  const held = usage.get(task.agentId)
  task.promptBytes = undefined
  task.onEnd = undefined
  if (bytes === undefined || held === undefined) return
  held.tasks--
  held.promptBytes -= bytes
  if (held.tasks <= 0) usage.delete(task.agentId)
  if (usage instanceof UsageMap) usage.changed(task.agentId, Math.max(0, held.tasks))
}

/**
 * Why a new task of `agentId` with a prompt of `bytes` is refused, given what the agent's tasks not
 * ended yet hold (`held`): at `maxTasksPerAgent` tasks, or prompts that would pass
 * `maxPromptBytesPerAgent` (design: Hostile clients); undefined when it is not. The embedded platform
 * counts in memory; a cluster counts from the journal, whichever runner holds each task.
 */
export const usageProblem = (
  held: { readonly tasks: number; readonly promptBytes: number },
  limits: Limits,
  agentId: string,
  bytes: number
): AgentLimitExceeded | undefined => {
  if (held.tasks >= limits.maxTasksPerAgent) {
    return new AgentLimitExceeded({
      agentId,
      limit: "maxTasksPerAgent",
      max: limits.maxTasksPerAgent,
      held: `${held.tasks} tasks not ended yet`
    })
  }
  if (held.promptBytes + bytes > limits.maxPromptBytesPerAgent) {
    return new AgentLimitExceeded({
      agentId,
      limit: "maxPromptBytesPerAgent",
      max: limits.maxPromptBytesPerAgent,
      held: `${held.promptBytes} bytes of prompts in its tasks not ended yet, and this prompt is ${bytes}`
    })
  }
  return undefined
}

/** `usageProblem` of the agent's tasks held here, as a failure. */
export const checkUsage = (usage: Map<string, Usage>, limits: Limits, agentId: string, bytes: number) => {
  const refused = usageProblem(usage.get(agentId) ?? { tasks: 0, promptBytes: 0 }, limits, agentId, bytes)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}
