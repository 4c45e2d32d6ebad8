/**
 * The calls of a task that its holder does not serve (design: The platform): the platform as a job queue. Each
 * such call goes to a live serving process of the task's agent that serves the tool and takes calls
 * (`WatchAssignments` with `calls`: a worker), the one with the fewest calls of this platform's in flight (in turn
 * among equals), as an `Assignment` with the call on its stream; its answer is taken only from the connection it
 * was given on. A worker whose connection closes keeps its calls for the grace (`Options.workerGrace`): if it
 * comes back (a new stream that takes calls) they are given to it again there; past the grace, or at once once it
 * is no longer live (deregistered, or silent past its heartbeats), they go to another worker. While a call has no
 * worker, the task's stream says `TaskWaiting` with the reason, and the first worker that can take it does.
 * At least once: the worker's dedupe, by (task id, call id), keeps it to one run (design: Delivery dedupe).
 */
import { Clock, Effect, FiberSet, type Scope } from "effect"
import * as Metrics from "../internal/util/metrics.js"
import { Signal } from "../internal/util/signal.js"
import type { ToolResult } from "../ToolResult.js"
import type { Assignments, CallWorker } from "./AgentCalls.js"
import type { Book, Task } from "./TaskBook.js"
import type * as TaskRunner from "./TaskRunner.js"
import type { PendingCall, Route } from "./TaskTypes.js"
import { inProcessConnection } from "./Wire.js"

/** What routing the calls needs of the platform's other parts. */
export interface RouteDeps {
  /** The agent's live processes (registered, heard from within their heartbeats), with their manifests. */
  readonly live: (
    agentId: string,
    now: number
  ) => ReadonlyArray<{ readonly processId: string; readonly manifest: ReadonlyArray<{ readonly name: string }> }>
  /** The streams that take calls: this process's (embedded), or a mirror of those of the owner of the agent's shard. */
  readonly assignments: Pick<Assignments, "callWorkers" | "give" | "onCallsWatch">
  /** How long a worker whose connection closed keeps its calls, in milliseconds (`Options.workerGrace`). */
  readonly graceMillis: number
  /**
   * Cluster mode (ClusterRoutes.ts): resolves once what `live` and `assignments` say of the agent is known here, the
   * first time a call of it is routed (within a bound); embedded, they always are.
   */
  readonly ready?: ((agentId: string) => Effect.Effect<void>) | undefined
}

/** A pending call given to a worker, or waiting for one. */
type Routed = PendingCall & { readonly route: Route }

/** The task's calls given to workers, or waiting for one. */
const routedOf = (task: Task): Array<Routed> => {
  const routed: Array<Routed> = []
  for (const call of task.pending?.values() ?? []) if (call.route !== undefined) routed.push(call as Routed)
  return routed
}

const callsText = (ids: ReadonlyArray<string>): string => `${ids.length === 1 ? "call" : "calls"} ${ids.join(", ")}`

const secondsText = (millis: number): string => `${Number((millis / 1000).toFixed(3))} s`

/** Adds `id` to the list of `key`. */
const push = (groups: Map<string, Array<string>>, key: string, id: string): void => {
  const ids = groups.get(key)
  if (ids === undefined) groups.set(key, [id])
  else ids.push(id)
}

/**
 * What the task's calls that have no worker wait for, as its `TaskWaiting` says it (undefined when none waits): who
 * went away with which calls, and which wait for a worker of which tool.
 */
export const waitingReason = (task: Task, graceMillis: number): string | undefined => {
  const gone = new Map<string, Array<string>>()
  const waiting = new Map<string, Array<string>>()
  for (const { event, route } of routedOf(task)) {
    if (route.worker !== undefined && route.gone !== undefined) push(gone, `${route.worker.processId}\n${route.gone.why}`, event.toolCallId)
    else if (route.worker === undefined) {
      push(waiting, `${event.name}\n${route.left?.processId ?? ""}\n${route.left?.why ?? ""}`, event.toolCallId)
    }
  }
  const agent = task.agentId
  const parts: Array<string> = []
  for (const [key, ids] of gone) {
    const [processId, why] = key.split("\n")
    const one = ids.length === 1
    parts.push(
      `process ${processId} of agent ${agent}, which was given ${callsText(ids)} of this task, went away (${why}); ` +
        `${one ? "it waits" : "they wait"} up to ${secondsText(graceMillis)} for it to come back, then ` +
        `${one ? "goes" : "go"} to another process of agent ${agent} that serves ${one ? "its tool" : "their tools"}`
    )
  }
  for (const [key, ids] of waiting) {
    const [tool, processId, why] = key.split("\n")
    const left = processId === "" ? "" : `process ${processId} of agent ${agent}, which was given ${callsText(ids)}, went away (${why}); `
    parts.push(
      `${left}no process of agent ${agent} that serves tool ${tool} is connected and takes calls: ` +
        `${callsText(ids)} ${ids.length === 1 ? "waits" : "wait"} for one`
    )
  }
  return parts.length === 0 ? undefined : parts.join("; ")
}

/**
 * The routes of the calls of the tasks in a book (see the module's comment). Its methods run on the platform's
 * event loop, between two of its fibers' steps; `run` forks the upkeep and the logs in the platform's fiber set.
 */
export class Routes {
  /** The connections open now (the wire's; the one in process is always open). */
  private readonly open = new Set<string>()
  /** The calls given to each worker (by agent and process) and not answered yet. */
  private readonly load = new Map<string, number>()
  /** Which of the least loaded workers is next. */
  private turn = 0
  /** The tasks whose `TaskWaiting` is to be said once the calls started with it are placed. */
  private readonly saying = new Set<Task>()
  /** Routed calls not answered yet: the upkeep ticks while there is one. */
  private inFlight = 0
  private ticking = false
  /** The upkeep's tick: a fourth of the grace, within 25 ms and 1 s. */
  private readonly tick: number
  /** What the wire tells of its connections (`WireConnections`). */
  readonly connections: { readonly opened: (connection: string) => void; readonly closed: (connection: string) => void }

  constructor(
    private readonly book: Book,
    private readonly deps: RouteDeps,
    private readonly run: (effect: Effect.Effect<void>) => unknown,
    private readonly exporting: boolean
  ) {
    this.tick = Math.min(1000, Math.max(25, Math.floor(deps.graceMillis / 4)))
    this.connections = { opened: (connection) => void this.open.add(connection), closed: (connection) => this.closed(connection) }
    deps.assignments.onCallsWatch((agentId, worker) => this.watching(agentId, worker))
  }

  private isOpen(connection: string): boolean {
    return connection === inProcessConnection || this.open.has(connection)
  }

  private loadOf(agentId: string, processId: string): number {
    return this.load.get(`${agentId}\n${processId}`) ?? 0
  }

  private loaded(task: Task, route: Route, by: 1 | -1): void {
    if (route.worker === undefined) return
    const key = `${task.agentId}\n${route.worker.processId}`
    const n = (this.load.get(key) ?? 0) + by
    if (n > 0) this.load.set(key, n)
    else this.load.delete(key)
  }

  /** The worker of `agentId` to give a call of `tool`: live, serving it, taking calls on an open connection, the least loaded. */
  private pick(agentId: string, tool: string, now: number): CallWorker | undefined {
    const serving = new Set<string>()
    for (const p of this.deps.live(agentId, now)) if (p.manifest.some((entry) => entry.name === tool)) serving.add(p.processId)
    const candidates = this.deps.assignments.callWorkers(agentId).filter((w) =>
      serving.has(w.processId) && this.isOpen(w.connection)
    )
    if (candidates.length === 0) return undefined
    const least = Math.min(...candidates.map((w) => this.loadOf(agentId, w.processId)))
    const idle = candidates.filter((w) => this.loadOf(agentId, w.processId) === least)
    return idle[this.turn++ % idle.length]
  }

  /** Gives `call` to `processId` on its latest stream that takes calls; false when it has none open. */
  private giveTo(task: Task, call: Routed, processId: string, now: number): boolean {
    const connection = this.deps.assignments.give(task.agentId, processId, { taskId: task.taskId, call: call.event })
    if (connection === undefined || !this.isOpen(connection)) return false
    this.loaded(task, call.route, -1)
    call.route.worker = { processId, connection }
    call.route.gone = undefined
    this.loaded(task, call.route, 1)
    call.sentAt = now
    return true
  }

  /** Gives `call` to a worker, if one can take it now. */
  private tryPlace(task: Task, call: Routed, now: number): boolean {
    for (let tries = 0; tries < 3; tries++) {
      const worker = this.pick(task.agentId, call.event.name, now)
      if (worker === undefined) return false
      if (this.giveTo(task, call, worker.processId, now)) return true
    }
    return false
  }

  /** Says on the task's stream what its calls wait for (once for the calls of one turn), and logs it. */
  private sayWaiting(task: Task): void {
    if (this.saying.has(task)) return
    this.saying.add(task)
    setImmediate(() => {
      this.saying.delete(task)
      const reason = task.final === undefined ? waitingReason(task, this.deps.graceMillis) : undefined
      if (reason === undefined) return
      task.emit({ _tag: "TaskWaiting", taskId: task.taskId, reason })
      this.run(Effect.logWarning(`task ${task.taskId}: ${reason}`))
    })
  }

  /** Gives `call` to a worker; with none, it waits, and the task's stream says why. */
  private place(task: Task, call: Routed, now: number): void {
    if (this.tryPlace(task, call, now)) return
    this.loaded(task, call.route, -1)
    call.route.worker = undefined
    call.route.gone = undefined
    this.sayWaiting(task)
  }

  /** The worker of `call` went away (`why`): the call goes to another, or waits for one. */
  private reroute(task: Task, call: Routed, why: string, now: number): void {
    const from = call.route.worker!.processId
    call.route.left = { processId: from, why }
    this.loaded(task, call.route, -1)
    call.route.worker = undefined
    this.place(task, call, now)
    const to = call.route.worker as Route["worker"]
    if (to === undefined) return
    this.run(Effect.logInfo(
      `task ${task.taskId}: call ${call.event.toolCallId}, given to process ${from} of agent ${task.agentId}, which ` +
        `went away (${why}), is given to process ${to.processId}`
    ))
  }

  /** A worker watches for calls (again): the calls it went away with are given to it there, and those waiting placed. */
  private watching(agentId: string, worker: CallWorker): void {
    const now = this.book.clock.unsafeCurrentTimeMillis()
    for (const task of this.book.tasks.values()) {
      if (task.agentId !== agentId || task.final !== undefined) continue
      for (const call of routedOf(task)) {
        const given = call.route.worker
        if (given === undefined) this.tryPlace(task, call, now)
        else if (given.processId === worker.processId && given.connection !== worker.connection) {
          this.giveTo(task, call, worker.processId, now)
        }
      }
    }
  }

  /** A connection closed: the calls given on it are gone with their worker, unless it watches on another already. */
  private closed(connection: string): void {
    this.open.delete(connection)
    const now = this.book.clock.unsafeCurrentTimeMillis()
    for (const task of this.book.tasks.values()) {
      let gone = false
      for (const call of routedOf(task)) {
        const given = call.route.worker
        if (given?.connection !== connection || call.route.gone !== undefined) continue
        const elsewhere = this.deps.assignments.callWorkers(task.agentId).some((w) =>
          w.processId === given.processId && this.isOpen(w.connection)
        )
        if (elsewhere && this.giveTo(task, call, given.processId, now)) continue
        call.route.gone = { at: now, why: "its connection closed" }
        gone = true
      }
      if (gone) this.sayWaiting(task)
    }
  }

  /**
   * The upkeep, every tick: a call whose worker went away past the grace, or is no longer live, goes to another
   * worker; a call waiting for one is given to one that can take it now.
   */
  private check(now: number): void {
    const liveOf = new Map<string, Set<string>>()
    const isLive = (agentId: string, processId: string) => {
      let ids = liveOf.get(agentId)
      if (ids === undefined) liveOf.set(agentId, ids = new Set(this.deps.live(agentId, now).map((p) => p.processId)))
      return ids.has(processId)
    }
    const grace = this.deps.graceMillis
    for (const task of this.book.tasks.values()) {
      if (task.final !== undefined) continue
      for (const call of routedOf(task)) {
        const { gone, worker } = call.route
        if (worker === undefined) this.tryPlace(task, call, now)
        else if (gone !== undefined && now - gone.at >= grace) {
          this.reroute(task, call, `${gone.why}, and it did not come back within ${secondsText(grace)}`, now)
        } else if (!isLive(task.agentId, worker.processId)) {
          this.reroute(task, call, "it deregistered, or was silent past its heartbeats", now)
        }
      }
    }
  }

  /** One more routed call (or one fewer): the upkeep ticks while there is one (none: no fiber, no timer). */
  private routing(by: 1 | -1): void {
    this.inFlight += by
    if (this.inFlight <= 0 || this.ticking) return
    this.ticking = true
    const once = Effect.zipRight(
      Effect.sleep(this.tick),
      Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => this.check(now)))
    )
    this.run(
      Effect.whileLoop({ while: () => this.inFlight > 0, body: () => once, step: () => undefined }).pipe(
        Effect.ensuring(Effect.sync(() => void (this.ticking = false)))
      )
    )
  }

  /** Gives a call of `task` to a worker and waits for its answer. */
  deliver(task: Task, delivery: TaskRunner.Delivery): Effect.Effect<ToolResult> {
    const { ready } = this.deps
    return ready === undefined ? this.given(task, delivery) : Effect.zipRight(ready(task.agentId), this.given(task, delivery))
  }

  /** `deliver`, once what routing reads of the task's agent is known here. */
  private given(task: Task, delivery: TaskRunner.Delivery): Effect.Effect<ToolResult> {
    return Effect.suspend(() => {
      const now = this.book.clock.unsafeCurrentTimeMillis()
      // A child task's calls end by its `exec_agent` call's deadline, whatever their own timeouts.
      const capped = task.deadlineAt !== undefined && task.deadlineAt < delivery.deadlineAt
        ? { ...delivery, deadlineAt: task.deadlineAt }
        : delivery
      const call: Routed = {
        event: { _tag: "ToolCallRequested", taskId: task.taskId, ...capped },
        done: new Signal<ToolResult>(),
        sentAt: now,
        offset: 0,
        route: { worker: undefined, gone: undefined, left: undefined }
      }
      const id = delivery.toolCallId
      task.pending?.set(id, call)
      if (this.exporting) Metrics.deliveries.unsafeUpdate(1, Metrics.deliveryLabels.first)
      if (task.final === undefined) this.place(task, call, now)
      this.routing(1)
      return Effect.ensuring(
        call.done.await,
        Effect.sync(() => {
          this.routing(-1)
          if (task.pending?.get(id) === call) task.pending.delete(id)
          this.loaded(task, call.route, -1)
          call.route.worker = undefined
        })
      )
    })
  }

  /**
   * Tells the worker `call` was given to that it is cancelled (its task is: TaskCancel.ts), on its stream that takes
   * calls, so that it interrupts the call; a call waiting for a worker has none to tell.
   */
  cancel(task: Task, call: PendingCall): void {
    const worker = call.route?.worker
    if (worker === undefined) return
    this.deps.assignments.give(task.agentId, worker.processId, { taskId: task.taskId, cancelled: call.event.toolCallId })
  }

  /** Gives again each call given at or before `sentBy` to its worker, still there; it counts as given `now`. */
  redeliver(sentBy: number, now: number): void {
    for (const task of this.book.tasks.values()) {
      for (const call of routedOf(task)) {
        const { gone, worker } = call.route
        if (worker === undefined || gone !== undefined || call.sentAt > sentBy) continue
        if (this.exporting) Metrics.deliveries.unsafeUpdate(1, Metrics.deliveryLabels.again)
        this.giveTo(task, call, worker.processId, now)
      }
    }
  }
}

/** The routes of the calls of the tasks in `book`; the upkeep's fiber and the logs in a fiber set of the platform's. */
export const makeRoutes = (book: Book, deps: RouteDeps): Effect.Effect<Routes, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Made after the tasks' fiber set: stopped before the tasks' loops.
    const run = yield* FiberSet.runtime(yield* FiberSet.make())<never>()
    return new Routes(book, deps, run, yield* Metrics.Exporting)
  })
