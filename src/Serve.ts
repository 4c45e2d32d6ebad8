/**
 * Serving tools to the platform (S14, S10): register the toolkit for `AGENT_ID`, heartbeat on a
 * Schedule, republish when the tools change, deregister on the way out; submit tasks and run the
 * tool calls the platform delivers on their streams, at least once, deduplicated, inside deadlines.
 */
import {
  Config,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Mailbox,
  Option,
  Ref,
  Runtime,
  Schedule,
  Schema,
  type Scope,
  Stream
} from "effect"
import { createHash, randomUUID } from "node:crypto"
import { Idempotency, layerMemory, layerSql, type StoreUnavailable } from "./Idempotency.js"
import * as Invocation from "./Invocation.js"
import * as Json from "./internal/json.js"
import * as Settings from "./internal/settings.js"
import type {
  LifecycleBudgetExceeded,
  ManifestRejected,
  TaskEvent,
  ToolCallResult,
  Unauthorized,
  UnknownTask
} from "./platform/Protocol.js"
import { type MissingSetting, PlatformClient, type PlatformUnavailable, required } from "./PlatformClient.js"
import { RetryPolicy } from "./RetryPolicy.js"
import type { ToolContext } from "./ToolContext.js"
import type * as Toolkit from "./Toolkit.js"

/** Why serving failed. */
export type ServeError =
  | MissingSetting
  | StoreUnavailable
  | Unauthorized
  | ManifestRejected
  | LifecycleBudgetExceeded
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

/** A serving process. */
export class Serve extends Context.Tag("agent-tools/Serve")<Serve, {
  readonly agentId: string
  /** This process's id: the platform keeps each process's tools apart. */
  readonly processId: string
  /** The hash of the manifest registered now. */
  readonly manifestHash: Effect.Effect<string>
  /** Publishes another toolkit (a tool added or removed): registers it again at once. */
  readonly republish: (toolkit: Toolkit.Toolkit<any>) => Effect.Effect<void, ServeError>
  /** Submits a task; its events stream back, and the tool calls on it run in this process. */
  readonly submitTask: (prompt: string) => Stream.Stream<TaskEvent, ServeError>
  /** Submits a task and returns its output. */
  readonly runTask: (prompt: string) => Effect.Effect<string, ServeError | TaskFailedError>
  /**
   * Attaches to a task submitted earlier (by this process before a restart, say): its pending calls
   * are delivered again and run here.
   */
  readonly attachTask: (taskId: string) => Stream.Stream<TaskEvent, ServeError>
  /** Attaches to a task and returns its output. */
  readonly runAttached: (taskId: string) => Effect.Effect<string, ServeError | TaskFailedError>
  /** Fails when serving has failed for good (3 heartbeats in a row); never succeeds. */
  readonly failed: Effect.Effect<never, ServeError>
}>() {}

/**
 * The delivery-dedupe store: the `Idempotency` service when one is provided; else SQLite when
 * `IDEMPOTENCY_DB=path.sqlite` is set (failing, naming the path, if it cannot be opened); else memory.
 */
const storeFromConfig = Effect.flatMap(Effect.serviceOption(Idempotency), (provided) => {
  if (Option.isSome(provided)) return Effect.succeed(provided.value)
  return Effect.flatMap(Settings.optionalString("IDEMPOTENCY_DB"), (path) =>
    Effect.map(
      Layer.build(Option.isSome(path) ? layerSql({ filename: path.value }) : layerMemory),
      Context.get(Idempotency)
    ))
})

/** The manifest's hash: SHA-256 of its canonical JSON. */
export const manifestHash = (toolkit: Toolkit.Toolkit<any>): string =>
  createHash("sha256").update(Json.canonical(toolkit.manifest)).digest("hex")

/**
 * Registers `toolkit` and keeps it registered for as long as the scope lives: a heartbeat fiber
 * on `RetryPolicy`'s `heartbeat` schedule, and a best-effort deregistration when the scope closes.
 * Reads `AGENT_ID`; the `PlatformClient` beneath reads `PLATFORM_TOKEN` (and `PLATFORM_URL`).
 */
export const make = <R>(
  toolkit: Toolkit.Toolkit<R>
): Effect.Effect<Serve["Type"], ServeError, PlatformClient | Scope.Scope | Exclude<R, ToolContext>> =>
  Effect.gen(function*() {
    const agentId = yield* required("AGENT_ID", Config.string("AGENT_ID"))
    const client = yield* PlatformClient
    const policy = yield* RetryPolicy
    const store = yield* storeFromConfig
    const processId = randomUUID()
    const caller = { agentId, processId }
    const current = yield* Ref.make({ toolkit: toolkit as Toolkit.Toolkit<any>, hash: manifestHash(toolkit) })
    const failed = yield* Deferred.make<never, ServeError>()

    const register = Effect.flatMap(Ref.get(current), ({ hash, toolkit }) =>
      client.register({ ...caller, manifest: toolkit.manifest, manifestHash: hash })).pipe(
        Effect.tap(() => Effect.logDebug(`agent ${agentId}: registered`)),
        Effect.withSpan("Serve.register", { attributes: { agentId }, captureStackTrace: false })
      )

    yield* register

    // Heartbeats: 3 failures in a row fail serving; the platform not knowing the manifest republishes.
    let failures = 0
    const beat = Effect.flatMap(Ref.get(current), ({ hash }) => client.heartbeat({ ...caller, manifestHash: hash })).pipe(
      Effect.flatMap(({ known }) => known ? Effect.void : Effect.asVoid(register)),
      Effect.tap(() => Effect.logDebug(`agent ${agentId}: heartbeat`)),
      Effect.matchEffect({
        onSuccess: () => Effect.sync(() => void (failures = 0)),
        onFailure: (error) =>
          ++failures >= 3
            ? Deferred.fail(failed, error)
            : Effect.logWarning(`agent ${agentId}: heartbeat failed (${failures} in a row): ${error.message}`)
      })
    )
    yield* Effect.forkScoped(Effect.schedule(beat, policy.heartbeat))

    yield* Effect.addFinalizer(() =>
      client.deregister(caller).pipe(
        Effect.timeout("5 seconds"),
        Effect.tap(() => Effect.logDebug(`agent ${agentId}: deregistered`)),
        Effect.catchAll((error) => Effect.logWarning(`agent ${agentId}: deregistration failed: ${String(error)}`))
      )
    )

    const retryWhileAway = Schedule.whileInput(
      policy.reconnect as Schedule.Schedule<unknown, ServeError>,
      (error: ServeError) => error._tag === "PlatformUnavailable"
    )
    /**
     * Retried on `RetryPolicy.reconnect` while the platform is away; the schedule is set up only
     * then, the failed attempt counting as its first (the same delays as retrying from the start).
     */
    const awayRetried = <A, E extends ServeError>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.catchIf(effect, (error) => error._tag === "PlatformUnavailable", (error) => {
        let first = true
        const again = Effect.suspend(() => first ? (first = false, Effect.fail(error)) : effect)
        return Effect.retry(again, retryWhileAway)
      }) as Effect.Effect<A, E>

    // Answers ready at the same moment go to the platform in one call: the first answer starts a
    // sender (on this stack, so a lone answer leaves at once), which takes every answer waiting each
    // time round until none is left; the others only wait in line. It lives as long as serving.
    // Fibers of serving (the answers' sender, each delivered call) run in the context `make` was
    // given (the tools' services, hooks, the clock), forked from one runtime.
    const runFork = Runtime.runFork(yield* Effect.runtime<Exclude<R, ToolContext>>())
    let sender: Fiber.RuntimeFiber<void> | undefined
    yield* Effect.addFinalizer(() => sender === undefined ? Effect.void : Fiber.interrupt(sender))
    let waiting: Array<ToolCallResult> = []
    let sending = false
    const sendWaiting: Effect.Effect<void> = Effect.suspend(() => {
      if (waiting.length === 0) {
        sending = false
        return Effect.void
      }
      const results = waiting.length > 512 ? waiting.splice(0, 512) : waiting
      if (results === waiting) waiting = []
      return awayRetried(client.completeToolCall({ ...caller, results })).pipe(
        Effect.catchAll((error) => Effect.logWarning(`could not answer ${results.length} call(s): ${error.message}`)),
        Effect.zipRight(sendWaiting)
      )
    })
    const answer = (result: ToolCallResult): Effect.Effect<void> =>
      Effect.suspend(() => {
        waiting.push(result)
        if (!sending) {
          sending = true
          sender = runFork(sendWaiting, { immediate: true })
        }
        return Effect.void
      })

    /** Runs one delivered call through dedupe (S10) and Invocation, and answers the platform. */
    const handle = (event: Extract<TaskEvent, { _tag: "ToolCallRequested" }>): Effect.Effect<void> =>
      Effect.flatMap(Ref.get(current), ({ toolkit }) => {
        const tool = toolkit.byName.get(event.name)
        const call = tool === undefined
          ? Effect.succeed(Invocation.ToolResult.failure(`${event.name}: this process does not serve this tool`))
          : Invocation.run(tool, event.arguments, {
            taskId: event.taskId,
            toolCallId: event.toolCallId,
            deadlineAt: event.deadlineAt
          }) as Effect.Effect<Invocation.ToolResult>
        return Effect.flatMap(
          store.once(event, {
            toolName: event.name,
            timeout: tool?.timeout ?? Duration.seconds(1),
            idempotent: tool?.idempotent ?? false
          }, call),
          ({ result }) => answer({ taskId: event.taskId, toolCallId: event.toolCallId, result })
        )
      })

    /**
     * Follows a task to its last event, running its delivered calls here; `onEvent` sees every
     * event. Submitted (`prompt`) or attached (`known`). After a dropped connection the same task
     * is attached again, and its pending calls come again. Gives the last event (none if the
     * platform ended the stream first).
     */
    const follow = (
      prompt: string,
      known: string | undefined,
      onEvent: ((event: TaskEvent) => void) | undefined
    ): Effect.Effect<TaskEvent | undefined, ServeError> => {
      // Without a listener, the stream needs only the calls and the end.
      const events = onEvent === undefined ? "calls" as const : "all" as const
      return Effect.scoped(Effect.gen(function*() {
        // The task's calls still running: interrupted when following ends.
        const calls = new Set<Fiber.RuntimeFiber<void>>()
        yield* Effect.addFinalizer(() => Fiber.interruptAll(calls))
        let taskId: string | undefined = known
        let started = false
        const attached = Effect.scoped(Effect.gen(function*() {
          const id = taskId
          const mailbox = yield* (id === undefined
            ? client.submitTask({ ...caller, prompt, events })
            : client.attachTask({ ...caller, taskId: id, events }))
          while (true) {
            const [chunk, done] = yield* Effect.mapError(mailbox.takeAll, (error): ServeError =>
              // The platform knew the task a moment ago: it restarted and lost it, say so.
              error._tag === "UnknownTask" && started && id !== undefined ? new TaskLost({ taskId: id }) : error)
            for (const event of chunk) {
              if (event._tag === "TaskStarted") {
                taskId = event.taskId
                started = true
              }
              else if (event._tag === "ToolCallRequested") {
                // Started on this stack: a call that completes at once is answered at once.
                const fiber = runFork(handle(event), { immediate: true })
                calls.add(fiber)
                fiber.addObserver(() => calls.delete(fiber))
              }
              onEvent?.(event)
              if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") return event
            }
            if (done) return undefined
          }
        }))
        return yield* awayRetried(attached)
      }))
    }

    /** `follow` as a Stream of the task's events. */
    const taskEvents = (prompt: string, known: string | undefined): Stream.Stream<TaskEvent, ServeError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const out = yield* Mailbox.make<TaskEvent, ServeError>()
        yield* Effect.forkScoped(
          Effect.onExit(follow(prompt, known, (event) => out.unsafeOffer(event)), (exit) => out.done(Exit.asVoid(exit)))
        )
        return Mailbox.toStream(out)
      }))

    const outcome = (last: TaskEvent | undefined): Effect.Effect<string, TaskFailedError> => {
      if (last?._tag === "TaskCompleted") return Effect.succeed(last.output)
      if (last?._tag === "TaskFailed") return Effect.fail(new TaskFailedError({ taskId: last.taskId, reason: last.reason }))
      return Effect.fail(new TaskFailedError({ taskId: "", reason: "the task's stream ended before the task did" }))
    }

    return Serve.of({
      agentId,
      processId,
      manifestHash: Effect.map(Ref.get(current), ({ hash }) => hash),
      republish: (next) =>
        Effect.zipRight(Ref.set(current, { toolkit: next, hash: manifestHash(next) }), Effect.asVoid(register)),
      submitTask: (prompt) => taskEvents(prompt, undefined),
      runTask: (prompt) => Effect.flatMap(follow(prompt, undefined, undefined), outcome),
      attachTask: (taskId) => taskEvents("", taskId),
      runAttached: (taskId) => Effect.flatMap(follow("", taskId, undefined), outcome),
      failed: Deferred.await(failed)
    })
  })

/** `make` as a scoped layer: registered while the layer lives. */
export const layer = <R>(
  toolkit: Toolkit.Toolkit<R>
): Layer.Layer<Serve, ServeError, PlatformClient | Exclude<R, ToolContext>> => Layer.scoped(Serve, make(toolkit))

/** Options of `serve`. */
export interface ServeOptions {
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
  Effect.scoped(Effect.flatMap(make(toolkit), (served) =>
    options?.stop === undefined ? served.failed : Effect.raceFirst(served.failed, options.stop)))
