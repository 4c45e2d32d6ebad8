/**
 * Serving tools to the platform (design: Serving, Delivery dedupe): register the toolkit for `AGENT_ID`, heartbeat on a
 * Schedule, republish when the tools change, deregister on the way out; submit tasks and run the
 * tool calls the platform delivers on their streams, at least once, deduplicated, inside deadlines.
 */
import {
  Cause,
  Chunk,
  Config,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberMap,
  FiberSet,
  HashMap,
  Layer,
  Mailbox,
  Option,
  Ref,
  Schedule,
  Schema,
  type Scope,
  Stream,
  SubscriptionRef
} from "effect"
import { createHash } from "node:crypto"
import * as Ids from "./Ids.js"
import { Idempotency, layerMemory, layerSql, type StoreUnavailable } from "./Idempotency.js"
import { sameDelivery } from "./internal/call/reuse.js"
import * as Invocation from "./Invocation.js"
import { ToolResult } from "./ToolResult.js"
import type { HeldTasks } from "./internal/serve/heldTasks.js"
import * as Json from "./internal/util/json.js"
import * as Settings from "./internal/util/settings.js"
import { RunState } from "./internal/hooks/tool.js"
import { outputSpec } from "./internal/agent/output.js"
import { formatIssues } from "./internal/util/issues.js"
import type {
  AgentLimitExceeded,
  LifecycleBudgetExceeded,
  ManifestRejected,
  TaskEvent,
  TaskOutput,
  ToolCallResult,
  Unauthorized,
  UnknownTask
} from "./protocol/Protocol.js"
import {
  type Caller,
  type MissingSetting,
  PlatformClient,
  PlatformUnavailable,
  required
} from "./PlatformClient.js"
import * as Timing from "./Timing.js"
import type { ToolContext } from "./ToolContext.js"
import * as Toolkit from "./Toolkit.js"
import { prepareWorkers } from "./internal/worker/prepare.js"
import { parseTraceparent } from "./internal/util/traceContext.js"

/** Why serving failed. */
export type ServeError =
  | MissingSetting
  | StoreUnavailable
  | Unauthorized
  | ManifestRejected
  | LifecycleBudgetExceeded
  | AgentLimitExceeded
  | UnknownTask
  | TaskLost
  | PlatformUnavailable

/**
 * The platform no longer knows a task this process was following (it restarted without a journal,
 * or forgot the task): the task and its pending calls are lost.
 */
export class TaskLost extends Schema.TaggedError<TaskLost>("agent-tools/TaskLost")("TaskLost", {
  taskId: Schema.String
}) {
  override get message(): string {
    return `the platform no longer knows task ${this.taskId} (it restarted without a journal, or forgot the task): ` +
      `the task and its pending calls are lost; submit it again`
  }
}

/** A task ended with `TaskFailed`. */
export class TaskFailedError extends Schema.TaggedError<TaskFailedError>("agent-tools/TaskFailedError")("TaskFailedError", {
  taskId: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `task ${this.taskId} failed: ${this.reason}`
  }
}

/** Another attach of the task (by this agent, another process or connection) took it over: it goes on there. */
export class TaskTakenOverError extends Schema.TaggedError<TaskTakenOverError>("agent-tools/TaskTakenOverError")(
  "TaskTakenOverError",
  { taskId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `task ${this.taskId} was taken over: ${this.reason}`
  }
}

/** Options of a task submitted from a serving process. */
export interface SubmitOptions<A = never> {
  /** Stream the turns' deltas too (`ModelTextDelta`, `ReasoningDelta`, `TurnRetried`) and `ToolCallStarted`. */
  readonly deltas?: boolean | undefined
  /**
   * A typed final output (design: The model side): the platform asks the model for JSON of this
   * Schema's JSON Schema and checks the answer (sent back with its issues, `outputRetries` times at
   * most); `TaskCompleted.value` holds it, and `runTask` gives it decoded by this Schema.
   */
  readonly output?: Schema.Schema<A, any, never> | undefined
  /** Default 2. */
  readonly outputRetries?: number | undefined
}

/** Options of an attach to a task. */
export interface AttachOptions {
  /** The `offset` of the last event the caller has: the stream starts past it. */
  readonly after?: number | undefined
  /** Stream the turns' deltas too. */
  readonly deltas?: boolean | undefined
}

/** A submit's options as the platform reads them: the output as JSON Schema. */
const followOptions = (options: SubmitOptions<any> | undefined): FollowOptions => ({
  deltas: options?.deltas,
  output: options?.output === undefined
    ? undefined
    : { schema: outputSpec(options.output, 0).format.schema, retries: options.outputRetries }
})

/** A typed task's value from its last event, decoded by `schema`. */
const typedOutcome = <A>(schema: Schema.Schema<A, any, never>) => (last: TaskEvent | undefined) =>
  Effect.flatMap(outcome(last), () => {
    const completed = last as Extract<TaskEvent, { _tag: "TaskCompleted" }>
    if (!("value" in completed)) {
      return Effect.fail(
        new TaskFailedError({
          taskId: completed.taskId,
          reason: "the task completed without a typed output: the platform took it back from its journal after " +
            "a restart (a typed output is not journaled), or it does not check typed outputs (cluster mode)"
        })
      )
    }
    return Effect.mapError(
      Schema.decodeUnknown(schema, { errors: "all", onExcessProperty: "error" })(completed.value),
      (error) =>
        new TaskFailedError({
          taskId: completed.taskId,
          reason: `the task's output did not decode: ${formatIssues(error.issue)}`
        })
    )
  })

/** A serving process. */
export class Serve extends Context.Tag("agent-tools/Serve")<Serve, {
  readonly agentId: string
  /** This process's id: the platform keeps each process's tools apart. */
  readonly processId: string
  /** The hash of the manifest registered now. */
  readonly manifestHash: Effect.Effect<string>
  /** Publishes another toolkit (a tool added or removed): registers it again at once. */
  readonly republish: (toolkit: Toolkit.Toolkit<any>) => Effect.Effect<void, ServeError>
  /**
   * Submits a task; its events stream back, and the tool calls on it run in this process. After a
   * dropped connection the stream goes on from the last event it gave, none twice.
   */
  readonly submitTask: (prompt: string, options?: SubmitOptions<any>) => Stream.Stream<TaskEvent, ServeError>
  /** Submits a task and returns its output: the text, or with `output` the decoded typed output. */
  readonly runTask: {
    (prompt: string): Effect.Effect<string, ServeError | TaskFailedError | TaskTakenOverError>
    <A>(
      prompt: string,
      options: SubmitOptions<A> & { readonly output: Schema.Schema<A, any, never> }
    ): Effect.Effect<A, ServeError | TaskFailedError | TaskTakenOverError>
  }
  /**
   * Attaches to a task submitted earlier (by this process before a restart, say): its pending calls
   * are delivered again and run here. With `after` (an event's `offset`), the stream starts past it.
   */
  readonly attachTask: (taskId: string, options?: AttachOptions) => Stream.Stream<TaskEvent, ServeError>
  /** Attaches to a task and returns its output. */
  readonly runAttached: (taskId: string) => Effect.Effect<string, ServeError | TaskFailedError | TaskTakenOverError>
  /** Fails when serving has failed for good (3 heartbeats in a row); never succeeds. */
  readonly failed: Effect.Effect<never, ServeError>
}>() {}

/**
 * The delivery-dedupe store: the `Idempotency` service when one is provided; else SQLite when
 * `IDEMPOTENCY_DB=path.sqlite` is set (failing, naming the path, if it cannot be opened); else memory,
 * `byDefault` (nobody chose it).
 */
const storeFromConfig = Effect.flatMap(Effect.serviceOption(Idempotency), (provided) => {
  if (Option.isSome(provided)) return Effect.succeed({ store: provided.value, byDefault: false })
  return Effect.flatMap(Settings.optionalString("IDEMPOTENCY_DB"), (path) =>
    Effect.map(
      Layer.build(Option.isSome(path) ? layerSql({ filename: path.value }) : layerMemory),
      (context) => ({ store: Context.get(context, Idempotency), byDefault: Option.isNone(path) })
    ))
})

/**
 * `effect` within `limit`, from a finalizer: in a fiber of its own, since the closing fiber may be
 * interrupted already (an interruptible region there would end at once), and interruptible in it, so
 * that the limit can stop it.
 */
const boundedInFinalizer = <A, E>(
  effect: Effect.Effect<A, E>,
  limit: Duration.DurationInput
): Effect.Effect<Exit.Exit<A, E | Cause.TimeoutException>> =>
  Effect.flatMap(Effect.forkDaemon(Effect.interruptible(Effect.timeout(effect, limit))), Fiber.await)

/**
 * Why the deregistration did not happen, for its warning. It runs in a fiber of its own, bounded by a
 * timeout: interrupted, it was the client, closed in this process before Serve (its scope ended first),
 * which ends its calls so; a platform that is gone fails them with `PlatformUnavailable` instead.
 */
const deregistrationFailed = (agentId: string, cause: Cause.Cause<unknown>): string => {
  if (Cause.isInterruptedOnly(cause)) {
    return `agent ${agentId}: not deregistered: this process had closed its PlatformClient (its scope ended ` +
      `before Serve's), so the deregistration was never sent; the platform lists this process's tools until ` +
      `it misses 3 heartbeats. Provide the client outside Serve's scope: ` +
      `Serve.layer(toolkit).pipe(Layer.provide(PlatformClient.layer)), or ` +
      `Effect.scoped(program).pipe(Effect.provide(PlatformClient.layer)), not Effect.scoped outermost`
  }
  const error = Cause.squash(cause)
  if (error instanceof PlatformUnavailable) {
    return `agent ${agentId}: deregistration failed: the platform is gone (${error.message})`
  }
  return `agent ${agentId}: deregistration failed: ${String(error)}`
}

/** The manifest's hash: SHA-256 of its canonical JSON. */
export const manifestHash = (toolkit: Toolkit.Toolkit<any>): string =>
  createHash("sha256").update(Json.canonical(toolkit.manifest)).digest("hex")

/** The default of `MakeOptions.shutdownGrace`. */
export const defaultShutdownGrace: Duration.Duration = Timing.shutdownGrace

/** Options of `make`, `layer` and `serve`. */
export interface MakeOptions {
  /**
   * At shutdown (interruption, `stop`, the scope closing), how long the calls still running may go
   * on before they are interrupted; a call's own deadline ends it earlier. Default 30 s.
   */
  readonly shutdownGrace?: Duration.DurationInput | undefined
  /** With a durable store, attach the unfinished tasks this agent held when the process starts. Default true. */
  readonly resumeTasks?: boolean | undefined
}

/** A delivered call, as it comes on a task's stream. */
type Delivered = Extract<TaskEvent, { _tag: "ToolCallRequested" }>

// --- Running a delivered call ---

/**
 * The one call into dedupe (design: Delivery dedupe) and the pipeline: a delivered call runs once
 * however often it is delivered, and gives its result. A call for a tool this process does not serve
 * is answered as every face answers an unknown tool (`Toolkit.unknownTool`: the tools it serves).
 * `run` is the hook state of the task's follower (design: Hooks).
 */
const runDelivered = (
  store: Idempotency["Type"],
  toolkit: Toolkit.Toolkit<any>,
  event: Delivered,
  run: RunState
): Effect.Effect<ToolResult> => {
  const tool = toolkit.byName.get(event.name)
  if (tool === undefined) return Effect.succeed(ToolResult.failure(Toolkit.unknownTool(toolkit, event.name)))
  return Invocation.run(tool, event.arguments, {
    taskId: event.taskId,
    toolCallId: event.toolCallId,
    deadlineAt: event.deadlineAt,
    // Approved through the platform (a suspended task's DecideApproval): Hooks.approval does not ask again.
    approved: event.approved,
    run,
    dedupe: store,
    // The platform's span of the call, when it carried one: this process's span continues its trace.
    parentSpan: parseTraceparent(event.traceparent)
  }) as Effect.Effect<ToolResult>
}

// --- Retrying while the platform is away ---

/** A failed attempt, and how far it got: the next attempt goes on from there. */
interface Failed<S> {
  readonly error: ServeError
  readonly reached: S
}

const isAway = (failed: Failed<unknown>): boolean => failed.error._tag === "PlatformUnavailable"

/**
 * `attempt` from `state`; while the platform is away, again on `Timing.reconnect` from the state the
 * failed attempt reached. The schedule is set up only then, the failed attempt counting as its first
 * (the same delays as retrying from the start). Nothing to stop at shutdown: it lives in its caller.
 */
const retryWhileAway = <S, A>(
  reconnect: Schedule.Schedule<unknown, unknown>,
  attempt: (state: S) => Effect.Effect<A, Failed<S>>,
  state: S
): Effect.Effect<A, Failed<S>> =>
  Effect.catchIf(attempt(state), isAway, (first) =>
    Effect.flatMap(Schedule.driver(reconnect), (driver) => {
      const again = (failed: Failed<S>): Effect.Effect<A, Failed<S>> =>
        isAway(failed)
          ? Effect.matchEffect(driver.next(failed.error), {
            onFailure: () => Effect.fail(failed),
            onSuccess: () => Effect.catchAll(attempt(failed.reached), again)
          })
          : Effect.fail(failed)
      return again(first)
    }))

/** `effect` retried on `Timing.reconnect` while the platform is away (`retryWhileAway` with no state). */
const awayRetried = <A, E extends ServeError>(
  reconnect: Schedule.Schedule<unknown, unknown>,
  effect: Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.mapError(
    retryWhileAway(
      reconnect,
      () => Effect.mapError(effect, (error): Failed<void> => ({ error, reached: undefined })),
      undefined
    ),
    (failed) => failed.error as E
  )

// ---------------------------------------------------------------------------------------------
// The parts of a serving process, in the order `make` builds them. A scope runs its finalizers
// last-added first, so they stop in the reverse order (design: Interruption and shutdown): the drain
// first, then the re-attached followers, the answers' sender, the heartbeat, the deregistration and,
// last, the shutdown report.

// --- The store's warning ---

/**
 * Said once, when nobody chose the memory store and some tools are idempotent: a restart is when it
 * matters, and then it is too late.
 */
const warnIfMemoryOnly = (agentId: string, toolkit: Toolkit.Toolkit<any>, byDefault: boolean): Effect.Effect<void> => {
  const idempotentTools = toolkit.tools.filter((tool) => tool.idempotent).map((tool) => tool.name)
  if (!byDefault || idempotentTools.length === 0) return Effect.void
  return Effect.logWarning(
    `agent ${agentId}: the idempotent tools ${idempotentTools.join(", ")} are deduplicated in memory only: ` +
      `a restarted process forgets their claims and may run a call again; set IDEMPOTENCY_DB=path.sqlite ` +
      `(or provide Idempotency.layerSql) to keep them`
  )
}

// --- Registration ---

/** The toolkit published now and its manifest's hash. */
interface Published {
  readonly toolkit: Toolkit.Toolkit<any>
  readonly hash: string
}

/**
 * Registration (design: Serving): the toolkit published now, registered once before anything else
 * is set up (a refusal, as a bad token, a rejected manifest or the lifecycle budget, fails `make`
 * with nothing to undo); `register` tells the platform again (the heartbeat's republish), `republish`
 * swaps the toolkit first. Each answer's heartbeat interval is kept (`interval`): the latest answer
 * wins, so a platform that restarted with another interval is followed; each accepted registration is
 * logged at info (the tools, the process, the heartbeat it keeps). It holds no fiber: its end is
 * the deregistration's, which is armed before the first call goes out: interrupted while that call is
 * in flight, the platform may have recorded it, so the process deregisters (`sent` stays true);
 * refused or unsent, it does not.
 */
const makeRegistration = (
  client: PlatformClient["Type"],
  caller: Caller,
  toolkit: Toolkit.Toolkit<any>,
  sent: Ref.Ref<boolean>,
  local: Schedule.Schedule<unknown, unknown>
) =>
  Effect.gen(function*() {
    const current = yield* Ref.make<Published>({ toolkit, hash: manifestHash(toolkit) })
    const interval = yield* SubscriptionRef.make<number | undefined>(undefined)
    const register = Effect.flatMap(Ref.get(current), ({ hash, toolkit }) =>
      client.register({ ...caller, manifest: toolkit.manifest, manifestHash: hash }).pipe(
        Effect.flatMap(({ heartbeatIntervalMillis }) =>
          Effect.zipRight(
            SubscriptionRef.set(interval, heartbeatIntervalMillis),
            // Said once the platform has accepted the tools, never before.
            Effect.logInfo(
              `agent ${caller.agentId}: registered ${toolkit.tools.length} tool(s) ` +
                `(${toolkit.tools.map((tool) => tool.name).join(", ")}) as ${caller.processId}; ` +
                `heartbeat ${Timing.heartbeatText(local, heartbeatIntervalMillis)}`
            )
          )
        )
      )).pipe(
        Effect.withSpan("Serve.register", { attributes: { agentId: caller.agentId }, captureStackTrace: false })
      )
    yield* Effect.zipRight(Ref.set(sent, true), register).pipe(Effect.tapError(() => Ref.set(sent, false)))
    return {
      current: Ref.get(current),
      /** The heartbeat interval the platform said at the last registration, in milliseconds (none: it did not say). */
      interval,
      register,
      republish: (next: Toolkit.Toolkit<any>) =>
        Effect.zipRight(Ref.set(current, { toolkit: next, hash: manifestHash(next) }), register)
    }
  })

type Registration = Effect.Effect.Success<ReturnType<typeof makeRegistration>>

// --- Shutdown report ---

/** What shutdown did. */
interface Stopped {
  readonly drained: number
  readonly interrupted: number
  readonly notStarted: number
}

/**
 * The shutdown report (design: Interruption and shutdown): what shutdown did, counted by the drain
 * and the deliveries, said when everything else has stopped, so that deliveries arriving during the
 * deregistration are counted too. Its finalizer is the first `make` adds: it runs last.
 */
const shutdownReport = (agentId: string) =>
  Effect.gen(function*() {
    const report = yield* Ref.make<Stopped>({ drained: 0, interrupted: 0, notStarted: 0 })
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Ref.get(report), ({ drained, interrupted, notStarted }) => {
        const line = `agent ${agentId}: stopping: ${drained} call(s) drained, ${interrupted} interrupted, ` +
          `${notStarted} delivery(ies) not started (delivered again after a re-attach)`
        return drained + interrupted + notStarted > 0 ? Effect.logInfo(line) : Effect.logDebug(line)
      })
    )
    return report
  })

// --- Deregistration ---

/**
 * The deregistration (design: Interruption and shutdown): the last call to the platform, after the
 * drain, the last answers and the heartbeat, made when the registration was `sent` (not refused).
 * Best effort, bounded: a platform already gone (a closed connection), or a client closed before
 * Serve's scope (an in-process platform's too), neither fails nor interrupts the scope that is
 * closing; the warning says which it was (`deregistrationFailed`).
 */
const deregisterOnClose = (client: PlatformClient["Type"], caller: Caller) =>
  Effect.flatMap(Ref.make(false), (sent) =>
    Effect.as(
      Effect.addFinalizer(() =>
        Effect.flatMap(Ref.get(sent), (sent) =>
          sent
            ? boundedInFinalizer(client.deregister(caller), "5 seconds").pipe(
              Effect.flatMap((exit) =>
                Exit.isSuccess(exit)
                  ? Effect.logDebug(`agent ${caller.agentId}: deregistered`)
                  : Effect.logWarning(deregistrationFailed(caller.agentId, exit.cause))
              )
            )
            : Effect.void)
      ),
      sent
    ))

// --- Heartbeat ---

/**
 * The heartbeat (design: Serving): a fiber beating on the interval the platform said at the last
 * registration (`Timing.heartbeatFor`; `Timing.heartbeat` when it said none). A registration that
 * says another interval (a re-registration after the platform restarted, a republish) ends the wait
 * on the old one and the beats go on at the new one. The platform not knowing the manifest
 * republishes it; 3 failures in a row fail serving (the returned `failed`), a success resets the
 * count. It keeps beating through the drain, and stops before the deregistration, so that no beat
 * registers the process again after it.
 */
const heartbeat = (
  client: PlatformClient["Type"],
  caller: Caller,
  registration: Registration,
  local: Schedule.Schedule<unknown, unknown>
) =>
  Effect.gen(function*() {
    const failed = yield* Deferred.make<never, ServeError>()
    const failures = yield* Ref.make(0)
    const beat = registration.current.pipe(
      Effect.flatMap(({ hash }) => client.heartbeat({ ...caller, manifestHash: hash })),
      Effect.flatMap(({ known }) => known ? Effect.void : registration.register),
      Effect.tap(() => Effect.logDebug(`agent ${caller.agentId}: heartbeat`)),
      Effect.matchEffect({
        onSuccess: () => Ref.set(failures, 0),
        onFailure: (error) =>
          Effect.flatMap(Ref.updateAndGet(failures, (n) => n + 1), (inARow) =>
            inARow >= 3
              ? Deferred.fail(failed, error)
              : Effect.logWarning(`agent ${caller.agentId}: heartbeat failed (${inARow} in a row): ${error.message}`))
      })
    )
    /** Completes when the platform says an interval other than `said`. */
    const changedFrom = (said: number | undefined) =>
      registration.interval.changes.pipe(Stream.filter((now) => now !== said), Stream.runHead)
    const beats = Effect.gen(function*() {
      let said = yield* SubscriptionRef.get(registration.interval)
      let driver = yield* Schedule.driver(Timing.heartbeatFor(local, said))
      while (true) {
        // The wait alone races a change: a beat (and the registration it may make) is never cut short.
        const due = yield* Effect.option(
          Effect.raceFirst(Effect.as(driver.next(undefined), true), Effect.as(changedFrom(said), false))
        )
        // The schedule ended (a local one with an end): no more beats, as with `Effect.schedule`.
        if (Option.isNone(due)) return
        if (due.value) yield* beat
        const now = yield* SubscriptionRef.get(registration.interval)
        if (now !== said) {
          said = now
          driver = yield* Schedule.driver(Timing.heartbeatFor(local, said))
        }
      }
    })
    yield* Effect.forkScoped(beats)
    return failed
  })

// --- Answers ---

/** The most answers sent in one call. */
const answersPerCall = 512

/**
 * The answers' sender (design: Serving): answers ready at the same moment go to the platform in one
 * call. The calls only queue theirs; one fiber, living as long as serving, takes every answer waiting
 * each time round and sends them, retried while the platform is away. At shutdown the drain ends the
 * queue and waits (a while) for the last answers to go out, before the deregistration; the fiber is
 * interrupted after the re-attached followers stop.
 */
const makeAnswers = (send: (results: ReadonlyArray<ToolCallResult>) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const waiting = yield* Mailbox.make<ToolCallResult>()
    const sender = yield* Effect.forkScoped(Effect.gen(function*() {
      while (true) {
        const [results, done] = yield* waiting.takeAll
        for (const batch of Chunk.chunksOf(results, answersPerCall)) {
          // Whatever one send ends with (a defect of the platform's, the call cut short under it), the
          // sender lives on: its calls are delivered again and answered again (at least once).
          yield* Effect.catchAllCause(send(Chunk.toReadonlyArray(batch)), (cause) =>
            Effect.logWarning(`could not answer ${batch.length} call(s); they will be delivered again`, cause))
        }
        if (done) return
      }
    }))
    return {
      answer: (result: ToolCallResult): Effect.Effect<void> => Effect.asVoid(waiting.offer(result)),
      /** No answer after this; the ones waiting go out, within `limit`. */
      flush: (limit: Duration.DurationInput) =>
        Effect.zipRight(waiting.end, boundedInFinalizer(Fiber.await(sender), limit))
    }
  })

type Answers = Effect.Effect.Success<ReturnType<typeof makeAnswers>>

// --- Deliveries ---

/** A delivered call's key in the calls running now. */
const callKey = (event: Delivered): string => sameDelivery(event)

const counted = (calls: HashMap.HashMap<string, number>, key: string, by: 1 | -1) => {
  const n = Option.getOrElse(HashMap.get(calls, key), () => 0) + by
  return n > 0 ? HashMap.set(calls, key, n) : HashMap.remove(calls, key)
}

/**
 * The delivered calls running now, whichever task they are of (design: Serving, Delivery dedupe):
 * each delivery runs `handle` in a fiber of its own, started on the follower's stack (a call that
 * completes at once is answered at once) in the context `make` was given (the tools' services, hooks,
 * the clock). They outlive the follower that started them, which may be interrupted first at
 * shutdown. `drain` runs first when serving stops: a new delivery is then left to the platform, which
 * delivers it again after a re-attach (a redelivery of a call still running is not one: that call
 * answers), the calls still running get the grace period, and what is left is interrupted.
 */
const makeDeliveries = (handle: (event: Delivered, run: RunState) => Effect.Effect<void>, report: Ref.Ref<Stopped>) =>
  Effect.gen(function*() {
    const running = yield* FiberSet.make<void>()
    // The runtime holds make's context: the calls run in it, not in the follower's.
    const run = yield* FiberSet.runtime(running)<never>()
    const state = yield* Ref.make({ draining: false, calls: HashMap.empty<string, number>() })
    const count = (key: string, by: 1 | -1) => Ref.update(state, (s) => ({ ...s, calls: counted(s.calls, key, by) }))
    // The running calls of each task: a task that ended failed (stopped: its exec_agent call's deadline passed)
    // has its calls interrupted, not left to run to their own timeouts.
    const byTask = new Map<string, Set<Fiber.RuntimeFiber<void>>>()
    return {
      /** Interrupts the calls of `taskId` still running here. */
      stop: (taskId: string): Effect.Effect<void> =>
        Effect.suspend(() => {
          const fibers = byTask.get(taskId)
          byTask.delete(taskId)
          return fibers === undefined ? Effect.void : Fiber.interruptAll(fibers)
        }),
      deliver: (event: Delivered, runState: RunState): Effect.Effect<void> => {
        const key = callKey(event)
        return Effect.flatMap(Ref.get(state), ({ calls, draining }) => {
          if (draining) {
            return HashMap.has(calls, key)
              ? Effect.void
              : Ref.update(report, (r) => ({ ...r, notStarted: r.notStarted + 1 }))
          }
          const call = Effect.ensuring(handle(event, runState), count(key, -1))
          return Effect.zipRight(
            count(key, 1),
            Effect.sync(() => {
              const fiber = run(call, { immediate: true })
              let fibers = byTask.get(event.taskId)
              if (fibers === undefined) byTask.set(event.taskId, fibers = new Set())
              fibers.add(fiber)
              fiber.addObserver(() => {
                fibers.delete(fiber)
                if (fibers.size === 0 && byTask.get(event.taskId) === fibers) byTask.delete(event.taskId)
              })
            })
          )
        })
      },
      /** No new delivery from now on; the calls running get `grace`, then are interrupted. */
      drain: (grace: Duration.Duration) =>
        Effect.gen(function*() {
          yield* Ref.update(state, (s) => ({ ...s, draining: true }))
          const before = yield* FiberSet.size(running)
          if (before > 0) yield* boundedInFinalizer(FiberSet.awaitEmpty(running), grace)
          const left = yield* FiberSet.size(running)
          if (left > 0) yield* FiberSet.clear(running)
          return { drained: before - left, interrupted: left }
        })
    }
  })

type Deliveries = Effect.Effect.Success<ReturnType<typeof makeDeliveries>>

// --- Followers ---

/**
 * Where following a task stands between two attempts: its id once known, whether it started (and is
 * held), and the offset of the last event seen: the next attempt attaches after it, so no event comes twice.
 */
interface Followed {
  readonly taskId: string | undefined
  readonly started: boolean
  readonly offset?: number | undefined
  /** A submit's key, made once and sent with each of its tries: a repeat gets the task the first made. */
  readonly submitKey?: string | undefined
  /** A submit with the key was sent already: the next is a retry. */
  readonly resubmit?: boolean | undefined
}

/** The key of a submit, and whether this one is a retry. */
const submitted = (from: Followed) =>
  from.submitKey === undefined ? {} : from.resubmit === true ? { submitKey: from.submitKey, resubmit: true } : { submitKey: from.submitKey }

/** Where following a task starts: a known one from `after`; a submit with its key, made once for all its tries. */
const firstTry = (known: string | undefined, after: number | undefined): Effect.Effect<Followed> =>
  known !== undefined
    ? Effect.succeed({ taskId: known, started: false, offset: after })
    : Effect.map(Ids.make("submit"), (submitKey) => ({ taskId: undefined, started: false, offset: after, submitKey }))

/** How a task is followed: the events wanted beside the calls, a typed output to ask for (a submit). */
interface FollowOptions {
  readonly deltas?: boolean | undefined
  readonly output?: TaskOutput | undefined
}

/** What a follower needs. */
interface FollowerDeps {
  readonly client: PlatformClient["Type"]
  readonly caller: Caller
  /** The record of the tasks this process holds (in the store's database). */
  readonly held: HeldTasks
  readonly reconnect: Schedule.Schedule<unknown, unknown>
  readonly deliver: (event: Delivered, run: RunState) => Effect.Effect<void>
  /** Interrupts the calls of a task that ended failed (stopped) still running here. */
  readonly stopCalls: (taskId: string) => Effect.Effect<void>
}

/**
 * The followers (design: Serving): a follower follows one task to its last event, submitted or
 * attached by id, handing its delivered calls to the deliveries; `onEvent` sees every event. The
 * held-task record (`HeldTasks`) holds the task from its start to its end, so that a restarted
 * process takes it back. After a
 * dropped connection the same task is attached again, from the state the attempt before reached, and
 * its pending calls come again. One follower per task here: an explicit attach takes a task over from
 * its re-attach at start (`resume`). At shutdown the re-attached followers stop after the drain; a
 * caller's follower stops with its caller. Each follower has the task's hook state (`RunState`, design:
 * Hooks), given to every call it delivers and dropped with the follower and those calls.
 */
const makeFollowers = (deps: FollowerDeps) =>
  Effect.gen(function*() {
    const { caller, client, held } = deps
    const resumed = yield* FiberMap.make<string>()

    /** One attempt: the task's stream from `from` to the task's end, a take-over, or the stream's end (undefined). */
    const attempt = (
      prompt: string,
      onEvent: ((event: TaskEvent) => void) | undefined,
      from: Followed,
      run: RunState,
      options: FollowOptions
    ): Effect.Effect<TaskEvent | undefined, Failed<Followed>> =>
      Effect.scoped(Effect.gen(function*() {
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
            } else if (event._tag === "ToolCallRequested") yield* deps.deliver(event, run)
            // The highest seen: a call delivered again without a replay comes with its older offset.
            if (event.offset !== undefined && event.offset > (at.offset ?? -1)) at = { ...at, offset: event.offset }
            onEvent?.(event)
            if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") {
              if (event._tag === "TaskFailed") yield* deps.stopCalls(event.taskId)
              yield* held.releaseTask(caller.agentId, event.taskId)
              return event
            }
            // Another attach has the task now (its holder keeps it held): this follower stops.
            if (event._tag === "TaskTakenOver") return event
          }
          if (done) return undefined
        }
      }))

    /** Follows a task, submitted (`known` undefined) or known by id; gives its last event. */
    const follow = (
      prompt: string,
      known: string | undefined,
      onEvent: ((event: TaskEvent) => void) | undefined,
      options: FollowOptions & { readonly after?: number | undefined } = {}
    ): Effect.Effect<TaskEvent | undefined, ServeError> =>
      Effect.flatMap(firstTry(known, options.after), (start) => {
        // The task's hook state, across the attempts of this follower: a reconnect keeps it.
        const run = new RunState("task")
        return retryWhileAway(deps.reconnect, (from: Followed) => attempt(prompt, onEvent, from, run, options), start)
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

type Followers = Effect.Effect.Success<ReturnType<typeof makeFollowers>>

/** How a task's last event says it ended, for the log. */
const endedAs = (last: TaskEvent): string =>
  last._tag === "TaskCompleted" ? "completed" : last._tag === "TaskFailed" ? "failed" : "taken over elsewhere"

/** A follower as a Stream of the task's events. */
const eventStream = (
  follow: (onEvent: (event: TaskEvent) => void) => Effect.Effect<unknown, ServeError>
): Stream.Stream<TaskEvent, ServeError> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const out = yield* Mailbox.make<TaskEvent, ServeError>()
    yield* Effect.forkScoped(
      Effect.onExit(follow((event) => void out.unsafeOffer(event)), (exit) => out.done(Exit.asVoid(exit)))
    )
    return Mailbox.toStream(out)
  }))

/** A task's output from its last event. */
const outcome = (last: TaskEvent | undefined): Effect.Effect<string, TaskFailedError | TaskTakenOverError> => {
  if (last?._tag === "TaskCompleted") return Effect.succeed(last.output)
  if (last?._tag === "TaskFailed") return Effect.fail(new TaskFailedError({ taskId: last.taskId, reason: last.reason }))
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
const resumeHeld = (agentId: string, held: HeldTasks, followers: Followers) =>
  Effect.gen(function*() {
    const tasks = yield* held.heldTasks(agentId)
    if (tasks.length > 0) {
      yield* Effect.logInfo(`agent ${agentId}: attaching ${tasks.length} unfinished task(s) again: ${tasks.join(", ")}`)
    }
    for (const taskId of tasks) yield* followers.resume(taskId)
  })

// --- Assignments ---

/**
 * The tasks the platform gives this process to run (design: Agents that call agents): a stream
 * opened once registered and kept open (again after a dropped connection, on `Timing.reconnect`);
 * each task on it is followed as a task held before a restart is, its calls run here. A platform
 * that does not know the call (an older one) gives no assignments: said at debug level, and that is all.
 * A fiber of the scope, interrupted before the drain.
 */
const watchAssignments = (
  client: PlatformClient["Type"],
  caller: Caller,
  followers: Followers,
  reconnect: Schedule.Schedule<unknown, unknown>
) => {
  const watch = client.watchAssignments
  if (watch === undefined) return Effect.void
  const run = (taskId: string) =>
    Effect.zipRight(
      Effect.logInfo(`agent ${caller.agentId}: running task ${taskId}, given by the platform`),
      followers.resume(taskId)
    )
  const once = Effect.scoped(Effect.flatMap(watch(caller), (mailbox) => {
    const take: Effect.Effect<void, Unauthorized | PlatformUnavailable> = Effect.flatMap(
      mailbox.takeAll,
      ([chunk, done]) =>
        Effect.zipRight(
          Effect.forEach(chunk, ({ taskId }) => run(taskId), { discard: true }),
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

// --- Drain ---

/**
 * The drain (design: Interruption and shutdown), first when the scope closes: no new delivery is
 * started, the calls still running get `grace` (a call's own deadline ends it earlier), what is left is
 * interrupted, and the answers waiting go out before the deregistration.
 */
const drainOnClose = (deliveries: Deliveries, answers: Answers, report: Ref.Ref<Stopped>, grace: Duration.Duration) =>
  Effect.addFinalizer(() =>
    Effect.gen(function*() {
      const { drained, interrupted } = yield* deliveries.drain(grace)
      yield* answers.flush("5 seconds")
      yield* Ref.update(report, (r) => ({ ...r, drained, interrupted }))
    })
  )

// ---------------------------------------------------------------------------------------------
// Serving.

/**
 * Registers `toolkit` and keeps it registered for as long as the scope lives: a heartbeat fiber
 * on the interval the platform says (`Timing`'s `heartbeat` when it says none); with a durable
 * store, the unfinished tasks held before a restart attached again. When the scope closes (design:
 * Interruption and shutdown): no new delivery is started, the calls still running get
 * `shutdownGrace`, what is left is interrupted, their answers go out, then a best-effort
 * deregistration. Reads `AGENT_ID`; the `PlatformClient` beneath reads
 * `PLATFORM_TOKEN` (and `PLATFORM_URL`).
 */
export const make = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options?: MakeOptions
): Effect.Effect<Serve["Type"], ServeError, PlatformClient | Scope.Scope | Exclude<R, ToolContext>> =>
  Effect.gen(function*() {
    const agentId = yield* required("AGENT_ID", Config.string("AGENT_ID"))
    const client = yield* PlatformClient
    const policy = yield* Timing.Timing
    const { byDefault, store } = yield* storeFromConfig
    const grace = Duration.decode(options?.shutdownGrace ?? defaultShutdownGrace)
    const caller: Caller = { agentId, processId: yield* Ids.make("process") }

    yield* warnIfMemoryOnly(agentId, toolkit, byDefault)
    // Tools on worker threads: their workers are up before the platform can deliver a call.
    yield* prepareWorkers(toolkit.tools)
    const report = yield* shutdownReport(agentId)
    const sent = yield* deregisterOnClose(client, caller)
    const registration = yield* makeRegistration(client, caller, toolkit, sent, policy.heartbeat)
    const failed = yield* heartbeat(client, caller, registration, policy.heartbeat)
    const answers = yield* makeAnswers((results) =>
      awayRetried(policy.reconnect, client.completeToolCall({ ...caller, results })).pipe(
        Effect.catchAll((error) => Effect.logWarning(`could not answer ${results.length} call(s): ${error.message}`))
      )
    )
    const deliveries = yield* makeDeliveries(
      (event, run) =>
        Effect.flatMap(registration.current, ({ toolkit }) =>
          Effect.flatMap(runDelivered(store, toolkit, event, run), (result) =>
            answers.answer({ taskId: event.taskId, toolCallId: event.toolCallId, result }))),
      report
    )
    // The store's database also keeps the tasks this process holds.
    const held: HeldTasks = store
    const followers = yield* makeFollowers({
      client,
      caller,
      held,
      reconnect: policy.reconnect,
      deliver: deliveries.deliver,
      stopCalls: deliveries.stop
    })
    if (options?.resumeTasks !== false && held.durable) yield* resumeHeld(agentId, held, followers)
    yield* drainOnClose(deliveries, answers, report, grace)
    // Added after the drain, so stopped before it: no new task is taken up while the calls drain.
    yield* watchAssignments(client, caller, followers, policy.reconnect)

    return Serve.of({
      agentId,
      processId: caller.processId,
      manifestHash: Effect.map(registration.current, ({ hash }) => hash),
      republish: registration.republish,
      submitTask: (prompt, options) => eventStream((onEvent) => followers.submit(prompt, onEvent, followOptions(options))),
      runTask: ((prompt: string, options?: SubmitOptions<any>) =>
        Effect.flatMap(
          followers.submit(prompt, undefined, followOptions(options)),
          options?.output === undefined ? outcome : typedOutcome(options.output)
        )) as Serve["Type"]["runTask"],
      attachTask: (taskId, options) => eventStream((onEvent) => followers.attach(taskId, onEvent, options)),
      runAttached: (taskId) => Effect.flatMap(followers.attach(taskId, undefined), outcome),
      failed: Deferred.await(failed)
    })
  })

/** `make` as a scoped layer: registered while the layer lives. */
export const layer = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options?: MakeOptions
): Layer.Layer<Serve, ServeError, PlatformClient | Exclude<R, ToolContext>> => Layer.scoped(Serve, make(toolkit, options))

/** Options of `serve`. */
export interface ServeOptions extends MakeOptions {
  /** Completes when serving should stop: deregistration follows, then `serve` returns. */
  readonly stop?: Effect.Effect<void> | undefined
}

/**
 * Serves `toolkit` until interrupted or `stop` completes (deregistering either way); never
 * returns on its own. Fails at once if registration fails, and after 3 heartbeat failures in a row.
 */
export const serve = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options?: ServeOptions
): Effect.Effect<void, ServeError, PlatformClient | Exclude<R, ToolContext>> =>
  Effect.scoped(Effect.flatMap(make(toolkit, options), (served) =>
    options?.stop === undefined ? served.failed : Effect.raceFirst(served.failed, options.stop)))
