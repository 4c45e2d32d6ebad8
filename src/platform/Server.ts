/**
 * The platform (S15): agents and their registered tools, tokens bound to agent ids, a lifecycle
 * budget per agent, and tasks run by the agent loop whose tool calls go out on the task's stream,
 * at least once. Everything in memory. `layerHandlers` is the protocol's implementation, whatever
 * the transport; `layerWebSocket` serves it on a real WebSocket.
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import {
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  FiberSet,
  Layer,
  Mailbox,
  Stream
} from "effect"
import { createServer } from "node:http"
import * as Invocation from "../Invocation.js"
import type * as LanguageModel from "../LanguageModel.js"
import { RetryPolicy } from "../RetryPolicy.js"
import * as RetryPolicyModule from "../RetryPolicy.js"
import * as Toolkit from "../Toolkit.js"
import {
  AuthenticatedAgent,
  Authentication,
  authorizationHeader,
  LifecycleBudgetExceeded,
  ManifestRejected,
  PlatformRpcs,
  type TaskEvent,
  Unauthorized,
  UnknownTask
} from "./Protocol.js"
import * as TaskRunner from "./TaskRunner.js"

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
}

/** Parses `PLATFORM_TOKENS` (`token:agent,token:agent`) into `Options.tokens`. */
export const parseTokens = (text: string): ReadonlyMap<string, string> =>
  new Map(
    text.split(",").map((pair) => pair.trim()).filter((pair) => pair !== "").map((pair) => {
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
  readonly done: Deferred.Deferred<Invocation.ToolResult>
  /** When it was last delivered. */
  sentAt: number
}

class Task {
  attachment: Mailbox.Mailbox<TaskEvent> | undefined
  final: TaskEvent | undefined
  /** When the task ended, for forgetting it a while later. */
  endedAt: number | undefined
  /** Calls delivered and not answered yet; let go when the task ends, after which a re-attach needs only `final`. */
  pending: Map<string, PendingCall> | undefined = new Map()
  constructor(readonly taskId: string, readonly agentId: string, readonly processId: string) {}

  emit(event: TaskEvent): void {
    if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") {
      this.final = event
      this.endedAt = Date.now()
      this.pending = undefined
      this.attachment?.unsafeOffer(event)
      this.attachment?.unsafeDone(Exit.void)
      this.attachment = undefined
      return
    }
    this.attachment?.unsafeOffer(event)
  }

  /** A new stream for this task: `TaskStarted`, then the end if it ended, else every pending call again. */
  attach(mailbox: Mailbox.Mailbox<TaskEvent>): void {
    this.attachment?.unsafeDone(Exit.void)
    this.attachment = mailbox
    mailbox.unsafeOffer({ _tag: "TaskStarted", taskId: this.taskId })
    if (this.final !== undefined) {
      mailbox.unsafeOffer(this.final)
      mailbox.unsafeDone(Exit.void)
      this.attachment = undefined
      return
    }
    for (const call of this.pending?.values() ?? []) mailbox.unsafeOffer(call.event)
  }
}

/** How long an ended task can still be attached (for its final event). */
const keepEndedTasksMillis = 10 * 60 * 1000

/** What the platform holds, for inspection (tests, an admin view). */
export class PlatformState extends Context.Tag("agent-tools/platform/PlatformState")<PlatformState, {
  /** The manifest hash each live process of `agentId` registered. */
  readonly manifestHashes: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
  /** The tool names models of `agentId` are offered now. */
  readonly visibleTools: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
  /** Lifecycle calls seen per agent, all time. */
  readonly lifecycleCalls: (agentId: string) => Effect.Effect<{ register: number; heartbeat: number; deregister: number }>
}>() {}

// ---------------------------------------------------------------------------------------------
// The protocol's handlers.

/** The platform: protocol handlers, authentication and state. Needs the tasks' `LanguageModel`. */
export const layerHandlers = (options: Options) =>
  Layer.scopedContext(Effect.gen(function*() {
    const heartbeatMillis = Duration.toMillis(Duration.decode(options.heartbeatInterval ?? RetryPolicyModule.heartbeatInterval))
    const budget = options.lifecycleBudget ?? 30
    const windowMillis = Duration.toMillis(Duration.decode(options.lifecycleWindow ?? "1 minute"))
    const agents = new Map<string, AgentEntry>()
    const tasks = new Map<string, Task>()
    const counts = new Map<string, { register: number; heartbeat: number; deregister: number }>()
    const runners = yield* FiberSet.make()
    const policy = yield* RetryPolicy
    // Tasks run in the platform's own context, never the caller's (an in-process caller's services
    // and hooks must not leak into the platform's loop).
    const runTask = yield* FiberSet.runtime(runners)<LanguageModel.LanguageModel>()
    let taskCount = 0

    const agentOf = (agentId: string): AgentEntry => {
      let agent = agents.get(agentId)
      if (agent === undefined) {
        agent = { processes: new Map(), lifecycle: [] }
        agents.set(agentId, agent)
      }
      return agent
    }

    /** The caller's token must be bound to the agent it names. */
    const authorize = (agentId: string) =>
      Effect.flatMap(AuthenticatedAgent, (authenticated) =>
        authenticated.agentId === agentId
          ? Effect.void
          : Effect.fail(new Unauthorized({ message: `the token is not valid for agent ${agentId}` })))

    /** Counts a lifecycle call against the agent's budget; the call over it is refused. */
    const lifecycle = (agentId: string, kind: "register" | "heartbeat" | "deregister") =>
      Effect.flatMap(authorize(agentId), () =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const agent = agentOf(agentId)
          agent.lifecycle = agent.lifecycle.filter((at) => at > now - windowMillis)
          if (agent.lifecycle.length >= budget) {
            return Effect.fail(new LifecycleBudgetExceeded({ agentId, limit: budget, windowMillis }))
          }
          agent.lifecycle.push(now)
          const count = counts.get(agentId) ?? { register: 0, heartbeat: 0, deregister: 0 }
          count[kind]++
          counts.set(agentId, count)
          return Effect.succeed(agent)
        }))

    /** Processes of the agent not deregistered and heard from within 3 heartbeat intervals. */
    const liveProcesses = (agentId: string, now: number): Array<ProcessEntry> =>
      [...(agents.get(agentId)?.processes.values() ?? [])].filter((p) => now - p.lastSeen <= 3 * heartbeatMillis)

    const visible = (agentId: string, processId: string, now: number) => {
      const seen = new Set<string>()
      const tools: Array<{ entry: Toolkit.ManifestEntry; own: boolean }> = []
      // The task holder's own tools first: on a name clash, the call goes where it can be answered.
      const live = liveProcesses(agentId, now).sort((a, b) => Number(b.processId === processId) - Number(a.processId === processId))
      for (const process of live) {
        for (const entry of process.manifest) {
          if (seen.has(entry.name)) continue
          seen.add(entry.name)
          tools.push({ entry, own: process.processId === processId })
        }
      }
      return tools
    }

    // Unanswered calls are delivered again, same id and deadline, until the answer or the deadline
    // (S15). One fiber for all tasks: each tick re-sends the calls last sent at or before the tick
    // before, so a call waits between one and two intervals.
    let previousTick = yield* Clock.currentTimeMillis
    const redeliver = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        const forgetBefore = Date.now() - keepEndedTasksMillis
        for (const task of tasks.values()) {
          // An ended task stays a while for a client re-attaching after a reconnect; then it goes.
          if (task.endedAt !== undefined && task.endedAt < forgetBefore) tasks.delete(task.taskId)
          for (const call of task.pending?.values() ?? []) {
            if (call.sentAt <= previousTick) {
              call.sentAt = now
              task.emit(call.event)
            }
          }
        }
        previousTick = now
      }))
    yield* Effect.forkScoped(Effect.schedule(redeliver, policy.redelivery))

    const deliver = (task: Task) => (call: TaskRunner.Delivery): Effect.Effect<Invocation.ToolResult> =>
      Effect.gen(function*() {
        const event = { _tag: "ToolCallRequested" as const, taskId: task.taskId, ...call }
        const done = yield* Deferred.make<Invocation.ToolResult>()
        task.pending?.set(call.toolCallId, { event, done, sentAt: yield* Clock.currentTimeMillis })
        task.emit(event)
        return yield* Deferred.await(done).pipe(Effect.ensuring(Effect.sync(() => task.pending?.delete(call.toolCallId))))
      })

    const streamOf = (task: Task, mailbox: Mailbox.Mailbox<TaskEvent>) =>
      Mailbox.toStream(mailbox).pipe(
        // The stream's end is how the platform learns the client went away: its calls wait for a re-attach.
        Stream.ensuring(Effect.sync(() => {
          if (task.attachment === mailbox) task.attachment = undefined
        }))
      )

    const handlers = PlatformRpcs.toLayer({
      Register: ({ agentId, manifest, manifestHash, processId }) =>
        Effect.gen(function*() {
          const agent = yield* lifecycle(agentId, "register")
          const violations = Toolkit.checkEntries(manifest)
          if (violations.length > 0) return yield* new ManifestRejected({ violations })
          const now = yield* Clock.currentTimeMillis
          agent.processes.set(processId, { processId, manifest, manifestHash, lastSeen: now })
          yield* Effect.logDebug(`agent ${agentId}: process ${processId} registered ${manifest.length} tools`)
          return { heartbeatIntervalMillis: heartbeatMillis }
        }),
      Heartbeat: ({ agentId, manifestHash, processId }) =>
        Effect.gen(function*() {
          const agent = yield* lifecycle(agentId, "heartbeat")
          const process = agent.processes.get(processId)
          const now = yield* Clock.currentTimeMillis
          if (process === undefined || process.manifestHash !== manifestHash) return { known: false }
          process.lastSeen = now
          yield* Effect.logDebug(`agent ${agentId}: heartbeat from process ${processId}`)
          return { known: true }
        }),
      Deregister: ({ agentId, processId }) =>
        Effect.gen(function*() {
          const agent = yield* lifecycle(agentId, "deregister")
          agent.processes.delete(processId)
          yield* Effect.logDebug(`agent ${agentId}: process ${processId} deregistered`)
        }),
      SubmitTask: ({ agentId, processId, prompt }) =>
        Effect.gen(function*() {
          yield* authorize(agentId)
          const taskId = `task-${++taskCount}-${Math.random().toString(36).slice(2, 10)}`
          const task = new Task(taskId, agentId, processId)
          tasks.set(taskId, task)
          const mailbox = yield* Mailbox.make<TaskEvent>()
          task.attach(mailbox)
          const now = yield* Clock.currentTimeMillis
          runTask(TaskRunner.run({
            taskId,
            agentId,
            prompt,
            instructions: options.instructions,
            maxSteps: options.maxSteps,
            tools: visible(agentId, processId, now),
            deliver: deliver(task),
            emit: (event) => task.emit(event)
          }))
          return streamOf(task, mailbox)
        }).pipe(Stream.unwrap),
      AttachTask: ({ agentId, taskId }) =>
        Effect.gen(function*() {
          yield* authorize(agentId)
          const task = tasks.get(taskId)
          if (task === undefined || task.agentId !== agentId) return yield* new UnknownTask({ taskId })
          const mailbox = yield* Mailbox.make<TaskEvent>()
          task.attach(mailbox)
          return streamOf(task, mailbox)
        }).pipe(Stream.unwrap),
      CompleteToolCall: ({ agentId, results }) =>
        Effect.gen(function*() {
          yield* authorize(agentId)
          let unknown: string | undefined
          for (const { result, taskId, toolCallId } of results) {
            const task = tasks.get(taskId)
            if (task === undefined || task.agentId !== agentId) {
              unknown ??= taskId
              continue
            }
            // A late or repeated answer (at least once) is fine: the first one counts.
            const pending = task.pending?.get(toolCallId)
            if (pending !== undefined) Deferred.unsafeDone(pending.done, Exit.succeed(result))
          }
          if (unknown !== undefined) return yield* new UnknownTask({ taskId: unknown })
        })
    })

    const authentication = Layer.succeed(
      Authentication,
      Authentication.of(({ headers }) => {
        const value = headers[authorizationHeader]
        const token = typeof value === "string" && value.startsWith("Bearer ") ? value.slice(7) : undefined
        const agentId = token === undefined ? undefined : options.tokens.get(token)
        return agentId === undefined
          ? Effect.fail(new Unauthorized({ message: "missing or unknown platform token" }))
          : Effect.succeed({ agentId })
      })
    )

    const state = Layer.succeed(PlatformState, {
      manifestHashes: (agentId) =>
        Effect.map(Clock.currentTimeMillis, (now) => liveProcesses(agentId, now).map((p) => p.manifestHash)),
      visibleTools: (agentId) =>
        Effect.map(Clock.currentTimeMillis, (now) => visible(agentId, "", now).map((t) => t.entry.name)),
      lifecycleCalls: (agentId) => Effect.sync(() => ({ ...(counts.get(agentId) ?? { register: 0, heartbeat: 0, deregister: 0 }) }))
    })

    return yield* Layer.build(Layer.mergeAll(handlers, authentication, state))
  }))

// ---------------------------------------------------------------------------------------------
// Serving it.

/** Where the WebSocket server listens. */
export interface ListenOptions {
  /** Default 127.0.0.1. */
  readonly host?: string | undefined
  /** 0 picks a free port. */
  readonly port: number
}

/** The path of the protocol's WebSocket. */
export const path = "/rpc"

/**
 * The platform on a real WebSocket (`ws://host:port/rpc`), JSON-serialized, tracing off. Also
 * gives the `HttpServer`, whose `address` tells the port picked for `port: 0`.
 */
export const layerWebSocket = (listen: ListenOptions) =>
  HttpLayerRouter.serve(
    RpcServer.layerHttpRouter({
      group: PlatformRpcs,
      path,
      protocol: "websocket",
      disableTracing: true,
      // Task streams live long: a bounded concurrency would let them hold every permit.
      concurrency: "unbounded"
    }),
    { disableLogger: true, disableListenLog: true }
  ).pipe(
    Layer.provide(RpcSerialization.layerJson),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: listen.port, host: listen.host ?? "127.0.0.1" }))
  )

/** The WebSocket URL of a platform served by `layerWebSocket`. */
export const url = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  return address._tag === "TcpAddress" ? `ws://${address.hostname}:${address.port}${path}` : `ws+unix://${address.path}`
})
