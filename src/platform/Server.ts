/**
 * The platform (design: The platform): agents and their registered tools, tokens bound to agent ids, a lifecycle
 * budget per agent, and tasks run by the agent loop whose tool calls go out on the task's stream,
 * at least once. In memory, or with a journal (a SQLite file) from which a restarted platform
 * takes its unfinished tasks back. `layerHandlers` is the protocol's implementation, whatever the
 * transport; `layerWebSocket` serves it on a real WebSocket.
 */
import * as Headers from "@effect/platform/Headers"
import type * as Rpc from "@effect/rpc/Rpc"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcServer from "@effect/rpc/RpcServer"
import {
  Clock,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberSet,
  Layer,
  Mailbox,
  Ref,
  Runtime,
  type Schedule,
  Schema,
  type Scope
} from "effect"
import { createServer, STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { type WebSocket, WebSocketServer } from "ws"
import { Ids } from "../Ids.js"
import { Signal } from "../internal/util/signal.js"
import * as Invocation from "../Invocation.js"
import { ToolResult } from "../ToolResult.js"
import * as LanguageModel from "../LanguageModel.js"
import { Timing } from "../Timing.js"
import * as TimingModule from "../Timing.js"
import * as Toolkit from "../Toolkit.js"
import * as Framing from "../protocol/Framing.js"
import * as Journal from "../Journal.js"
import {
  ApprovalsNeedJournal,
  AuthenticatedAgent,
  Authentication,
  authorizationHeader,
  type EventsWanted,
  LifecycleBudgetExceeded,
  ManifestRejected,
  NoPendingTaskApproval,
  PlatformRpcs,
  TaskEvent,
  type ToolCallResult,
  Unauthorized,
  UnknownTask
} from "../protocol/Protocol.js"
import * as TaskRunner from "./TaskRunner.js"

/** A task's final event as the journal keeps it. */
const EventJson = Schema.parseJson(TaskEvent)
import * as Wire from "./Wire.js"

/** How the platform runs. */
export interface Options {
  /** Token -> the agent id it is bound to. */
  readonly tokens: ReadonlyMap<string, string>
  /** The interval serving processes heartbeat at; 3 of them silent hides an agent's tools. Default 60 s. */
  readonly heartbeatInterval?: Duration.DurationInput | undefined
  /** Lifecycle calls (register, heartbeat, deregister) allowed per agent per window. Default 30. */
  readonly lifecycleBudget?: number | undefined
  /** Default 1 minute. */
  readonly lifecycleWindow?: Duration.DurationInput | undefined
  /** System instructions for the tasks' model. */
  readonly instructions?: string | undefined
  /** Model turns per task. Default 20. */
  readonly maxSteps?: number | undefined
  /**
   * A SQLite file (created if missing) journaling tasks, model turns, delivered calls and answers:
   * on start, the tasks that had not ended run again from it. Default: none, everything in memory.
   */
  readonly journal?: string | undefined
  /**
   * With a journal: how long a suspended task waits for a decision on a call that needs approval
   * (`DecideApproval`); at the first expiry it goes on, and the model reads that no one decided. Default 24 hours.
   */
  readonly approvalExpiry?: Duration.DurationInput | undefined
  /** How long an ended task can still be attached for its final event, in memory and in the journal. Default 10 minutes. */
  readonly keepEndedTasks?: Duration.DurationInput | undefined
  /** A process silent for this many heartbeat intervals is forgotten (its manifest freed). Default 10. */
  readonly evictSilentAfter?: number | undefined
}

export {
  /** The journal's file could not be opened, prepared or read. */
  JournalUnavailable
} from "../Journal.js"

/** Parses `PLATFORM_TOKENS` (`token:agent,token:agent`, or one pair a line) into `Options.tokens`. */
export const parseTokens = (text: string): ReadonlyMap<string, string> =>
  new Map(
    text.split(/[,\n]/).map((pair) => pair.trim()).filter((pair) => pair !== "").map((pair) => {
      const colon = pair.indexOf(":")
      return [pair.slice(0, colon), pair.slice(colon + 1)] as const
    }).filter(([token, agent]) => token !== "" && agent !== "")
  )

// ---------------------------------------------------------------------------------------------
// State.

interface ProcessEntry {
  readonly processId: string
  readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>
  readonly manifestHash: string
  lastSeen: number
}

interface AgentEntry {
  readonly processes: Map<string, ProcessEntry>
  /** Times of the lifecycle calls inside the current window. */
  lifecycle: Array<number>
}

interface PendingCall {
  readonly event: Extract<TaskEvent, { _tag: "ToolCallRequested" }>
  readonly done: Signal<ToolResult>
  /** When it was last delivered. */
  sentAt: number
}

/**
 * A journaled task waiting for a person (design: Durable runs): its `TaskSuspended`, the calls of it
 * not decided yet, and the fiber that takes the task up when the first approval expires. Its loop has
 * stopped; once every call is decided it runs again from the journal.
 */
interface Suspension {
  readonly event: Extract<TaskEvent, { _tag: "TaskSuspended" }>
  readonly undecided: Set<string>
  expiry: Fiber.RuntimeFiber<void> | undefined
}

/** The events a `"calls"` stream leaves out. */
const leftOutOfCalls = new Set<TaskEvent["_tag"]>(["TurnStarted", "ModelText", "ToolCallCompleted"])

/** Cluster mode: a follower's attachment, and whether this attach is one of its re-attaches (see `Task.attach`). */
interface Follower {
  readonly attachmentId: string
  readonly reattach: boolean
}

class Task {
  attachment: Mailbox.Mailbox<TaskEvent> | undefined
  /** Cluster mode: the id its follower gave the attachment, the same in each of its re-attaches (see `attach`). */
  attachmentId: string | undefined
  /** What the attachment wants: every event, or only what running the calls needs. */
  wanted: EventsWanted = "all"
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
  /**
   * In cluster mode: the answers taken, journaled, by call id (see `Tasks.answer`); a call delivered
   * again after its answer was taken is answered from here. Let go with `pending`.
   */
  answered: Map<string, ToolResult> | undefined = new Map()
  constructor(
    readonly taskId: string,
    readonly agentId: string,
    readonly processId: string,
    /** The platform's Clock (so that a TestClock drives when ended tasks are forgotten). */
    private readonly clock: Clock.Clock
  ) {}

  /** The last event of an attachment another one took the task from. */
  private takenOver(): TaskEvent {
    return {
      _tag: "TaskTakenOver",
      taskId: this.taskId,
      reason: `another attachment of agent ${this.agentId} took task ${this.taskId} over; it goes on there`
    }
  }

  emit(event: TaskEvent): void {
    if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") {
      this.final = event
      this.endedAt = this.clock.unsafeCurrentTimeMillis()
      this.pending = undefined
      this.answered = undefined
      this.ended.succeed(undefined)
      this.attachment?.unsafeOffer(event)
      this.attachment?.unsafeDone(Exit.void)
      this.attachment = undefined
      return
    }
    if (this.wanted === "calls" && leftOutOfCalls.has(event._tag)) return
    this.attachment?.unsafeOffer(event)
  }

  /**
   * A new stream for this task: `TaskStarted`, then the end if it ended, else every pending call
   * again, or the `TaskSuspended` it waits on. A stream still attached is taken over: it ends with `TaskTakenOver`, never silently.
   *
   * Cluster mode: a follower attaches again when the task's shard moved (`reattach`, with the id of
   * its first attach). One that finds another attachment here was taken over while it moved (that
   * attach came later): it ends with `TaskTakenOver` itself, and the other keeps the task.
   */
  attach(mailbox: Mailbox.Mailbox<TaskEvent>, wanted: EventsWanted, follower?: Follower): void {
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
    this.wanted = wanted
    mailbox.unsafeOffer({ _tag: "TaskStarted", taskId: this.taskId })
    if (this.final !== undefined) {
      mailbox.unsafeOffer(this.final)
      mailbox.unsafeDone(Exit.void)
      this.attachment = undefined
      return
    }
    for (const call of this.pending?.values() ?? []) mailbox.unsafeOffer(call.event)
    if (this.suspended !== undefined) mailbox.unsafeOffer(this.suspended.event)
  }
}

/** The default of `Options.keepEndedTasks`. */
const defaultKeepEndedTasks = Duration.minutes(10)

/** What the platform holds, for inspection (tests, an admin view). */
export class PlatformState extends Context.Tag("agent-tools/platform/PlatformState")<PlatformState, {
  /** The manifest hash each live process of `agentId` registered. */
  readonly manifestHashes: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
  /** The tool names models of `agentId` are offered now. */
  readonly visibleTools: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
  /** The processes of `agentId` the platform holds an entry for (live or silent, not yet evicted). */
  readonly processCount: (agentId: string) => Effect.Effect<number>
  /** The tasks held in memory (running, or ended and still attachable for their final event). */
  readonly taskCount: Effect.Effect<number>
  /** Lifecycle calls seen per agent, all time. */
  readonly lifecycleCalls: (agentId: string) => Effect.Effect<{ register: number; heartbeat: number; deregister: number }>
}>() {}

// ---------------------------------------------------------------------------------------------
// The protocol's handlers: the parts of the platform, in the order `layerHandlers` builds them.
// Its scope runs its finalizers last-added first, so they stop in the reverse order: the retention
// sweep, the redelivery, the tasks' loops, and last the journal, opened first.

/** `Options` in milliseconds, defaults applied. */
interface Limits {
  readonly heartbeatMillis: number
  readonly lifecycleBudget: number
  readonly lifecycleWindowMillis: number
  readonly keepEndedTasksMillis: number
  readonly evictAfterMillis: number
}

const limitsOf = (options: Options): Limits => {
  const millis = (duration: Duration.DurationInput) => Duration.toMillis(Duration.decode(duration))
  const heartbeatMillis = millis(options.heartbeatInterval ?? TimingModule.heartbeatInterval)
  return {
    heartbeatMillis,
    lifecycleBudget: options.lifecycleBudget ?? 30,
    lifecycleWindowMillis: millis(options.lifecycleWindow ?? "1 minute"),
    keepEndedTasksMillis: millis(options.keepEndedTasks ?? defaultKeepEndedTasks),
    evictAfterMillis: (options.evictSilentAfter ?? 10) * heartbeatMillis
  }
}

/** The caller's token must be bound to the agent it names. */
const authorize = (agentId: string) =>
  Effect.flatMap(AuthenticatedAgent, (authenticated) =>
    authenticated.agentId === agentId
      ? Effect.void
      : Effect.fail(new Unauthorized({ message: `the token is not valid for agent ${agentId}` })))

// --- Agents ---

type LifecycleKind = "register" | "heartbeat" | "deregister"

/** Who makes a call: a process of an agent. */
interface Caller {
  readonly agentId: string
  readonly processId: string
}

const noLifecycleCalls = (): Record<LifecycleKind, number> => ({ register: 0, heartbeat: 0, deregister: 0 })

/**
 * The agents (design: The platform): each one's processes and the tools they registered, the tools
 * a task's model is offered, and the lifecycle budget each agent's calls are held to (design: Hostile
 * clients). Memory only and no fiber: nothing of it stops at shutdown; the sweep forgets processes
 * gone silent.
 */
const makeAgents = (limits: Limits) => {
  const agents = new Map<string, AgentEntry>()
  const counts = new Map<string, Record<LifecycleKind, number>>()

  const agentOf = (agentId: string): AgentEntry => {
    let agent = agents.get(agentId)
    if (agent === undefined) {
      agent = { processes: new Map(), lifecycle: [] }
      agents.set(agentId, agent)
    }
    return agent
  }

  /** Counts a lifecycle call against the agent's budget; the call over it is refused. */
  const lifecycle = (agentId: string, kind: LifecycleKind) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const { lifecycleBudget: limit, lifecycleWindowMillis: windowMillis } = limits
      const agent = agentOf(agentId)
      agent.lifecycle = agent.lifecycle.filter((at) => at > now - windowMillis)
      if (agent.lifecycle.length >= limit) {
        return Effect.fail(new LifecycleBudgetExceeded({ agentId, limit, windowMillis }))
      }
      agent.lifecycle.push(now)
      const count = counts.get(agentId) ?? noLifecycleCalls()
      count[kind]++
      counts.set(agentId, count)
      return Effect.succeed({ agent, now })
    })

  /** Processes of the agent not deregistered and heard from within 3 heartbeat intervals. */
  const live = (agentId: string, now: number): Array<ProcessEntry> =>
    [...(agents.get(agentId)?.processes.values() ?? [])].filter((p) => now - p.lastSeen <= 3 * limits.heartbeatMillis)

  /** The tools a task of `processId` is offered: every live process's, the task holder's own first. */
  const visible = (agentId: string, processId: string, now: number): Journal.TaskTools => {
    const seen = new Set<string>()
    const tools: Array<{ entry: Toolkit.ManifestEntry; own: boolean }> = []
    // On a name clash, the call goes where it can be answered.
    const processes = live(agentId, now).sort((a, b) =>
      Number(b.processId === processId) - Number(a.processId === processId)
    )
    for (const process of processes) {
      for (const entry of process.manifest) {
        if (seen.has(entry.name)) continue
        seen.add(entry.name)
        tools.push({ entry, own: process.processId === processId })
      }
    }
    return tools
  }

  return {
    live,
    visible,
    register: (
      { agentId, manifest, manifestHash, processId }: Caller & {
        readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>
        readonly manifestHash: string
      }
    ) =>
      Effect.gen(function*() {
        const { agent, now } = yield* lifecycle(agentId, "register")
        const violations = Toolkit.checkEntries(manifest)
        if (violations.length > 0) return yield* new ManifestRejected({ violations })
        agent.processes.set(processId, { processId, manifest, manifestHash, lastSeen: now })
        yield* Effect.logDebug(`agent ${agentId}: process ${processId} registered ${manifest.length} tools`)
        return { heartbeatIntervalMillis: limits.heartbeatMillis }
      }),
    heartbeat: ({ agentId, manifestHash, processId }: Caller & { readonly manifestHash: string }) =>
      Effect.gen(function*() {
        const { agent, now } = yield* lifecycle(agentId, "heartbeat")
        const process = agent.processes.get(processId)
        if (process === undefined || process.manifestHash !== manifestHash) return { known: false }
        process.lastSeen = now
        yield* Effect.logDebug(`agent ${agentId}: heartbeat from process ${processId}`)
        return { known: true }
      }),
    deregister: ({ agentId, processId }: Caller) =>
      Effect.gen(function*() {
        const { agent } = yield* lifecycle(agentId, "deregister")
        agent.processes.delete(processId)
        yield* Effect.logDebug(`agent ${agentId}: process ${processId} deregistered`)
      }),
    /** Forgets the processes silent for `evictSilentAfter` intervals, and agents left with nothing. */
    forgetSilent: (now: number): void => {
      for (const [agentId, agent] of agents) {
        for (const process of agent.processes.values()) {
          if (now - process.lastSeen > limits.evictAfterMillis) agent.processes.delete(process.processId)
        }
        const windowStart = now - limits.lifecycleWindowMillis
        if (agent.processes.size === 0 && agent.lifecycle.every((at) => at <= windowStart)) agents.delete(agentId)
      }
    },
    /**
     * Takes back a registration kept elsewhere (cluster mode: the runner that now owns the agent's
     * shard reads them from the database): the process as it was last heard from, no budget counted.
     * One already held here is kept.
     */
    restore: (agentId: string, process: ProcessEntry): void => {
      const agent = agentOf(agentId)
      if (!agent.processes.has(process.processId)) agent.processes.set(process.processId, { ...process })
    },
    /**
     * Takes the times of the agent's lifecycle calls inside the window from where they are kept
     * (cluster mode: the database, which holds every runner's), in place of this process's, so that
     * the budget holds across a move of the agent's shard.
     */
    restoreLifecycle: (agentId: string, times: ReadonlyArray<number>): void => {
      agentOf(agentId).lifecycle = [...times].sort((a, b) => a - b)
    },
    lifecycleCalls: (agentId: string) => ({ ...(counts.get(agentId) ?? noLifecycleCalls()) }),
    processCount: (agentId: string) => agents.get(agentId)?.processes.size ?? 0
  }
}

type Agents = ReturnType<typeof makeAgents>

// --- Tasks ---

/**
 * The tasks (design: The platform): each one's loop (TaskRunner) runs in a fiber of the platform's
 * own, its calls go out on whichever stream attached to it last and wait for their answers. With a
 * journal, every step is journaled, and the tasks the journal holds are taken back at start. At
 * shutdown the loops are interrupted after the sweep and the redelivery have stopped, and before the
 * journal closes.
 */
const makeTasks = (options: Options, journal: Journal.Journal["Type"] | undefined) =>
  Effect.gen(function*() {
    const tasks = new Map<string, Task>()
    const config = yield* Invocation.InvocationConfig
    const ids = yield* Ids
    const clock = yield* Effect.clock
    // Tasks run in the platform's own context, never the caller's (an in-process caller's services
    // and hooks must not leak into the platform's loop).
    const runTask = yield* FiberSet.runtime(yield* FiberSet.make())<LanguageModel.LanguageModel>()

    const add = (taskId: string, agentId: string, processId: string): Task => {
      const task = new Task(taskId, agentId, processId, clock)
      tasks.set(taskId, task)
      return task
    }

    /** The agent's task; another agent's task is unknown to it. */
    const own = (agentId: string, taskId: string): Task | undefined => {
      const task = tasks.get(taskId)
      return task === undefined || task.agentId !== agentId ? undefined : task
    }

    const deliver = (task: Task) => (call: TaskRunner.Delivery): Effect.Effect<ToolResult> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const answered = task.answered?.get(call.toolCallId)
        if (answered !== undefined) return Effect.succeed(answered)
        const event = { _tag: "ToolCallRequested" as const, taskId: task.taskId, ...call }
        const done = new Signal<ToolResult>()
        task.pending?.set(call.toolCallId, { event, done, sentAt: now })
        task.emit(event)
        return Effect.ensuring(done.await, Effect.sync(() => task.pending?.delete(call.toolCallId)))
      })

    /** A new attachment to the task; the scope's end is how the platform learns the client went away. */
    const attachTo = (
      task: Task,
      wanted: EventsWanted | undefined,
      follower?: Follower
    ) =>
      Effect.gen(function*() {
        const mailbox = yield* Mailbox.make<TaskEvent>()
        task.attach(mailbox, wanted ?? "all", follower)
        // Its calls then wait for a re-attach.
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            if (task.attachment === mailbox) task.attachment = undefined
          })
        )
        return mailbox
      })

    /**
     * The task waits for the calls of `event` to be decided (`decide`); at the first one's expiry it
     * goes on anyway, and the loop's gate denies what expired (the task never waits for ever).
     */
    const suspend = (task: Task, event: Suspension["event"]): void => {
      const suspension: Suspension = { event, undecided: new Set(event.pending.map((p) => p.toolCallId)), expiry: undefined }
      task.suspended = suspension
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
        start(task, run.prompt, run.tools)
      })

    /** Runs a task's loop: a new one, or with a journal, one taken back after a restart (from what it journaled). */
    const start = (
      task: Task,
      prompt: string,
      tools: Journal.TaskTools
    ): void => {
      const { taskId } = task
      const runOptions = {
        taskId,
        agentId: task.agentId,
        prompt,
        instructions: options.instructions,
        maxSteps: options.maxSteps,
        approvalExpiry: options.approvalExpiry,
        tools,
        deliver: deliver(task),
        emit: (event: TaskEvent) => {
          if (event._tag === "TaskSuspended") suspend(task, event)
          task.emit(event)
        }
      }
      if (journal === undefined) {
        task.loop = runTask(TaskRunner.run(runOptions))
        return
      }
      // The task is a journaled run of the loop (design: Durable runs), taken up from what the journal holds.
      const journaled = TaskRunner.run({ ...runOptions, journaled: true }).pipe(
        Effect.provideService(Journal.Journal, journal),
        // The end is journaled after the final event went out: a restart in between replays to the same end.
        Effect.zipRight(Effect.suspend(() =>
          task.final === undefined ? Effect.void : Schema.encode(EventJson)(task.final).pipe(
            Effect.orDie,
            Effect.flatMap((final) => journal.ended(taskId, { final }, task.endedAt ?? clock.unsafeCurrentTimeMillis()))
          )
        ))
      )
      task.loop = runTask(journaled)
    }

    /** The agent's task held here; another agent's is unknown to it. */
    const held = (agentId: string, taskId: string): Effect.Effect<Task, UnknownTask> =>
      Effect.flatMap(hold(taskId), (task) =>
        task === undefined || task.agentId !== agentId ? Effect.fail(new UnknownTask({ taskId })) : Effect.succeed(task))

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
            start(task, run.prompt, run.tools)
          } else if (run.final !== undefined) {
            task.final = yield* Effect.orDie(Schema.decode(EventJson)(run.final))
            task.endedAt = run.endedAt
            task.ended.succeed(undefined)
          }
          return task
        }))
      })

    return {
      /** A new task, attached at once; its loop starts. */
      submit: (
        { agentId, events, processId, prompt }: Caller & {
          readonly prompt: string
          readonly events?: EventsWanted | undefined
        },
        tools: Journal.TaskTools
      ) =>
        Effect.gen(function*() {
          // Unguessable as well as unique: knowing one task's id tells nothing of another's.
          const task = add(ids.make("task"), agentId, processId)
          // Journaled before anyone learns the task's id: a restart cannot lose a task a client knows.
          if (journal !== undefined) {
            yield* journal.started({ runId: task.taskId, kind: "task", agentId, processId, prompt, tools })
          }
          const mailbox = yield* attachTo(task, events)
          start(task, prompt, tools)
          return mailbox
        }),
      /** Another attachment to a task of the agent's. */
      attach: (
        { agentId, events, taskId }: {
          readonly agentId: string
          readonly taskId: string
          readonly events?: EventsWanted | undefined
        }
      ) =>
        Effect.suspend(() => {
          const task = own(agentId, taskId)
          return task === undefined ? Effect.fail(new UnknownTask({ taskId })) : attachTo(task, events)
        }),
      /** Answers: each completes its call; one for a task the agent does not have fails, after the others. */
      complete: (agentId: string, results: ReadonlyArray<ToolCallResult>): Effect.Effect<void, UnknownTask> =>
        Effect.suspend(() => {
          let unknown: string | undefined
          for (const { result, taskId, toolCallId } of results) {
            const task = own(agentId, taskId)
            if (task === undefined) {
              unknown ??= taskId
              continue
            }
            // A late or repeated answer (at least once) is fine: the first one counts. One past the output limits
            // is the invalid-output result the model reads (design: Error text, Hostile clients), never a failed task.
            const pending = task.pending?.get(toolCallId)
            pending?.done.succeed(Invocation.checkResult(pending.event.name, result, config))
          }
          return unknown === undefined ? Effect.void : Effect.fail(new UnknownTask({ taskId: unknown }))
        }),
      /**
       * A person's decision on a call a suspended task of the agent's waits for (design: Durable runs),
       * journaled; once every call of its `TaskSuspended` is decided, the task goes on from the journal.
       * Only a call of the task's last suspension can be decided, and once.
       */
      decide: (
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
          const suspension = task.suspended
          if (suspension === undefined || !suspension.undecided.has(toolCallId)) {
            return yield* new NoPendingTaskApproval({ taskId, toolCallId })
          }
          // Taken at once: the same call decided twice at the same moment is refused the second time.
          suspension.undecided.delete(toolCallId)
          const now = yield* Clock.currentTimeMillis
          const decided = yield* journal.decide(taskId, toolCallId, { approved, reason, now }).pipe(
            Effect.orDie,
            Effect.onExit((exit) => Effect.sync(() => Exit.isFailure(exit) && suspension.undecided.add(toolCallId)))
          )
          // Expired: nothing can decide it any more; the task goes on without it (the loop denies it).
          if (!decided) {
            if (suspension.undecided.size === 0) yield* goOn(task, suspension)
            return yield* new NoPendingTaskApproval({ taskId, toolCallId })
          }
          yield* Effect.logInfo(`task ${taskId}: call ${toolCallId} ${approved ? "approved" : "denied"}`)
          if (suspension.undecided.size === 0) yield* goOn(task, suspension)
        }),
      /** Delivers again each pending call last sent at or before `sentBy`; it counts as sent `now`. */
      redeliver: (sentBy: number, now: number): void => {
        for (const task of tasks.values()) {
          for (const call of task.pending?.values() ?? []) {
            if (call.sentAt <= sentBy) {
              call.sentAt = now
              task.emit(call.event)
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
      /**
       * Takes back what the journal holds: recently ended tasks (for their final event) and every
       * task that had not ended, whose loop runs again from its journaled turns and answers.
       */
      takeBack: (journal: Journal.Journal["Type"], keepEndedMillis: number) =>
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
          for (const entry of open) {
            start(add(entry.runId, entry.agentId, entry.processId), entry.prompt, entry.tools)
          }
          if (open.length > 0) {
            yield* Effect.logInfo(`journal ${journal.path}: resumed ${open.length} unfinished task(s)`)
          }
        }),
      count: (): number => tasks.size,

      // What a cluster runner adds (Cluster.ts): the task entity's handlers on the owner of its shard.

      /** The agent's task, held here (taken up from the journal if need be). */
      heldBy: held,
      /** `attach`, to a task held here (taken up from the journal if need be). */
      attachHeld: (
        { agentId, events, follower, taskId }: {
          readonly agentId: string
          readonly taskId: string
          readonly events?: EventsWanted | undefined
          readonly follower?: Follower | undefined
        }
      ) => Effect.flatMap(held(agentId, taskId), (task) => attachTo(task, events, follower)),
      /**
       * Runs the task here until it ends (its loop taken up from the journal); interrupted (its shard
       * moved, the runner stops), the loop stops and the task is let go: its journal is where the next
       * owner takes it up, and a call it had started reads as started without an answer there.
       */
      runHere: (taskId: string): Effect.Effect<void> =>
        Effect.flatMap(hold(taskId), (task) =>
          task === undefined
            ? Effect.logWarning(`task ${taskId}: the journal does not hold it; nothing to run`)
            : Effect.onInterrupt(task.ended.await, () =>
              Effect.suspend(() => {
                if (tasks.get(taskId) === task) tasks.delete(taskId)
                task.attachment?.unsafeDone(Exit.void)
                task.attachment = undefined
                const fibers = [task.loop, task.suspended?.expiry].filter((f) => f !== undefined)
                return Fiber.interruptAll(fibers)
              }))),
      /**
       * An answer taken through the cluster: checked against the output limits and journaled (the first
       * answer wins) before the call's waiter sees it, so that a loop going on from the journal, here or
       * on the next owner, finds it; kept for the task's life, so that a call delivered again after it
       * was answered is answered at once.
       */
      answer: (agentId: string, { result, taskId, toolCallId }: ToolCallResult): Effect.Effect<void, UnknownTask> =>
        Effect.gen(function*() {
          const task = yield* held(agentId, taskId)
          if (task.final !== undefined || journal === undefined) return
          const pending = task.pending?.get(toolCallId)
          const name = pending?.event.name ?? (yield* Effect.map(Effect.orDie(journal.run(taskId)), (run) =>
            run !== undefined && Journal.isOpen(run) ? run.calls.get(toolCallId)?.name : undefined))
          // A call the task never delivered: nothing waits for it.
          if (name === undefined) return
          const stored = yield* journal.callEnded(taskId, toolCallId, Invocation.checkResult(name, result, config))
          task.answered?.set(toolCallId, stored)
          pending?.done.succeed(stored)
        })
    }
  })

type Tasks = Effect.Effect.Success<ReturnType<typeof makeTasks>>

// --- Redelivery ---

/**
 * Unanswered calls are delivered again, same id and deadline, until the answer or the deadline
 * (design: The platform). One fiber for all tasks: each tick re-sends the calls last sent at or before
 * the tick before, so a call waits between one and two intervals. It stops after the sweep, before
 * the tasks' loops.
 */
const redeliver = (tasks: Tasks, schedule: Schedule.Schedule<unknown, unknown>) =>
  Effect.gen(function*() {
    const previousTick = yield* Ref.make(yield* Clock.currentTimeMillis)
    const tick = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(Ref.getAndSet(previousTick, now), (previous) => tasks.redeliver(previous, now)))
    yield* Effect.forkScoped(Effect.schedule(tick, schedule))
  })

// --- Retention ---

/**
 * What the platform keeps stays bounded (design: Hostile clients): an ended task stays a while for a
 * client re-attaching after a reconnect, then goes, from memory and from the journal; a process silent
 * for `evictSilentAfter` intervals is forgotten (were it to come back, its heartbeat reads unknown and
 * it registers again). A fiber on `Timing.platformSweep`, the first to stop.
 */
const sweep = (
  parts: { readonly agents: Agents; readonly tasks: Tasks; readonly journal: Journal.Journal["Type"] | undefined },
  limits: Limits,
  schedule: Schedule.Schedule<unknown, unknown>
) => {
  const { agents, journal, tasks } = parts
  const once = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const forgetBefore = now - limits.keepEndedTasksMillis
    tasks.forgetEnded(forgetBefore)
    agents.forgetSilent(now)
    return journal === undefined ? Effect.void : journal.purge(forgetBefore)
  })
  return Effect.forkScoped(Effect.schedule(once, schedule))
}

// --- The protocol ---

/**
 * What the protocol's calls do once authorized: the agents and tasks of this process (`localBackend`),
 * or in cluster mode the entities of the agent and the task, wherever their shards live (Cluster.ts).
 */
export interface Backend {
  readonly register: (
    payload: Caller & { readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>; readonly manifestHash: string }
  ) => Effect.Effect<{ readonly heartbeatIntervalMillis: number }, ManifestRejected | LifecycleBudgetExceeded>
  readonly heartbeat: (
    payload: Caller & { readonly manifestHash: string }
  ) => Effect.Effect<{ readonly known: boolean }, LifecycleBudgetExceeded>
  readonly deregister: (payload: Caller) => Effect.Effect<void, LifecycleBudgetExceeded>
  /** A new task, attached at once: its events. */
  readonly submit: (
    payload: Caller & { readonly prompt: string; readonly events?: EventsWanted | undefined }
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<TaskEvent>, never, Scope.Scope>
  readonly attach: (
    payload: { readonly agentId: string; readonly taskId: string; readonly events?: EventsWanted | undefined }
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<TaskEvent, UnknownTask>, UnknownTask, Scope.Scope>
  readonly complete: (agentId: string, results: ReadonlyArray<ToolCallResult>) => Effect.Effect<void, UnknownTask>
  readonly decide: (
    agentId: string,
    payload: { readonly taskId: string; readonly toolCallId: string; readonly approved: boolean; readonly reason?: string | undefined }
  ) => Effect.Effect<void, UnknownTask | NoPendingTaskApproval | ApprovalsNeedJournal>
}

/** The platform of one process: its own agents and tasks. */
const localBackend = (agents: Agents, tasks: Tasks): Backend => ({
  register: agents.register,
  heartbeat: agents.heartbeat,
  deregister: agents.deregister,
  submit: (payload) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) => tasks.submit(payload, agents.visible(payload.agentId, payload.processId, now))
    ),
  attach: tasks.attach,
  complete: tasks.complete,
  decide: tasks.decide
})

/** The protocol's handlers: authorization, then the backend's part each call is for. */
const handlersOf = (backend: Backend) =>
  PlatformRpcs.toLayer({
    Register: (payload) => Effect.zipRight(authorize(payload.agentId), backend.register(payload)),
    Heartbeat: (payload) => Effect.zipRight(authorize(payload.agentId), backend.heartbeat(payload)),
    Deregister: (payload) => Effect.zipRight(authorize(payload.agentId), backend.deregister(payload)),
    SubmitTask: (payload) => Effect.zipRight(authorize(payload.agentId), backend.submit(payload)),
    AttachTask: (payload) => Effect.zipRight(authorize(payload.agentId), backend.attach(payload)),
    CompleteToolCall: ({ agentId, results }) => Effect.zipRight(authorize(agentId), backend.complete(agentId, results)),
    // The agent is the token's: the payload names none.
    DecideApproval: (payload) => Effect.flatMap(AuthenticatedAgent, ({ agentId }) => backend.decide(agentId, payload))
  })

/** A token of `tokens` in the `authorization` header names the agent the calls are made as. */
const authenticationOf = (tokens: ReadonlyMap<string, string>) =>
  Layer.succeed(
    Authentication,
    Authentication.of(({ headers }) => {
      const value = headers[authorizationHeader]
      const token = typeof value === "string" && value.startsWith("Bearer ") ? value.slice(7) : undefined
      const agentId = token === undefined ? undefined : tokens.get(token)
      return agentId === undefined
        ? Effect.fail(new Unauthorized({ message: "missing or unknown platform token" }))
        : Effect.succeed({ agentId })
    })
  )

/** `PlatformState` over the agents and the tasks. */
const stateOf = (agents: Agents, tasks: Tasks) =>
  Layer.succeed(PlatformState, {
    manifestHashes: (agentId) =>
      Effect.map(Clock.currentTimeMillis, (now) => agents.live(agentId, now).map((p) => p.manifestHash)),
    visibleTools: (agentId) =>
      Effect.map(Clock.currentTimeMillis, (now) => agents.visible(agentId, "", now).map((t) => t.entry.name)),
    lifecycleCalls: (agentId) => Effect.sync(() => agents.lifecycleCalls(agentId)),
    processCount: (agentId) => Effect.sync(() => agents.processCount(agentId)),
    taskCount: Effect.sync(() => tasks.count())
  })

/**
 * The platform: protocol handlers, authentication and state. Needs the tasks' `LanguageModel`.
 * With `journal`, fails with `JournalUnavailable` if the file cannot be opened or read.
 */
export const layerHandlers = (options: Options) =>
  Layer.scopedContext(Effect.gen(function*() {
    // Opened before the tasks' fibers exist, so closed after they have stopped.
    const journal = yield* Journal.serviceOrFile(options.journal)
    const parts = yield* makeParts(options, journal)
    if (journal !== undefined) yield* parts.tasks.takeBack(journal, parts.limits.keepEndedTasksMillis)
    return yield* Layer.build(layerOf(localBackend(parts.agents, parts.tasks), parts, options))
  }))

/**
 * The parts of the platform in this process, in their start order (stopped in the reverse one):
 * the agents, the tasks' loops, the redelivery and the retention sweep. A cluster runner (Cluster.ts)
 * has them too, for the agents and tasks whose shards it owns.
 */
export const makeParts = (options: Options, journal: Journal.Journal["Type"] | undefined) =>
  Effect.gen(function*() {
    const limits = limitsOf(options)
    const policy = yield* Timing
    const agents = makeAgents(limits)
    const tasks = yield* makeTasks(options, journal)
    yield* redeliver(tasks, policy.redelivery)
    yield* sweep({ agents, tasks, journal }, limits, policy.platformSweep)
    return { limits, agents, tasks }
  })

/** The platform's parts, as `makeParts` gives them. */
export type Parts = Effect.Effect.Success<ReturnType<typeof makeParts>>

/** The protocol's handlers on `backend`, authentication and state: what `layerWebSocket` serves. */
export const layerOf = (backend: Backend, parts: Parts, options: Options) =>
  Layer.mergeAll(handlersOf(backend), stateOf(parts.agents, parts.tasks)).pipe(
    Layer.provideMerge(authenticationOf(options.tokens))
  )

// ---------------------------------------------------------------------------------------------
// Serving it.

/** Where the WebSocket server listens, and the limits each connection is held to (design: Hostile clients). */
export interface ListenOptions {
  /** Default 127.0.0.1. */
  readonly host?: string | undefined
  /** 0 picks a free port. */
  readonly port: number
  /** The largest frame accepted from a client; a larger one closes its connection (1009). Default 2 MiB. */
  readonly maxFrameBytes?: number | undefined
  /** Open connections (and upgrades being checked) at most; the upgrade over it gets 503. Default 256. */
  readonly maxConnections?: number | undefined
  /**
   * Each connection is pinged this often; one that answered neither the last ping nor sent a frame
   * since is closed (a client gone without a word, a half-open connection). Default 30 s.
   */
  readonly pingInterval?: Duration.DurationInput | undefined
  /**
   * Bytes queued for a client that does not read: past this the platform stops reading its frames
   * until the queue is below half of it (and its unread pong then closes it). Default 1 MiB.
   */
  readonly maxBufferedBytes?: number | undefined
}

/** The defaults of `ListenOptions`' limits. */
export const defaultListenLimits = {
  maxFrameBytes: Framing.defaultMaxFrameBytes,
  maxConnections: 256,
  pingInterval: Duration.seconds(30),
  maxBufferedBytes: 1024 * 1024
} as const

/** The path of the protocol's WebSocket. */
export const path = "/rpc"

/** Where a platform served by `layerWebSocket` listens (the port picked for `port: 0`). */
export class Listening extends Context.Tag("agent-tools/platform/Listening")<Listening, {
  readonly host: string
  readonly port: number
}>() {}

/** The platform could not listen (the port is taken, say). */
export class ListenError extends Schema.TaggedError<ListenError>("agent-tools/platform/ListenError")("ListenError", {
  message: Schema.String
}) {}

/**
 * The platform on a real WebSocket (`ws://host:port/rpc`): `RpcServer` on the protocol's wire
 * (platform/Wire.ts). Needs the handlers: `Layer.provide(layerHandlers(options))`.
 */
export const layerWebSocket = (
  listen: ListenOptions
): Layer.Layer<Listening, ListenError, Rpc.ToHandler<RpcGroup.Rpcs<typeof PlatformRpcs>> | Authentication> =>
  Layer.scoped(
    Listening,
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<never>()
      const authentication = yield* Authentication
      const wire = yield* Wire.makeServer
      // A defect is its call's answer, not the end of every call on the connection.
      yield* RpcServer.make(PlatformRpcs, { disableFatalDefects: true }).pipe(
        Effect.provideService(RpcServer.Protocol, wire.protocol),
        Effect.interruptible,
        Effect.forkScoped
      )
      const host = listen.host ?? "127.0.0.1"
      const maxPayload = listen.maxFrameBytes ?? defaultListenLimits.maxFrameBytes
      const maxConnections = listen.maxConnections ?? defaultListenLimits.maxConnections
      const pingMillis = Duration.toMillis(Duration.decode(listen.pingInterval ?? defaultListenLimits.pingInterval))
      const maxBuffered = listen.maxBufferedBytes ?? defaultListenLimits.maxBufferedBytes
      const warn = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
      const runCallback = Runtime.runCallback(runtime)
      const server = createServer((_, response) => {
        response.writeHead(426, { "content-type": "text/plain" })
        response.end(`the platform speaks WebSocket at ${path}\n`)
      })
      // One message per turn of the event loop: a client flooding small frames cannot starve the others.
      const sockets = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false, allowSynchronousEvents: false })
      /** Live connections: whether each was heard from since the last ping. */
      const live = new Map<WebSocket, { heard: boolean }>()
      let upgrading = 0
      // Refused before the socket is a WebSocket: nothing the client sends after is read.
      const refuse = (socket: Duplex, status: number, text: string) => {
        socket.end(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: text/plain\r\n` +
            `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`
        )
        socket.destroy()
      }
      // The rpc the upgrade's check names to the middleware: any call carries the same token.
      const anyRpc = PlatformRpcs.requests.values().next().value as unknown as Rpc.AnyWithProps
      server.on("upgrade", (request, socket, head) => {
        // A client resetting mid-upgrade must not be an uncaught error.
        socket.on("error", () => socket.destroy())
        if (new URL(request.url ?? "/", "http://platform").pathname !== path) return refuse(socket, 404, "not found\n")
        if (live.size + upgrading >= maxConnections) {
          warn(`a connection was refused: ${maxConnections} are open (maxConnections)`)
          return refuse(socket, 503, `the platform holds ${maxConnections} connections already\n`)
        }
        upgrading++
        // The token is checked here, once more per call by the middleware (which binds the agent).
        runCallback(authentication({ clientId: 0, rpc: anyRpc, payload: undefined, headers: Headers.fromInput(request.headers) }), {
          onExit: (exit) => {
            upgrading--
            if (Exit.isFailure(exit)) return refuse(socket, 401, "missing or unknown platform token\n")
            if (socket.destroyed) return
            sockets.handleUpgrade(request, socket, head, (ws) => accept(ws, request.headers))
          }
        })
      })
      const accept = (ws: WebSocket, headers: Headers.Input) => {
        const state = { heard: true }
        live.set(ws, state)
        let paused: ReturnType<typeof setInterval> | undefined
        // A client that does not read: stop reading it until what it was sent has gone out.
        const send = (frame: string) => {
          ws.send(frame)
          if (paused === undefined && ws.bufferedAmount > maxBuffered) {
            ws.pause()
            paused = setInterval(() => {
              if (ws.bufferedAmount > maxBuffered / 2) return
              clearInterval(paused)
              paused = undefined
              ws.resume()
            }, 10)
          }
        }
        const connection = wire.connect(headers, send)
        ws.on("message", (data) => {
          state.heard = true
          connection.receive(String(data))
        })
        ws.on("pong", () => void (state.heard = true))
        ws.on("error", (error: Error & { code?: string }) =>
          warn(
            error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"
              ? `a client sent a frame over ${maxPayload} bytes; its connection is closed (1009)`
              : `a platform connection failed: ${error.message}; it is closed`
          ))
        ws.on("close", () => {
          live.delete(ws)
          if (paused !== undefined) clearInterval(paused)
          connection.close()
        })
      }
      const pinger = setInterval(() => {
        for (const [ws, state] of live) {
          if (!state.heard) {
            ws.terminate()
            continue
          }
          state.heard = false
          ws.ping()
        }
      }, pingMillis)
      pinger.unref()
      const port = yield* Effect.async<number, ListenError>((resume) => {
        server.once("error", (error) =>
          resume(Effect.fail(new ListenError({ message: `the platform cannot listen on ${host}:${listen.port}: ${error.message}` }))))
        server.listen(listen.port, host, () => {
          const address = server.address()
          resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : listen.port))
        })
      })
      yield* Effect.addFinalizer(() =>
        Effect.async<void>((resume) => {
          clearInterval(pinger)
          for (const client of sockets.clients) client.terminate()
          sockets.close()
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
      )
      return { host, port }
    })
  )

/** The WebSocket URL of a platform served by `layerWebSocket`. */
export const url = Effect.map(Listening, ({ host, port }) => `ws://${host.includes(":") ? `[${host}]` : host}:${port}${path}`)
