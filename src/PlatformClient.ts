/**
 * The serving side's view of the platform (design: Serving): the protocol's calls, with the token attached,
 * transport failures typed. `layer` speaks WebSocket to `PLATFORM_URL`; `layerTest` runs the
 * platform's handlers in the same process, with no sockets, for tests and single-process setups.
 */
import type * as Rpc from "@effect/rpc/Rpc"
import * as RpcClient from "@effect/rpc/RpcClient"
import * as RpcClientError from "@effect/rpc/RpcClientError"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcMiddleware from "@effect/rpc/RpcMiddleware"
import * as RpcTest from "@effect/rpc/RpcTest"
import { Config, Context, Duration, Effect, Exit, Layer, Mailbox, Option, Redacted, Schedule, Schema, type Scope } from "effect"
import * as Framing from "./protocol/Framing.js"
import {
  type AgentLimitExceeded,
  type ApprovalsNeedJournal,
  type Assignment,
  Authentication,
  type Caller,
  authorizationHeader,
  type EventsWanted,
  type TaskOutput,
  type LifecycleBudgetExceeded,
  type ManifestRejected,
  type NoPendingTaskApproval,
  PlatformBusy,
  PlatformRpcs,
  endsTaskStream,
  type TaskEvent,
  type ToolCallResult,
  Unauthorized,
  type UnknownTask
} from "./protocol/Protocol.js"
import * as Settings from "./internal/util/settings.js"
import * as Wire from "./internal/serve/wire.js"
import type * as Toolkit from "./Toolkit.js"
import { InvalidOutput, ToolResult } from "./ToolResult.js"

/** A setting the serving side needs is not set. */
export class MissingSetting extends Schema.TaggedError<MissingSetting>("agent-tools/MissingSetting")("MissingSetting", {
  variable: Schema.String,
  /** Every setting missing, when more than `variable` is (`requireAll`). */
  others: Schema.optional(Schema.Array(Schema.String))
}) {
  override get message(): string {
    const all = [this.variable, ...(this.others ?? [])]
    return `${all.join(", ")} ${all.length > 1 ? "are" : "is"} not set`
  }
}

/** The platform could not be reached (no connection, or it dropped). */
export class PlatformUnavailable extends Schema.TaggedError<PlatformUnavailable>("agent-tools/PlatformUnavailable")(
  "PlatformUnavailable",
  { message: Schema.String }
) {}

/** Who is calling: the agent and this process (the protocol's `Caller`). */
export type { Caller } from "./protocol/Protocol.js"

/** The protocol's calls, token attached. */
export class PlatformClient extends Context.Tag("agent-tools/PlatformClient")<PlatformClient, {
  readonly register: (
    payload: Caller & { readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>; readonly manifestHash: string }
  ) => Effect.Effect<
    { readonly heartbeatIntervalMillis?: number | undefined },
    ManifestRejected | LifecycleBudgetExceeded | Unauthorized | PlatformUnavailable
  >
  readonly heartbeat: (
    payload: Caller & { readonly manifestHash: string }
  ) => Effect.Effect<{ readonly known: boolean }, LifecycleBudgetExceeded | Unauthorized | PlatformUnavailable>
  readonly deregister: (payload: Caller) => Effect.Effect<void, LifecycleBudgetExceeded | Unauthorized | PlatformUnavailable>
  /**
   * Submits a task. Its events arrive in the mailbox for as long as the scope lives (closing it
   * stops them); the mailbox ends after the task's last event, or fails.
   */
  readonly submitTask: (
    payload: Caller & {
      readonly prompt: string
      readonly events?: EventsWanted | undefined
      /** A typed final output (JSON Schema); `TaskCompleted.value` is the checked answer. */
      readonly output?: TaskOutput | undefined
      /**
       * This submit's key, made once and sent with each of its retries (8-128 of `A-Za-z0-9_-`, a UUID): a repeat is
       * answered with the task the first made, so a submit retried across a lost answer makes one task. `Serve` sends one.
       */
      readonly submitKey?: string | undefined
      /** A retry of the submit with `submitKey` (its answer was lost): the platform looks for the task it made. */
      readonly resubmit?: boolean | undefined
    }
  ) => Effect.Effect<
    Mailbox.ReadonlyMailbox<TaskEvent, AgentLimitExceeded | Unauthorized | PlatformUnavailable>,
    never,
    Scope.Scope
  >
  /**
   * Attaches to a task again (after a reconnect): its pending calls come again. With `after` (the
   * `offset` of the last event the caller has), the events past it come first, none twice.
   */
  readonly attachTask: (
    payload: Caller & {
      readonly taskId: string
      readonly events?: EventsWanted | undefined
      readonly after?: number | undefined
    }
  ) => Effect.Effect<
    Mailbox.ReadonlyMailbox<TaskEvent, UnknownTask | Unauthorized | PlatformUnavailable>,
    never,
    Scope.Scope
  >
  /**
   * The tasks the platform gives this process to run (design: Agents that call agents), for as long
   * as the scope lives; each is attached and its calls run here. With `calls: true`, also single calls
   * of its agent's tasks for the tools it serves (design: The platform), each answered with
   * `completeToolCall` on this client. Absent from a client made by hand.
   */
  readonly watchAssignments?: (
    payload: Caller & { readonly calls?: boolean | undefined }
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<Assignment, Unauthorized | PlatformUnavailable>, never, Scope.Scope>
  /** Answers one or more delivered calls. */
  readonly completeToolCall: (
    payload: Caller & { readonly results: ReadonlyArray<ToolCallResult> }
  ) => Effect.Effect<void, UnknownTask | Unauthorized | PlatformUnavailable>
  /**
   * Approves the call `toolCallId` a suspended task waits for (its `TaskSuspended` names it): once
   * every call it waits for is decided, the task goes on and the call is delivered, approved. The
   * token's agent must be the task's; the platform must have a journal.
   */
  readonly approve: (
    taskId: string,
    toolCallId: string
  ) => Effect.Effect<void, DecisionError>
  /**
   * Cancels the task `taskId` of the token's agent (design: Cancelling a task): its running calls are interrupted
   * where they run, the tasks its `exec_agent` calls started are cancelled, and its stream ends with
   * `TaskCancelled` (by `agent <id>`). `cancelled: false`: it had ended already.
   */
  readonly cancel: (
    taskId: string,
    reason?: string | undefined
  ) => Effect.Effect<{ readonly cancelled: boolean }, UnknownTask | Unauthorized | PlatformUnavailable>
  /** Denies the call: it never runs, and the model reads the denial, with `reason` when given. */
  readonly deny: (
    taskId: string,
    toolCallId: string,
    options?: { readonly reason?: string | undefined }
  ) => Effect.Effect<void, DecisionError>
}>() {}

/** Why a decision on a suspended task's call was refused, or could not be given. */
export type DecisionError =
  | UnknownTask
  | NoPendingTaskApproval
  | ApprovalsNeedJournal
  | Unauthorized
  | PlatformUnavailable

type PlatformRpcsRpcs = RpcGroup.Rpcs<typeof PlatformRpcs>

const isClientError = (error: unknown): error is RpcClientError.RpcClientError =>
  error instanceof RpcClientError.RpcClientError

/**
 * How long a call the platform answers `PlatformBusy` (cluster mode: its database or a runner away) is tried again
 * before its caller is told `PlatformUnavailable`: the two minutes a runner waits for its database.
 */
export const busyWithin = Duration.minutes(2)

/**
 * Tries `PlatformBusy` again, soon at first, then every 2 s, for `busyWithin`; past it, `PlatformUnavailable`.
 * `call(true)` is a retry (a decision says so: made already by its author, it stands).
 */
const retriedWhileBusy = <A, E>(call: (retried: boolean) => Effect.Effect<A, E | PlatformBusy>): Effect.Effect<A, Exclude<E, PlatformBusy> | PlatformUnavailable> => {
  let retried = false
  return Effect.suspend(() => {
    const attempt = call(retried)
    retried = true
    return attempt
  }).pipe(
    Effect.retry({
      while: (error) => error instanceof PlatformBusy,
      schedule: Schedule.exponential("200 millis").pipe(
        Schedule.union(Schedule.spaced("2 seconds")),
        Schedule.upTo(busyWithin)
      )
    }),
    Effect.catchIf(
      (error): error is PlatformBusy => error instanceof PlatformBusy,
      (busy) => Effect.fail(new PlatformUnavailable({ message: busy.message }))
    )
  ) as Effect.Effect<A, Exclude<E, PlatformBusy> | PlatformUnavailable>
}

/**
 * What a failure is to the serving side: a transport failure is the protocol's `Unauthorized` when the platform
 * refused the token at the upgrade, else `PlatformUnavailable` (Serve retries it). A frame over the
 * platform's limit is a defect: only the answers of `CompleteToolCall` can be split, and they are. A busy
 * platform is, to its caller, one unavailable for now: Serve's followers submit again with the key.
 */
const typedFailure = (error: unknown): Exit.Exit<never, unknown> =>
  isClientError(error)
    ? error.cause instanceof Unauthorized
      ? Exit.fail(error.cause)
      : error.cause instanceof Framing.FrameTooLarge
      ? Exit.die(error.cause)
      : Exit.fail(new PlatformUnavailable({ message: `the platform is unreachable (${error.message})` }))
    : error instanceof PlatformBusy
    ? Exit.fail(new PlatformUnavailable({ message: error.message }))
    : Exit.fail(error)

const typed = <A, E>(
  effect: Effect.Effect<A, E | RpcClientError.RpcClientError>
): Effect.Effect<A, Exclude<E, PlatformBusy> | Unauthorized | PlatformUnavailable> =>
  Effect.catchAll(effect, typedFailure) as Effect.Effect<A, Exclude<E, PlatformBusy> | Unauthorized | PlatformUnavailable>

/** A stream's end, its failure typed as a call's (`typedFailure`). */
const typedEnd = (exit: Exit.Exit<void, unknown>): Exit.Exit<void, unknown> =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? typedFailure(exit.cause.error) : exit

/**
 * A stream call's events, transport failures typed, in a mailbox for as long as the scope lives:
 * moved from `RpcClient`'s mailbox a chunk at a time by one fiber (lighter than a `Stream` between them).
 */
const typedEvents = <A, E>(
  events: Effect.Effect<Mailbox.ReadonlyMailbox<A, E | RpcClientError.RpcClientError>, never, Scope.Scope>
): Effect.Effect<Mailbox.ReadonlyMailbox<A, Exclude<E, PlatformBusy> | Unauthorized | PlatformUnavailable>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const source = yield* events
    const out = yield* Mailbox.make<A, Exclude<E, PlatformBusy> | Unauthorized | PlatformUnavailable>()
    const move: Effect.Effect<void, E | RpcClientError.RpcClientError> = Effect.flatMap(source.takeAll, ([chunk, done]) => {
      out.unsafeOfferAll(chunk)
      return done ? Effect.void : move
    })
    yield* Effect.forkScoped(Effect.onExit(typed(move), (exit) => out.done(exit)))
    return out
  })

// Events are taken off the wire as they come (what the caller has not taken waits in its mailbox).
const asMailbox = { asMailbox: true, streamBufferSize: Number.POSITIVE_INFINITY } as const

/** A task's stream's last event (the platform then ends the stream). */
const endsStream = (event: unknown): boolean => endsTaskStream(event as TaskEvent)

const rpcOf = (tag: string) => PlatformRpcs.requests.get(tag) as unknown as Rpc.AnyWithProps

/**
 * The service on an `RpcClient` of the protocol, whatever its transport; with `direct` (the WebSocket's), the
 * streams and the answers (`CompleteToolCall`, a call each delivery) go as frames of their own, past `RpcClient`.
 */
const fromRpcClient = (client: RpcClient.RpcClient<PlatformRpcsRpcs, RpcClientError.RpcClientError>, direct?: Wire.Direct) => {
  type Answers = Parameters<PlatformClient["Type"]["completeToolCall"]>[0]
  const completeRpc = rpcOf("CompleteToolCall")
  const send = direct === undefined
    ? client.CompleteToolCall
    : (payload: Answers) => direct.call(completeRpc, payload) as Effect.Effect<void, UnknownTask | Unauthorized | RpcClientError.RpcClientError>
  // The events of a stream call, in a mailbox the socket's frames fill (direct), else moved from RpcClient's.
  const events = <A, E>(
    tag: string,
    payload: unknown,
    viaClient: () => Effect.Effect<Mailbox.ReadonlyMailbox<A, E | RpcClientError.RpcClientError>, never, Scope.Scope>,
    last?: (event: unknown) => boolean
  ) =>
    direct === undefined
      ? typedEvents(viaClient())
      : direct.stream(rpcOf(tag), payload, typedEnd, last) as Effect.Effect<
        Mailbox.ReadonlyMailbox<A, Exclude<E, PlatformBusy> | Unauthorized | PlatformUnavailable>,
        never,
        Scope.Scope
      >
  // Over the platform's frame limit: halves, each sent on its own (an error of either is the answer's);
  // a single result that alone is over it becomes the error result the model reads instead.
  const complete = (payload: Answers): Effect.Effect<void, UnknownTask | Unauthorized | RpcClientError.RpcClientError> =>
    Effect.catchAll(send(payload), (error) => {
      const tooLarge = isClientError(error) && error.cause instanceof Framing.FrameTooLarge ? error.cause : undefined
      if (tooLarge === undefined) return Effect.fail(error)
      const { results } = payload
      if (results.length > 1) {
        const half = Math.ceil(results.length / 2)
        return Effect.flatten(Effect.zipWith(
          Effect.exit(complete({ ...payload, results: results.slice(0, half) })),
          Effect.exit(complete({ ...payload, results: results.slice(half) })),
          (first, second) => Exit.zipRight(first, second)
        ))
      }
      const failure = new InvalidOutput({
        reason: `the result is ${tooLarge.bytes} bytes, over the platform's frame limit of ${tooLarge.limit}`
      })
      return complete({ ...payload, results: results.map((r) => ({ ...r, result: ToolResult.failure(failure) })) })
    })
  return PlatformClient.of({
    register: (payload) => typed(client.Register(payload)),
    heartbeat: (payload) => typed(client.Heartbeat(payload)),
    deregister: (payload) => typed(client.Deregister(payload)),
    submitTask: (payload) => events("SubmitTask", payload, () => client.SubmitTask(payload, asMailbox), endsStream),
    attachTask: (payload) => events("AttachTask", payload, () => client.AttachTask(payload, asMailbox), endsStream),
    watchAssignments: (payload) => events("WatchAssignments", payload, () => client.WatchAssignments(payload, asMailbox)),
    completeToolCall: (payload) => typed(complete(payload)),
    // Tried again while the platform is busy (`PlatformBusy`, cluster mode): a decision or a cancel, made twice, is one.
    cancel: (taskId, reason) =>
      typed(retriedWhileBusy(() => client.CancelTask(reason === undefined ? { taskId } : { taskId, reason }))),
    approve: (taskId, toolCallId) =>
      typed(retriedWhileBusy((retried) =>
        client.DecideApproval({ taskId, toolCallId, approved: true, ...(retried ? { retried } : {}) })
      )),
    deny: (taskId, toolCallId, options) =>
      typed(retriedWhileBusy((retried) =>
        client.DecideApproval({
          taskId,
          toolCallId,
          approved: false,
          ...(options?.reason === undefined ? {} : { reason: options.reason }),
          ...(retried ? { retried } : {})
        })
      ))
  })
}

/** A required setting, or `MissingSetting` naming it. */
export const required = <A>(variable: string, config: Config.Config<A>): Effect.Effect<A, MissingSetting> =>
  Effect.flatMap(Settings.optional(config), (value) =>
    Option.isSome(value) ? Effect.succeed(value.value) : Effect.fail(new MissingSetting({ variable })))

/** Fails with one `MissingSetting` naming every one of `variables` that is not set. */
export const requireAll = (variables: ReadonlyArray<string>): Effect.Effect<void, MissingSetting> =>
  Effect.flatMap(
    Effect.forEach(variables, (variable) => Effect.map(Settings.optionalString(variable), Option.isNone)),
    (missing) => {
      const names = variables.filter((_, i) => missing[i])
      const [first, ...others] = names
      if (first === undefined) return Effect.void
      return Effect.fail(new MissingSetting(others.length === 0 ? { variable: first } : { variable: first, others }))
    }
  )

/** Attaches `authorization: Bearer <PLATFORM_TOKEN>` to every call. */
const authenticationClient = Layer.unwrapEffect(
  Effect.map(required("PLATFORM_TOKEN", Config.redacted("PLATFORM_TOKEN")), (token) =>
    RpcMiddleware.layerClient(Authentication, ({ request }) =>
      Effect.succeed({
        ...request,
        headers: { ...request.headers, [authorizationHeader]: `Bearer ${Redacted.value(token)}` }
      })))
)

/** Options of `layerWith`. */
export interface LayerOptions {
  /** The largest frame accepted from the platform. Default 16 MiB (a task's events can carry a model's long text). */
  readonly maxFrameBytes?: number | undefined
  /**
   * The largest frame sent: the platform's own limit (`PlatformServer.ListenOptions.maxFrameBytes`).
   * Answers ready together are split into calls under it. Default 2 MiB, as the platform's.
   */
  readonly maxSendBytes?: number | undefined
  /** How long opening the WebSocket may take. Default 10 s. */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /**
   * With several URLs in `PLATFORM_URL`: while connected to another than the first (after a failover), how
   * often the first is tried; once it answers, the client moves back to it (its tasks re-attached there).
   * Default 10 s; 0 never.
   */
  readonly returnToPreferredEvery?: Duration.DurationInput | undefined
}

/**
 * The platform at `PLATFORM_URL` (`ws://host:port/rpc`, or a comma-separated list: a cluster's runners, tried in turn) over WebSocket: `RpcClient` on the
 * protocol's wire (internal/serve/wire.ts), the token sent once with the upgrade; the task streams and the answers as
 * frames of their own on the same connection (`Wire.Direct`: without `RpcClient`'s fiber a call and its queues). The connection opens
 * with the first call and again with the first call after it dropped; calls in flight when it drops
 * fail with `PlatformUnavailable` (Serve retries them on `Timing.reconnect`).
 */
export const layerWith = (options?: LayerOptions): Layer.Layer<PlatformClient, MissingSetting> =>
  Layer.scoped(
    PlatformClient,
    Effect.gen(function*() {
      const url = yield* required("PLATFORM_URL", Config.string("PLATFORM_URL"))
      const token = yield* required("PLATFORM_TOKEN", Config.redacted("PLATFORM_TOKEN"))
      const { direct, protocol } = yield* Wire.makeClientWith({
        // A cluster's runners: any of them serves every call; a dropped connection goes to the next.
        urls: url.split(",").map((u) => u.trim()).filter((u) => u !== ""),
        headers: { [authorizationHeader]: `Bearer ${Redacted.value(token)}` },
        maxFrameBytes: options?.maxFrameBytes ?? Framing.defaultClientMaxFrameBytes,
        maxSendBytes: options?.maxSendBytes ?? Framing.defaultMaxFrameBytes,
        handshakeTimeout: Duration.toMillis(Duration.decode(options?.connectTimeout ?? "10 seconds")),
        // After a failover, back to the first URL once it answers (a rolling restart leaves the processes spread).
        preferredEvery: Duration.toMillis(Duration.decode(options?.returnToPreferredEvery ?? "10 seconds"))
      })
      const client = yield* RpcClient.make(PlatformRpcs).pipe(
        Effect.provideService(RpcClient.Protocol, protocol),
        // The token went with the upgrade: the calls carry nothing more.
        Effect.provide(RpcMiddleware.layerClient(Authentication, ({ request }) => Effect.succeed(request)))
      )
      return fromRpcClient(client, direct)
    })
  )

/** `layerWith()`: the platform at `PLATFORM_URL` over WebSocket, default options. */
export const layer: Layer.Layer<PlatformClient, MissingSetting> = layerWith()

/**
 * The platform's handlers in this process, no sockets (the same protocol and middleware, no
 * serialization). Needs the handlers: `Layer.provide(Server.layerHandlers(options))`.
 */
export const layerTest: Layer.Layer<
  PlatformClient,
  MissingSetting,
  Rpc.ToHandler<PlatformRpcsRpcs> | Authentication
> = Layer.scoped(PlatformClient, Effect.map(RpcTest.makeClient(PlatformRpcs), fromRpcClient)).pipe(
  Layer.provide(authenticationClient)
)
