/**
 * Serving tools to the platform (design: Serving, Delivery dedupe): register the toolkit for `AGENT_ID`, heartbeat on a
 * Schedule, republish when the tools change, deregister on the way out; submit tasks and run the
 * tool calls the platform delivers on their streams, at least once, deduplicated, inside deadlines.
 */
import {
  Cause,
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
import { createHash } from "node:crypto"
import * as Ids from "./Ids.js"
import { Idempotency, layerMemory, layerSql, type StoreUnavailable } from "./Idempotency.js"
import * as Invocation from "./Invocation.js"
import { ToolResult, UnknownTool } from "./ToolResult.js"
import * as Json from "./internal/json.js"
import * as Settings from "./internal/settings.js"
import type {
  LifecycleBudgetExceeded,
  ManifestRejected,
  TaskEvent,
  ToolCallResult,
  Unauthorized,
  UnknownTask
} from "./protocol/Protocol.js"
import { type MissingSetting, PlatformClient, type PlatformUnavailable, required } from "./PlatformClient.js"
import { Timing } from "./Timing.js"
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

/** Another attach of the task (by this agent, another process or connection) took it over: it goes on there. */
export class TaskTakenOverError extends Schema.TaggedError<TaskTakenOverError>("agent-tools/TaskTakenOverError")(
  "TaskTakenOverError",
  { taskId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `task ${this.taskId} was taken over: ${this.reason}`
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
  readonly runTask: (prompt: string) => Effect.Effect<string, ServeError | TaskFailedError | TaskTakenOverError>
  /**
   * Attaches to a task submitted earlier (by this process before a restart, say): its pending calls
   * are delivered again and run here.
   */
  readonly attachTask: (taskId: string) => Stream.Stream<TaskEvent, ServeError>
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

const causeText = (cause: Cause.Cause<unknown>): string =>
  Cause.isInterruptedOnly(cause) ? "interrupted (the platform is gone)" : String(Cause.squash(cause))

/** The manifest's hash: SHA-256 of its canonical JSON. */
export const manifestHash = (toolkit: Toolkit.Toolkit<any>): string =>
  createHash("sha256").update(Json.canonical(toolkit.manifest)).digest("hex")

/** The default of `MakeOptions.shutdownGrace`. */
export const defaultShutdownGrace: Duration.Duration = Duration.seconds(30)

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

/**
 * Registers `toolkit` and keeps it registered for as long as the scope lives: a heartbeat fiber
 * on `Timing`'s `heartbeat` schedule; with a durable store, the unfinished tasks held before a
 * restart attached again. When the scope closes (design: Interruption and shutdown): no new delivery is started, the calls still
 * running get `shutdownGrace`, what is left is interrupted, their answers go out, then a
 * best-effort deregistration. Reads `AGENT_ID`; the `PlatformClient` beneath reads `PLATFORM_TOKEN`
 * (and `PLATFORM_URL`).
 */
export const make = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options?: MakeOptions
): Effect.Effect<Serve["Type"], ServeError, PlatformClient | Scope.Scope | Exclude<R, ToolContext>> =>
  Effect.gen(function*() {
    const agentId = yield* required("AGENT_ID", Config.string("AGENT_ID"))
    const client = yield* PlatformClient
    const policy = yield* Timing
    const { byDefault, store } = yield* storeFromConfig
    const grace = Duration.decode(options?.shutdownGrace ?? defaultShutdownGrace)
    const processId = yield* Ids.make("process")
    const caller = { agentId, processId }
    const current = yield* Ref.make({ toolkit: toolkit as Toolkit.Toolkit<any>, hash: manifestHash(toolkit) })
    const failed = yield* Deferred.make<never, ServeError>()

    const register = Effect.flatMap(Ref.get(current), ({ hash, toolkit }) =>
      client.register({ ...caller, manifest: toolkit.manifest, manifestHash: hash })).pipe(
        Effect.tap(() => Effect.logDebug(`agent ${agentId}: registered`)),
        Effect.withSpan("Serve.register", { attributes: { agentId }, captureStackTrace: false })
      )

    const idempotentTools = toolkit.tools.filter((tool) => tool.idempotent).map((tool) => tool.name)
    // Said once, when nobody chose the memory store: a restart is when it matters, and then it is too late.
    if (byDefault && idempotentTools.length > 0) {
      yield* Effect.logWarning(
        `agent ${agentId}: the idempotent tools ${idempotentTools.join(", ")} are deduplicated in memory only: ` +
          `a restarted process forgets their claims and may run a call again; set IDEMPOTENCY_DB=path.sqlite ` +
          `(or provide Idempotency.layerSql) to keep them`
      )
    }

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

    // What shutdown did, said last (deliveries arriving during the deregistration counted too).
    const stopped = { drained: 0, interrupted: 0, notStarted: 0 }
    yield* Effect.addFinalizer(() => {
      const line = `agent ${agentId}: stopping: ${stopped.drained} call(s) drained, ${stopped.interrupted} interrupted, ` +
        `${stopped.notStarted} delivery(ies) not started (delivered again after a re-attach)`
      return stopped.drained + stopped.interrupted + stopped.notStarted > 0 ? Effect.logInfo(line) : Effect.logDebug(line)
    })

    // Best effort, bounded: a platform already gone (a closed connection, an in-process platform
    // whose scope ended first) neither fails nor interrupts the scope that is closing.
    yield* Effect.addFinalizer(() =>
      boundedInFinalizer(client.deregister(caller), "5 seconds").pipe(
        Effect.flatMap((exit) =>
          Exit.isSuccess(exit)
            ? Effect.logDebug(`agent ${agentId}: deregistered`)
            : Effect.logWarning(`agent ${agentId}: deregistration failed: ${causeText(exit.cause)}`)
        )
      )
    )

    const retryWhileAway = Schedule.whileInput(
      policy.reconnect as Schedule.Schedule<unknown, ServeError>,
      (error: ServeError) => error._tag === "PlatformUnavailable"
    )
    /**
     * Retried on `Timing.reconnect` while the platform is away; the schedule is set up only
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

    /** Runs one delivered call through dedupe (design: Delivery dedupe) and Invocation, and answers the platform. */
    const handle = (event: Extract<TaskEvent, { _tag: "ToolCallRequested" }>): Effect.Effect<void> =>
      Effect.flatMap(Ref.get(current), ({ toolkit }) => {
        const tool = toolkit.byName.get(event.name)
        // Whether the handler started: an interruption before it leaves nothing behind (design: Interruption and shutdown).
        let started = false
        const call = tool === undefined
          ? Effect.succeed(ToolResult.failure(new UnknownTool({ toolName: event.name })))
          : Invocation.run(tool, event.arguments, {
            taskId: event.taskId,
            toolCallId: event.toolCallId,
            deadlineAt: event.deadlineAt,
            onStart: () => void (started = true)
          }) as Effect.Effect<ToolResult>
        return Effect.flatMap(
          store.once(event, {
            toolName: event.name,
            timeout: tool?.timeout ?? Duration.seconds(1),
            idempotent: tool?.idempotent ?? false,
            started: () => started
          }, call),
          ({ result }) => answer({ taskId: event.taskId, toolCallId: event.toolCallId, result })
        )
      })

    // The delivered calls running now, whichever task they are of: they outlive the follower that
    // started them (it may be interrupted first at shutdown) and are drained when serving stops.
    const inFlight = new Set<Fiber.RuntimeFiber<void>>()
    const inFlightKeys = new Set<string>()
    let draining = false
    const deliver = (event: Extract<TaskEvent, { _tag: "ToolCallRequested" }>): void => {
      const key = `${event.taskId}\u0000${event.toolCallId}`
      // Stopping: a new delivery is left to the platform, which delivers it again after a re-attach
      // (a redelivery of a call still running is not one: that call answers).
      if (draining) {
        if (!inFlightKeys.has(key)) stopped.notStarted++
        return
      }
      // Started on this stack: a call that completes at once is answered at once.
      const fiber = runFork(handle(event), { immediate: true })
      if (fiber.unsafePoll() !== null) return
      inFlight.add(fiber)
      inFlightKeys.add(key)
      fiber.addObserver(() => {
        inFlight.delete(fiber)
        inFlightKeys.delete(key)
      })
    }

    // One follower per task here: an explicit attach takes a task over from its re-attach at start.
    const resumed = new Map<string, Fiber.RuntimeFiber<unknown, unknown>>()
    const explicit = new Set<string>()

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
                if (!started) yield* store.holdTask(agentId, event.taskId)
                started = true
              }
              else if (event._tag === "ToolCallRequested") deliver(event)
              onEvent?.(event)
              if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") {
                yield* store.releaseTask(agentId, event.taskId)
                return event
              }
              // Another attach has the task now (its holder keeps it held): this follower stops.
              if (event._tag === "TaskTakenOver") return event
            }
            if (done) return undefined
          }
        }))
        return yield* awayRetried(attached).pipe(
          // The platform does not know the task (any more): nothing is left to take back.
          Effect.tapError((error) =>
            (error._tag === "TaskLost" || error._tag === "UnknownTask") && taskId !== undefined
              ? store.releaseTask(agentId, taskId)
              : Effect.void
          )
        )
      }))
    }

    /** `follow` of a task known by id, by the caller: a re-attach of it from the start gives way first. */
    const followKnown = (
      taskId: string,
      onEvent: ((event: TaskEvent) => void) | undefined
    ): Effect.Effect<TaskEvent | undefined, ServeError> =>
      Effect.suspend(() => {
        explicit.add(taskId)
        const earlier = resumed.get(taskId)
        resumed.delete(taskId)
        return Effect.zipRight(
          earlier === undefined ? Effect.void : Fiber.interrupt(earlier),
          follow("", taskId, onEvent)
        ).pipe(Effect.ensuring(Effect.sync(() => explicit.delete(taskId))))
      })

    /** `follow` as a Stream of the task's events. */
    const taskEvents = (prompt: string, known: string | undefined): Stream.Stream<TaskEvent, ServeError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const out = yield* Mailbox.make<TaskEvent, ServeError>()
        const onEvent = (event: TaskEvent) => void out.unsafeOffer(event)
        yield* Effect.forkScoped(
          Effect.onExit(
            known === undefined ? follow(prompt, undefined, onEvent) : followKnown(known, onEvent),
            (exit) => out.done(Exit.asVoid(exit))
          )
        )
        return Mailbox.toStream(out)
      }))

    const outcome = (last: TaskEvent | undefined): Effect.Effect<string, TaskFailedError | TaskTakenOverError> => {
      if (last?._tag === "TaskCompleted") return Effect.succeed(last.output)
      if (last?._tag === "TaskFailed") return Effect.fail(new TaskFailedError({ taskId: last.taskId, reason: last.reason }))
      if (last?._tag === "TaskTakenOver") {
        return Effect.fail(new TaskTakenOverError({ taskId: last.taskId, reason: last.reason }))
      }
      return Effect.fail(new TaskFailedError({ taskId: "", reason: "the task's stream ended before the task did" }))
    }

    // With a durable store: the tasks this agent held when a process stopped are attached again.
    if (options?.resumeTasks !== false && store.durable) {
      const held = yield* store.heldTasks(agentId)
      if (held.length > 0) {
        yield* Effect.logInfo(`agent ${agentId}: attaching ${held.length} unfinished task(s) again: ${held.join(", ")}`)
      }
      for (const taskId of held) {
        const fiber = yield* Effect.forkScoped(Effect.suspend(() =>
          explicit.has(taskId) ? Effect.void : follow("", taskId, undefined).pipe(
            Effect.flatMap((last) =>
              last === undefined
                ? Effect.logDebug(`task ${taskId}: its stream ended before the task did`)
                : Effect.logInfo(`task ${taskId}: ${
                  last._tag === "TaskCompleted" ? "completed" : last._tag === "TaskFailed" ? "failed" : "taken over elsewhere"
                }`)
            ),
            Effect.catchAll((error) => Effect.logWarning(`task ${taskId}: could not be taken back: ${error.message}`))
          )
        ))
        resumed.set(taskId, fiber)
        fiber.addObserver(() => {
          if (resumed.get(taskId) === fiber) resumed.delete(taskId)
        })
      }
    }

    // Runs first when the scope closes (design: Interruption and shutdown): drain, then (finalizers above) deregister and close.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        draining = true
        const running = [...inFlight]
        if (running.length > 0) {
          yield* boundedInFinalizer(Fiber.awaitAll(running), grace)
        }
        const left = [...inFlight]
        if (left.length > 0) yield* Fiber.interruptAll(left)
        // The drained calls' answers go out before the deregistration.
        if (sending && sender !== undefined) {
          yield* boundedInFinalizer(Fiber.await(sender), "5 seconds")
        }
        stopped.drained = running.length - left.length
        stopped.interrupted = left.length
      })
    )

    return Serve.of({
      agentId,
      processId,
      manifestHash: Effect.map(Ref.get(current), ({ hash }) => hash),
      republish: (next) =>
        Effect.zipRight(Ref.set(current, { toolkit: next, hash: manifestHash(next) }), Effect.asVoid(register)),
      submitTask: (prompt) => taskEvents(prompt, undefined),
      runTask: (prompt) => Effect.flatMap(follow(prompt, undefined, undefined), outcome),
      attachTask: (taskId) => taskEvents("", taskId),
      runAttached: (taskId) => Effect.flatMap(followKnown(taskId, undefined), outcome),
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
