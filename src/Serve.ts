/**
 * Serving tools to the platform (design: Serving, Delivery dedupe): register the toolkit for `AGENT_ID`, heartbeat on a
 * Schedule, republish when the tools change, deregister on the way out; submit tasks and run the
 * tool calls the platform delivers on their streams, at least once, deduplicated, inside deadlines.
 */
import { Config, Context, Deferred, Duration, Effect, Layer, Option, Schema, type Scope, Stream } from "effect"
import * as Ids from "./Ids.js"
import { Idempotency, layerMemory, layerSql } from "./Idempotency.js"
import type { HeldTasks } from "./internal/serve/heldTasks.js"
import * as Settings from "./internal/util/settings.js"
import { outputSpec } from "./internal/agent/output.js"
import { formatIssues } from "./internal/util/issues.js"
import type { TaskEvent } from "./protocol/Protocol.js"
import { type Caller, PlatformClient, required } from "./PlatformClient.js"
import * as Timing from "./Timing.js"
import type { ToolContext } from "./ToolContext.js"
import * as Toolkit from "./Toolkit.js"
import { prepareWorkers } from "./internal/worker/prepare.js"
import { awayRetried } from "./internal/serve/away.js"
import { drainOnClose, makeAnswers, makeDeliveries, runDelivered } from "./internal/serve/deliveries.js"
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

export { manifestHash, type ServeError, TaskFailedError, TaskLost, TaskTakenOverError }


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
