/**
 * Serving tools to the platform (design: Serving, Delivery dedupe): register the toolkit for `AGENT_ID`, heartbeat on a
 * Schedule, republish when the tools change, deregister on the way out; submit tasks and run the
 * tool calls the platform delivers on their streams, at least once, deduplicated, inside deadlines.
 */
import { Config, Context, Deferred, Duration, Effect, Layer, Option, Schema, type Scope, Stream } from "effect"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Ids from "./Ids.js"
import { Idempotency, layerMemory, layerSqlClient, type SqlOptions, StoreUnavailable } from "./Idempotency.js"
import * as SqlStore from "./internal/sql/store.js"
import * as HeldTasksStore from "./internal/serve/heldTasks.js"
import { HeldTasks } from "./internal/serve/heldTasks.js"
import * as Settings from "./internal/util/settings.js"
import { outputSpec } from "./internal/agent/output.js"
import { formatIssues } from "./internal/util/issues.js"
import type { TaskEvent } from "./protocol/Protocol.js"
import { type Caller, type MissingSetting, PlatformClient, required } from "./PlatformClient.js"
import * as Timing from "./Timing.js"
import type { CallServices } from "./ToolContext.js"
import * as Toolkit from "./Toolkit.js"
import * as Door from "./internal/call/door.js"
import { awayRetried } from "./internal/serve/away.js"
import { drainOnClose, makeAnswers, makeDeliveries, routedDoors, runDelivered } from "./internal/serve/deliveries.js"
import { type ServeError, TaskFailedError, TaskLost, TaskTakenOverError } from "./internal/serve/errors.js"
import { eventStream, type FollowOptions, makeFollowers, outcome, resumeHeld, watchAssignments } from "./internal/serve/followers.js"
import {
  deregisterOnClose,
  heartbeat,
  makeRegistration,
  manifestHash,
  shutdownReport,
  warnIfMemoryOnly
} from "./internal/serve/registration.js"

export { HeldTasks, manifestHash, type ServeError, TaskFailedError, TaskLost, TaskTakenOverError }


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

/** The delivery-dedupe store provided, else memory (`byDefault`: nobody chose it); the held tasks provided, else none. */
const storesInContext = Effect.map(
  Effect.all([Effect.serviceOption(Idempotency), Effect.serviceOption(HeldTasks)]),
  ([store, held]) => ({
    store: Option.isSome(store) ? store.value : undefined,
    byDefault: Option.isNone(store),
    held: Option.getOrElse(held, () => HeldTasksStore.none)
  })
)

/** The held tasks in memory: none outlive the process. */
export const layerHeldTasksMemory: Layer.Layer<HeldTasks> = HeldTasksStore.layerMemory

/**
 * The held tasks in the database of the `SqlClient` in context (the claims' migrations make their
 * table: the same client may carry `Idempotency.layerSqlClient`).
 */
export const layerHeldTasksSqlClient: Layer.Layer<HeldTasks, StoreUnavailable, SqlClient.SqlClient> =
  HeldTasksStore.layerSqlClient

/**
 * One SQLite file for what a serving process keeps across restarts: the delivery claims
 * (`Idempotency`) and the tasks it holds (`HeldTasks`), on one client. What `IDEMPOTENCY_DB` gives
 * `makeConfig`; fails with `StoreUnavailable` naming the file if it cannot be opened.
 */
export const layerStoreSql = (options: SqlOptions): Layer.Layer<Idempotency | HeldTasks, StoreUnavailable> =>
  Layer.provide(
    Layer.merge(layerSqlClient(options), HeldTasksStore.layerSqlClient),
    SqlStore.layerSqlite(options.filename, (reason) => new StoreUnavailable({ path: options.filename, reason }))
  )

/**
 * The claims and the held tasks on the PostgreSQL database of `url` (`postgres://` or `postgresql://`): the
 * replicas of an agent that share it share their claims, so a call delivered to two of them runs once. Its
 * tables are the ones `platform migrate` makes (else made at the first start). Fails with `StoreUnavailable`
 * naming the database (never the password) if it cannot be used, or if `@effect/sql-pg` is not installed.
 */
export const layerStorePostgres = (
  url: string,
  options: Omit<SqlOptions, "filename"> = {}
): Layer.Layer<Idempotency | HeldTasks, StoreUnavailable> => {
  const unavailable = (reason: string) => new StoreUnavailable({ path: Settings.redactUrl(url), reason })
  return SqlStore.onPostgres(
    url,
    "a PostgreSQL IDEMPOTENCY_DB",
    unavailable,
    // One after the other: two stores creating their tables at once on PostgreSQL race (`IF NOT EXISTS` does not
    // hold between two sessions: "duplicate key value violates unique constraint pg_type_typname_nsp_index").
    HeldTasksStore.layerSqlClient.pipe(Layer.provideMerge(layerSqlClient(options)))
  )
}

/** What `IDEMPOTENCY_DB` names: a PostgreSQL URL (`layerStorePostgres`), else a SQLite file (`layerStoreSql`). */
export const layerStoreFromSetting = (value: string): Layer.Layer<Idempotency | HeldTasks, StoreUnavailable> =>
  Settings.isPostgresUrl(value) ? layerStorePostgres(value) : layerStoreSql({ filename: value })

/**
 * What `makeConfig` reads: `AGENT_ID`; and, unless an `Idempotency` store is provided, `IDEMPOTENCY_DB`
 * (`layerStoreFromSetting` when set). The `PlatformClient` beneath reads its own settings.
 */
const fromConfig = <A, E, R>(
  use: (agentId: string) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | MissingSetting | StoreUnavailable, R | Scope.Scope> =>
  Effect.gen(function*() {
    const agentId = yield* required("AGENT_ID", Config.string("AGENT_ID"))
    const provided = yield* Effect.serviceOption(Idempotency)
    const path = Option.isSome(provided) ? Option.none() : yield* Settings.optionalString("IDEMPOTENCY_DB")
    if (Option.isNone(path)) return yield* use(agentId)
    const stores = yield* Layer.build(layerStoreFromSetting(path.value))
    return yield* Effect.provide(use(agentId), stores)
  })

/** The default of `MakeOptions.shutdownGrace`. */
export const defaultShutdownGrace: Duration.Duration = Timing.shutdownGrace

/** Options of `makeConfig`, `layerConfig` and `serveConfig`: `make`'s but the agent, read from `AGENT_ID`. */
export interface MakeOptions {
  /**
   * At shutdown (interruption, `stop`, the scope closing), how long the calls still running may go
   * on before they are interrupted; a call's own deadline ends it earlier. Default 30 s.
   */
  readonly shutdownGrace?: Duration.DurationInput | undefined
  /** With a durable store, attach the unfinished tasks this agent held when the process starts. Default true. */
  readonly resumeTasks?: boolean | undefined
}

// ---------------------------------------------------------------------------------------------
// Serving.

/**
 * Registers `toolkit` and keeps it registered for as long as the scope lives: a heartbeat fiber
 * on the interval the platform says (`Timing`'s `heartbeat` when it says none); with a durable
 * store, the unfinished tasks held before a restart attached again. When the scope closes (design:
 * Interruption and shutdown): no new delivery is started, the calls still running get
 * `shutdownGrace`, what is left is interrupted, their answers go out, then a best-effort
 * deregistration. The delivery-dedupe store is the `Idempotency` provided (else memory, with a
 * warning when some tools are idempotent), the held tasks the `HeldTasks` provided (else none); it
 * reads no setting (`makeConfig` does).
 */
export const make = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options: MakeOptions & { readonly agentId: string }
): Effect.Effect<Serve["Type"], ServeError, PlatformClient | Scope.Scope | Exclude<R, CallServices>> =>
  Effect.gen(function*() {
    const agentId = options.agentId
    const client = yield* PlatformClient
    const policy = yield* Timing.Timing
    const stores = yield* storesInContext
    const { byDefault, held } = stores
    const store = stores.store ?? (yield* Layer.build(layerMemory).pipe(Effect.map(Context.get(Idempotency))))
    const grace = Duration.decode(options.shutdownGrace ?? defaultShutdownGrace)
    const caller: Caller = { agentId, processId: yield* Ids.make("process") }

    yield* warnIfMemoryOnly(agentId, toolkit, byDefault)
    // The door each followed task opens one of (its hook state), each delivery run once in the store.
    const door = Door.make(toolkit, { kind: "task", dedupe: store })
    // Tools on worker threads: their workers are up before the platform can deliver a call.
    yield* door.prepare
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
      (event, taskDoor) =>
        Effect.flatMap(registration.current, ({ toolkit }) =>
          Effect.flatMap(runDelivered(taskDoor, toolkit, event), (result) =>
            answers.answer({ taskId: event.taskId, toolCallId: event.toolCallId, result }))),
      report
    )
    const followers = yield* makeFollowers({
      client,
      caller,
      held,
      reconnect: policy.reconnect,
      open: () => door.open(),
      deliver: deliveries.deliver,
      stopCalls: deliveries.stop,
      cancelCall: deliveries.cancel
    })
    if (options.resumeTasks !== false && held.durable) yield* resumeHeld(agentId, held, followers)
    yield* drainOnClose(deliveries, answers, report, grace)
    // Added after the drain, so stopped before it: no new task is taken up while the calls drain. The single calls
    // it gives run as calls delivered on a task's stream do, each task's through a door of its own.
    const doorOf = routedDoors(() => door.open())
    yield* watchAssignments(
      client,
      caller,
      followers,
      policy.reconnect,
      (call) => deliveries.deliver(call, doorOf(call.taskId)),
      deliveries.cancel
    )

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

/**
 * `make`, the agent read from `AGENT_ID` and, unless an `Idempotency` store is provided, the stores
 * from `IDEMPOTENCY_DB` (a SQLite file or a PostgreSQL URL, `layerStoreFromSetting`: claims and held tasks
 * survive a restart; unset: memory). The `PlatformClient` beneath reads `PLATFORM_TOKEN` (and `PLATFORM_URL`).
 */
export const makeConfig = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options: MakeOptions = {}
): Effect.Effect<Serve["Type"], ServeError, PlatformClient | Scope.Scope | Exclude<R, CallServices>> =>
  fromConfig((agentId) => make(toolkit, { ...options, agentId }))

/** `make` as a scoped layer: registered while the layer lives. */
export const layer = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options: MakeOptions & { readonly agentId: string }
): Layer.Layer<Serve, ServeError, PlatformClient | Exclude<R, CallServices>> => Layer.scoped(Serve, make(toolkit, options))

/** `makeConfig` as a scoped layer: the agent and the stores from the settings. */
export const layerConfig = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options: MakeOptions = {}
): Layer.Layer<Serve, ServeError, PlatformClient | Exclude<R, CallServices>> => Layer.scoped(Serve, makeConfig(toolkit, options))

/** Options of `serve` and `serveConfig`. */
export interface ServeOptions extends MakeOptions {
  /** Completes when serving should stop: deregistration follows, then `serve` returns. */
  readonly stop?: Effect.Effect<void> | undefined
}

/** Runs a made serving process until it fails for good or `stop` completes. */
const untilStopped = <E, R>(made: Effect.Effect<Serve["Type"], E, R>, stop: Effect.Effect<void> | undefined) =>
  Effect.scoped(Effect.flatMap(made, (served) => stop === undefined ? served.failed : Effect.raceFirst(served.failed, stop)))

/**
 * Serves `toolkit` as `options.agentId` until interrupted or `stop` completes (deregistering either
 * way); never returns on its own. Fails at once if registration fails, and after 3 heartbeat
 * failures in a row.
 */
export const serve = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options: ServeOptions & { readonly agentId: string }
): Effect.Effect<void, ServeError, PlatformClient | Exclude<R, CallServices>> =>
  untilStopped(make(toolkit, options), options.stop)

/** `serve`, the agent and the stores from the settings (`makeConfig`). */
export const serveConfig = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options: ServeOptions = {}
): Effect.Effect<void, ServeError, PlatformClient | Exclude<R, CallServices>> =>
  untilStopped(makeConfig(toolkit, options), options.stop)
