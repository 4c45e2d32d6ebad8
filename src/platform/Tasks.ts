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
import { Clock, Effect, Exit, Fiber, FiberSet, Mailbox, Option, Schedule, Schema, type Tracer } from "effect"
import { Ids } from "../Ids.js"
import type { PendingApproval } from "../internal/agent/types.js"
import * as SqlStore from "../internal/sql/store.js"
import * as Metrics from "../internal/util/metrics.js"
import { Signal } from "../internal/util/signal.js"
import { parseTraceparent, traceparentOf } from "../internal/util/traceContext.js"
import * as Invocation from "../Invocation.js"
import * as Journal from "../Journal.js"
import type * as LanguageModel from "../LanguageModel.js"
import {
  AgentLimitExceeded,
  ApprovalsNeedJournal,
  type Caller,
  type EventsWanted,
  NoPendingTaskApproval,
  TaskEvent,
  type TaskOutput,
  type ToolCallResult,
  UnknownTask
} from "../protocol/Protocol.js"
import type * as Tool from "../Tool.js"
import type { ToolCallInfo } from "../ToolContext.js"
import type { ToolResult } from "../ToolResult.js"
import * as AgentCalls from "./AgentCalls.js"
import type { Limits, Options } from "./Options.js"
import * as TaskRunner from "./TaskRunner.js"
import { EventJson, type Follower, type PendingCall, type RunTask, type Suspension, type Usage } from "./TaskTypes.js"

export type { Follower } from "./TaskTypes.js"

/** How many submit keys the platform remembers (with the task each made), the oldest forgotten first. */
const maxSubmitKeys = 10_000

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
const carries = (wanted: EventsWanted, tag: TaskEvent["_tag"]): boolean =>
  wanted === "deltas" || !(wanted === "calls" ? leftOutOfCalls : deltasOnly).has(tag)

/**
 * The events a task keeps for attachments that come back with an offset (design: The model side):
 * the latest ones, between this many and twice as many (deltas included while it runs; they are
 * not journaled, and an ended task lets them go).
 */
export const replayEvents = 1024

/** One task held in this process: its attachment, its pending calls, its loop and its end. */
export class Task {
  attachment: Mailbox.Mailbox<TaskEvent> | undefined
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
    if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") {
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
   * again, or the `TaskSuspended` it waits on. A stream still attached is taken over: it ends with `TaskTakenOver`, never silently.
   * With `after` (the offset of the last event the client has), the events past it that the task
   * still keeps come first, in order, none twice; a pending call delivered at or before `after` is
   * delivered again, with a new offset; the end comes unless the client had it.
   *
   * Cluster mode: a follower attaches again when the task's shard moved (`reattach`, with the id of
   * its first attach). One that finds another attachment here was taken over while it moved (that
   * attach came later): it ends with `TaskTakenOver` itself, and the other keeps the task.
   */
  attach(
    mailbox: Mailbox.Mailbox<TaskEvent>,
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
    for (const call of this.pending?.values() ?? []) mailbox.unsafeOffer({ ...call.event, offset: call.offset })
    if (this.suspended !== undefined) mailbox.unsafeOffer(this.suspended.event)
  }

  /** The rest of `attach` for a client that has every event up to `after`. */
  private resumeAfter(mailbox: Mailbox.Mailbox<TaskEvent>, after: number): void {
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
      if (call.offset <= after) {
        call.sentAt = this.clock.unsafeCurrentTimeMillis()
        call.offset = this.emit(call.event)
      }
    }
    // A suspension the client had is not said again (it is an event like the others, not a call to run).
  }
}

// --- the book: the tasks held here, and what running them needs ---

/** What the parts below share. */
interface Book {
  readonly tasks: Map<string, Task>
  /** Per agent, what its tasks not ended yet hold; an agent with none has no entry. */
  readonly usage: Map<string, Usage>
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

const makeBook = (options: Options, journal: Journal.Journal["Type"] | undefined) =>
  Effect.gen(function*() {
    const tasks = new Map<string, Task>()
    const usage = new Map<string, Usage>()
    const clock = yield* Effect.clock
    // Tasks run in the platform's own context, never the caller's (an in-process caller's services
    // and hooks must not leak into the platform's loop).
    const runTask: RunTask = yield* FiberSet.runtime(yield* FiberSet.make())<LanguageModel.LanguageModel>()
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
        tasks.set(taskId, task)
        return task
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
        task.promptBytes = bytes
        task.onEnd = () => uncount(usage, task)
      }
    }
    return book
  })

/** Lets go of what `task` counted against its agent's usage (once). */
const uncount = (usage: Map<string, Usage>, task: Task): void => {
  const bytes = task.promptBytes
  const held = usage.get(task.agentId)
  task.promptBytes = undefined
  task.onEnd = undefined
  if (bytes === undefined || held === undefined) return
  held.tasks--
  held.promptBytes -= bytes
  if (held.tasks <= 0) usage.delete(task.agentId)
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
const checkUsage = (usage: Map<string, Usage>, limits: Limits, agentId: string, bytes: number) => {
  const refused = usageProblem(usage.get(agentId) ?? { tasks: 0, promptBytes: 0 }, limits, agentId, bytes)
  return refused === undefined ? Effect.void : Effect.fail(refused)
}

// --- the calls' way out: delivery and attachments ---

/** Delivers a call of `task` on its stream and waits for the answer (one taken already is the answer). */
const deliverOf = (task: Task) => (call: TaskRunner.Delivery): Effect.Effect<ToolResult> =>
  Effect.flatMap(Effect.all([Clock.currentTimeMillis, Metrics.Exporting]), ([now, exporting]) => {
    const answered = task.answered?.get(call.toolCallId)
    if (answered !== undefined) return Effect.succeed(answered)
    // A child task's calls end by its `exec_agent` call's deadline, whatever their own timeouts.
    const capped = task.deadlineAt !== undefined && task.deadlineAt < call.deadlineAt ? { ...call, deadlineAt: task.deadlineAt } : call
    const event = { _tag: "ToolCallRequested" as const, taskId: task.taskId, ...capped }
    const done = new Signal<ToolResult>()
    const pending: PendingCall = { event, done, sentAt: now, offset: 0 }
    task.pending?.set(call.toolCallId, pending)
    if (exporting) Metrics.deliveries.unsafeUpdate(1, Metrics.deliveryLabels.first)
    pending.offset = task.emit(event)
    return Effect.ensuring(done.await, Effect.sync(() => task.pending?.delete(call.toolCallId)))
  })

/**
 * The process that held `task` went away (its attachment's connection closed) while calls of it were pending, and no
 * attachment came back within `AgentCalls.regiveAfter` (a reconnect does at once): logged at the platform (agent,
 * process, task, calls), and said on the task's stream (`TaskWaiting`, kept for the attachment that comes back after
 * it), so that whoever follows the task learns why nothing comes.
 */
const detached = (task: Task, mailbox: Mailbox.Mailbox<TaskEvent>): Effect.Effect<void> => {
  const still = () => task.attachment === undefined && task.final === undefined && (task.pending?.size ?? 0) > 0
  if (!still()) return Effect.void
  const said = Effect.suspend(() => {
    if (!still() || mailbox === task.attachment) return Effect.void
    const pending = [...task.pending!.keys()]
    const calls = `${pending.length === 1 ? "call" : "calls"} ${pending.join(", ")}`
    const reason = `process ${task.processId} of agent ${task.agentId}, which held the task, went away (its connection ` +
      `closed) with ${calls} pending; they wait for a process of agent ${task.agentId} to attach`
    task.emit({ _tag: "TaskWaiting", taskId: task.taskId, reason })
    return Effect.logWarning(`task ${task.taskId}: ${reason}`)
  })
  return Effect.asVoid(Effect.forkDaemon(Effect.delay(said, AgentCalls.regiveAfter)))
}

/**
 * A new attachment to the task, from `connection` (whose answers are then the only ones taken); the
 * scope's end is how the platform learns the client went away.
 */
export const attachTo = (
  task: Task,
  wanted: EventsWanted | undefined,
  follower?: Follower,
  connection?: string,
  after?: number
) =>
  Effect.gen(function*() {
    const mailbox = yield* Mailbox.make<TaskEvent>()
    task.attach(mailbox, wanted ?? "all", follower, connection, after)
    // Its calls then wait for a re-attach (and any connection of the agent's may answer them).
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        if (task.attachment !== mailbox) return Effect.void
        task.attachment = undefined
        task.answerer = undefined
        return detached(task, mailbox)
      })
    )
    return mailbox
  })

// --- the loops: started, suspended for approvals, going on ---

/** The task's loop fiber, let go by the task once it ends: nothing of the loop (its prompt) outlives it. */
const letGoAtEnd = (task: Task, fiber: Fiber.RuntimeFiber<void>): Fiber.RuntimeFiber<void> => {
  fiber.addObserver(() => {
    if (task.loop === fiber) task.loop = undefined
  })
  return fiber
}

/**
 * Starting a task's loop, and what a suspended one does at its first expiry or last decision;
 * `platformTools` gives the tools the platform handles itself for a task (`exec_agent`, `list_agents`).
 */
const makeLoops = (book: Book, platformTools: (task: Task) => ReadonlyArray<Tool.Any>) => {
  const { clock, journal, options, runTask } = book

  /**
   * The task waits for the calls of `event` to be decided (`decide`); at the first one's expiry it
   * goes on anyway, and the loop's gate denies what expired (the task never waits for ever).
   */
  const suspend = (task: Task, event: Suspension["event"]): void => {
    const suspension: Suspension = { event, undecided: new Set(event.pending.map((p) => p.toolCallId)), expiry: undefined }
    task.suspended = suspension
    const suspending = task.suspending
    task.suspending = new Signal()
    suspending.succeed(undefined)
    const first = Math.min(...event.pending.map((p) => p.expiresAt))
    suspension.expiry = runTask(Effect.gen(function*() {
      yield* Effect.sleep(Math.max(0, first - (yield* Clock.currentTimeMillis)))
      suspension.expiry = undefined
      yield* goOn(task, suspension)
    }))
  }

  /** A suspended task goes on: its loop runs again from the journal, which holds the decisions. */
  const goOn = (task: Task, suspension: Suspension): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (journal === undefined || task.suspended !== suspension) return
      task.suspended = undefined
      if (suspension.expiry !== undefined) yield* Fiber.interrupt(suspension.expiry)
      yield* journal.resumed(task.taskId)
      const run = yield* Effect.orDie(journal.run(task.taskId))
      if (run === undefined || !Journal.isOpen(run)) {
        return yield* Effect.logWarning(`task ${task.taskId}: the journal no longer holds it open; it cannot go on`)
      }
      yield* Effect.logInfo(`task ${task.taskId}: its approvals are decided; it goes on`)
      start(task, run.prompt, run.tools, parseTraceparent(run.traceparent), run)
    })

  /**
   * Runs a task's loop: a new one, or with a journal, one taken back after a restart (from what it
   * journaled; `known`, what the journal holds of it if just read or written, is not read again).
   */
  const start = (
    task: Task,
    prompt: string,
    tools: Journal.TaskTools,
    parent?: Tracer.AnySpan,
    known?: Journal.OpenRun
  ): void => {
    const { taskId } = task
    // The task's trace goes on from its submitter's (design: Observability), when it came with one.
    // A child task's loop (an exec_agent call's) starts on a stack of its own, not its caller's (a cycle of agents
    // whose model answers at once would otherwise nest every task's loop on one stack, until it overflows), and in
    // a turn of the event loop of its own (300 calls of one turn would otherwise run 300 loops before any other
    // tenant's message is read).
    const own = <A, E, R>(loop: Effect.Effect<A, E, R>) => taskId.includes("/") ? Effect.zipRight(book.childTurn, loop) : loop
    const traced = <A, E, R>(loop: Effect.Effect<A, E, R>) =>
      own(parent === undefined ? loop : Effect.withParentSpan(loop, parent))
    const runOptions = {
      taskId,
      agentId: task.agentId,
      prompt,
      instructions: options.instructions,
      maxSteps: options.maxSteps,
      approvalExpiry: options.approvalExpiry,
      tools,
      platformTools: platformTools(task),
      output: task.output,
      deliver: deliverOf(task),
      emit: (event: TaskEvent) => {
        if (event._tag !== "TaskSuspended") return void task.emit(event)
        // Kept with its offset: an attachment that comes back is given it as it was sent.
        const stamped = { ...event, offset: event.offset ?? 0 }
        suspend(task, stamped)
        stamped.offset = task.emit(event)
      }
    }
    if (journal === undefined) {
      task.loop = letGoAtEnd(task, runTask(traced(TaskRunner.run(runOptions))))
      return
    }
    // The task is a journaled run of the loop (design: Durable runs), taken up from what the journal holds.
    const journaled = TaskRunner.run({ ...runOptions, journaled: true, known }).pipe(
      Effect.provideService(Journal.Journal, journal),
      // Its statements waiting for the database say so on its stream.
      Effect.locally(SqlStore.currentOnUnreachable, (reason) => Effect.sync(() => task.waiting(reason))),
      // The end is journaled after the final event went out: a restart in between replays to the same end.
      Effect.zipRight(Effect.suspend(() =>
        task.final === undefined ? Effect.void : Schema.encode(EventJson)(task.final).pipe(
          Effect.orDie,
          Effect.flatMap((final) => journal.ended(taskId, { final }, task.endedAt ?? clock.unsafeCurrentTimeMillis()))
        )
      ))
    )
    task.loop = letGoAtEnd(task, runTask(traced(journaled)))
  }

  return { start, goOn }
}

type Loops = ReturnType<typeof makeLoops>

// --- taking tasks up from the journal ---

/** Taking up one task from the journal on demand (`hold`), and every one it holds at start (`takeBack`). */
const makeHolding = (book: Book, { start }: Loops) =>
  Effect.gen(function*() {
    const { add, journal, tasks } = book
    /** Only one task is taken up from the journal at a time: two messages for it must not start two loops. */
    const holding = yield* Effect.makeSemaphore(1)

    /**
     * The task in this process, taken up from the journal if it is not (cluster mode: the runner that
     * owns the task's shard holds it): an open task's loop goes on from what it journaled, an ended
     * one answers its final event. Undefined if the journal does not hold it.
     */
    const hold = (taskId: string): Effect.Effect<Task | undefined> =>
      Effect.suspend(() => {
        const held = tasks.get(taskId)
        if (held !== undefined || journal === undefined) return Effect.succeed(held)
        return holding.withPermits(1)(Effect.gen(function*() {
          const raced = tasks.get(taskId)
          if (raced !== undefined) return raced
          const run = yield* Effect.orDie(journal.run(taskId))
          if (run === undefined || run.kind !== "task") return undefined
          const task = add(taskId, run.agentId, run.processId)
          if (Journal.isOpen(run)) {
            book.count(task, run.prompt)
            start(task, run.prompt, run.tools, parseTraceparent(run.traceparent), run)
          } else if (run.final !== undefined) {
            task.final = yield* Effect.orDie(Schema.decode(EventJson)(run.final))
            task.endedAt = run.endedAt
            task.ended.succeed(undefined)
          }
          return task
        }))
      })

    /** The agent's task held here; another agent's is unknown to it. */
    const held = (agentId: string, taskId: string): Effect.Effect<Task, UnknownTask> =>
      Effect.flatMap(hold(taskId), (task) =>
        task === undefined || task.agentId !== agentId ? Effect.fail(new UnknownTask({ taskId })) : Effect.succeed(task))

    /**
     * Takes back what the journal holds: recently ended tasks (for their final event) and every
     * task that had not ended, whose loop runs again from its journaled turns and answers.
     */
    const takeBack = (journal: Journal.Journal["Type"], keepEndedMillis: number) =>
      Effect.gen(function*() {
        const { ended, open } = yield* journal.tasks((yield* Clock.currentTimeMillis) - keepEndedMillis)
        for (const entry of ended) {
          if (entry.final === undefined) continue
          const task = add(entry.runId, entry.agentId, entry.processId)
          task.final = yield* Schema.decode(EventJson)(entry.final).pipe(
            Effect.mapError((error) => new Journal.JournalUnavailable({ path: journal.path, reason: error.message }))
          )
          task.endedAt = entry.endedAt
        }
        // Counted (never refused): what the platform held before the restart it holds again.
        for (const entry of open) {
          const task = add(entry.runId, entry.agentId, entry.processId)
          book.count(task, entry.prompt)
          start(task, entry.prompt, entry.tools, parseTraceparent(entry.traceparent))
        }
        if (open.length > 0) {
          yield* Effect.logInfo(`journal ${journal.path}: resumed ${open.length} unfinished task(s)`)
        }
      })

    return { hold, held, takeBack }
  })

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

// --- upkeep: redelivery and retention ---

/** What the redelivery and the retention sweep (Parts.ts) do to the tasks. */
const upkeep = ({ tasks, usage }: Book, exporting: boolean) => ({
  /** Delivers again each pending call last sent at or before `sentBy`; it counts as sent `now`. */
  redeliver: (sentBy: number, now: number): void => {
    for (const task of tasks.values()) {
      for (const call of task.pending?.values() ?? []) {
        if (call.sentAt <= sentBy) {
          call.sentAt = now
          if (exporting) Metrics.deliveries.unsafeUpdate(1, Metrics.deliveryLabels.again)
          call.offset = task.emit(call.event)
        }
      }
    }
  },
  /** Forgets the tasks that ended at or before `before`. */
  forgetEnded: (before: number): void => {
    for (const task of tasks.values()) {
      if (task.endedAt !== undefined && task.endedAt <= before) tasks.delete(task.taskId)
    }
  },
  count: (): number => tasks.size,
  /** What the agent's tasks not ended yet hold (its prompts' bytes), counted against its limits. */
  usageOf: (agentId: string): Usage => ({ ...(usage.get(agentId) ?? { tasks: 0, promptBytes: 0 }) }),
  /** Lets go of `task` (cluster mode: its shard moved); a task taken up again since is kept. */
  letGo: (task: Task): void => {
    uncount(usage, task)
    if (tasks.get(task.taskId) === task) tasks.delete(task.taskId)
  }
})

// --- a new task ---

/** What a new task is made of. */
interface NewTask {
  readonly taskId: string
  readonly agentId: string
  readonly processId: string
  readonly prompt: string
  readonly tools: Journal.TaskTools
  readonly output?: TaskOutput | undefined
}

/**
 * A new task: admitted to its agent's limits, journaled before anyone learns its id, continuing the
 * trace of the span it is made in; its loop starts once `attach` has run (its submitter's stream, or
 * none), so that the first events reach that stream.
 */
const createOf = (book: Book, limits: Limits, loops: Loops) =>
<A, R>(init: NewTask, attach: (task: Task) => Effect.Effect<A, never, R>): Effect.Effect<A, AgentLimitExceeded, R> =>
  Effect.gen(function*() {
    const { agentId, processId, prompt, taskId, tools } = init
    const { journal } = book
    yield* checkUsage(book.usage, limits, agentId, Buffer.byteLength(prompt))
    const task = book.add(taskId, agentId, processId)
    book.count(task, prompt)
    // The submitter's span: the task's run continues its trace, here and once taken back from the journal.
    const parent = Option.getOrUndefined(yield* Effect.option(Effect.currentSpan))
    const traceparent = parent === undefined ? undefined : traceparentOf(parent)
    // Journaled before anyone learns the task's id: a restart cannot lose a task a client knows.
    const record = { runId: taskId, kind: "task" as const, agentId, processId, prompt, tools, traceparent }
    if (journal !== undefined) {
      yield* Effect.onError(journal.started(record), () => Effect.sync(() => uncount(book.usage, task)))
    }
    task.output = init.output
    const attached = yield* attach(task)
    // What the journal holds of it now: nothing but its start.
    const known = { ...record, status: "running" as const, turns: [], calls: new Map(), approvals: new Map() }
    loops.start(task, prompt, tools, parent, journal === undefined ? undefined : known)
    return attached
  })

type Create = ReturnType<typeof createOf>

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
