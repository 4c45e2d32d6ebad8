/**
 * The protocol's handlers (design: The platform): what each call of `PlatformRpcs` does once its
 * token is checked and its agent authorized, on a `Backend` (this process's agents and tasks, or in
 * cluster mode the entities wherever their shards live), with the authentication middleware and
 * `PlatformState` for inspection. Whatever the transport: WebSocket.ts serves them on a socket,
 * `PlatformClient.layerTest` in process.
 */
import type * as Headers from "@effect/platform/Headers"
import * as Rpc from "@effect/rpc/Rpc"
import { Chunk, Clock, Context, Effect, Either, type Exit, FiberId, FiberSet, Layer, type Mailbox, Schema, type Scope } from "effect"
import { runtimeListening } from "../internal/util/tracing.js"
import * as Plain from "../internal/util/plain.js"
import * as PlainEvents from "../protocol/plainEvents.js"
import * as Journal from "../Journal.js"
import {
  type AgentLimitExceeded,
  type Assignment,
  AuthenticatedAgent,
  Authentication,
  authorizationHeader,
  type Caller,
  type EventsWanted,
  type LifecycleBudgetExceeded,
  type ManifestRejected,
  PlatformBusy,
  PlatformRpcs,
  type TaskEvent,
  type TaskOutput,
  type ToolCallResult,
  Unauthorized,
  unknownTokenMessage,
  type UnknownTask
} from "../protocol/Protocol.js"
import type * as Toolkit from "../Toolkit.js"
import { OperatorListener } from "./api/Listener.js"
import * as Health from "./Health.js"
import type { Decide } from "./api/Operations.js"
import { operatorListener } from "./api/Setup.js"
import { agentSettingsOf, type Options } from "./Options.js"
import { makeParts, type Parts } from "./Parts.js"
import { failOnOutage } from "./Outages.js"
import {
  connectionHeader,
  type DirectCall,
  type EventsWriter,
  inProcessConnection,
  StreamWriters,
  WireConnections,
  WireDirect,
  WireLimits
} from "./Wire.js"

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
  /**
   * What the agent holds now, counted against its limits: its tasks not ended yet and their
   * prompts' bytes (this process's), and its processes' manifests' bytes.
   */
  readonly agentUsage: (agentId: string) => Effect.Effect<{ tasks: number; promptBytes: number; manifestBytes: number }>
  /** The processes of `agentId` that watch for tasks to run (`WatchAssignments`) now. */
  readonly watchingProcesses: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
  /** Lifecycle calls seen per agent, all time. */
  readonly lifecycleCalls: (agentId: string) => Effect.Effect<{ register: number; heartbeat: number; deregister: number }>
}>() {}

// --- the backend: what the calls do ---

/**
 * What the protocol's calls do once authorized: the agents and tasks of this process (`localBackend`),
 * or in cluster mode the entities of the agent and the task, wherever their shards live (Cluster.ts, ClusterFront.ts).
 */
export interface Backend {
  readonly register: (
    payload: Caller & { readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>; readonly manifestHash: string }
  ) => Effect.Effect<{ readonly heartbeatIntervalMillis: number }, ManifestRejected | LifecycleBudgetExceeded>
  readonly heartbeat: (
    payload: Caller & { readonly manifestHash: string }
  ) => Effect.Effect<{ readonly known: boolean }, LifecycleBudgetExceeded>
  readonly deregister: (payload: Caller) => Effect.Effect<void, LifecycleBudgetExceeded>
  /**
   * A new task, attached at once to the caller's connection (`connection`, see `connectionOf`): its
   * events. Past the agent's limits, `AgentLimitExceeded`.
   */
  readonly submit: (
    payload: Caller & {
      readonly prompt: string
      readonly events?: EventsWanted | undefined
      /** A typed final output (design: The model side); cluster mode does not carry it yet. */
      readonly output?: TaskOutput | undefined
      /** The client's key for this submit: a repeat is answered with the task the first made. */
      readonly submitKey?: string | undefined
      /** A retry of the submit with this key: the platform looks for the task it made. */
      readonly resubmit?: boolean | undefined
      readonly connection: string
      /** Writes the stream's events straight to its connection (`StreamWriters`), when it came on one. */
      readonly writeEvents?: EventsWriter | undefined
    }
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<TaskEvent>, AgentLimitExceeded, Scope.Scope>
  readonly attach: (
    payload: {
      readonly agentId: string
      readonly taskId: string
      readonly events?: EventsWanted | undefined
      readonly connection: string
      readonly writeEvents?: EventsWriter | undefined
      /** The offset of the last event the client has (cluster mode does not replay from it yet). */
      readonly after?: number | undefined
    }
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<TaskEvent, UnknownTask>, UnknownTask, Scope.Scope>
  /** Answers from `connection`: taken only for calls delivered to it (or to none attached now). */
  readonly complete: (
    agentId: string,
    results: ReadonlyArray<ToolCallResult>,
    connection: string
  ) => Effect.Effect<void, UnknownTask>
  /** Decides a call a suspended task waits for; `by` (journaled with it) is an operator's name, by default the agent. */
  readonly decide: Decide
  /**
   * Cancels the agent's task (design: Cancelling a task), `by` who (`agent <id>`, `operator <name>`): its end is
   * `TaskCancelled`. False if it had ended already.
   */
  readonly cancel: (
    agentId: string,
    payload: { readonly taskId: string; readonly by: string; readonly reason: string }
  ) => Effect.Effect<boolean, UnknownTask>
  /**
   * The tasks given to the caller's process to run (design: Agents that call agents), while the scope lives; with
   * `calls`, the single calls of its agent's tasks given to it too (design: The platform), on `connection`.
   */
  readonly watchAssignments: (
    caller: Caller & { readonly calls?: boolean | undefined },
    connection: string
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<Assignment>, never, Scope.Scope>
}

/** The platform of one process: its own agents and tasks. */
const localBackend = ({ agents, assignments, tasks }: Parts): Backend => ({
  register: agents.register,
  heartbeat: agents.heartbeat,
  deregister: agents.deregister,
  submit: (payload) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) => tasks.submit(payload, agents.visible(payload.agentId, payload.processId, now), payload.connection)
    ),
  attach: tasks.attach,
  complete: tasks.complete,
  decide: tasks.decide,
  cancel: (agentId, { by, reason, taskId }) => tasks.cancel(agentId, taskId, by, reason),
  watchAssignments: ({ agentId, calls, processId }, connection) =>
    assignments.watch({ agentId, processId }, false, { calls, connection })
})

// --- authorization, authentication, inspection ---

/** The caller's token must be bound to the agent it names. */
const authorize = (agentId: string) =>
  Effect.flatMap(AuthenticatedAgent, (authenticated) =>
    authenticated.agentId === agentId
      ? Effect.void
      : Effect.fail(new Unauthorized({ message: `the token is not valid for agent ${agentId}` })))

/** The connection a call came on, as the wire (Wire.ts) names it in every call's headers. */
const connectionOf = (headers: Headers.Headers): string => headers[connectionHeader] ?? inProcessConnection

/**
 * A call that died of an outage (Outages.ts) fails with `PlatformBusy` instead, which its client tries again (a
 * submit with its key, so a retry finds the task the first made); any other defect stays one.
 */
const busyOnOutage = (operation: string) => failOnOutage(operation, (reason) => new PlatformBusy({ operation, reason }))

/** The protocol's handlers: authorization, then the backend's part each call is for. */
const handlersOf = (backend: Backend, writers: StreamWriters) =>
  PlatformRpcs.toLayer({
    Register: (payload) => Effect.zipRight(authorize(payload.agentId), backend.register(payload)),
    Heartbeat: (payload) => Effect.zipRight(authorize(payload.agentId), backend.heartbeat(payload)),
    Deregister: (payload) => Effect.zipRight(authorize(payload.agentId), backend.deregister(payload)),
    SubmitTask: (payload, { headers }) =>
      Effect.zipRight(
        authorize(payload.agentId),
        backend.submit({ ...payload, connection: connectionOf(headers), writeEvents: writers.writerOf(headers) })
      ).pipe(busyOnOutage("SubmitTask")),
    AttachTask: (payload, { headers }) =>
      Effect.zipRight(
        authorize(payload.agentId),
        backend.attach({ ...payload, connection: connectionOf(headers), writeEvents: writers.writerOf(headers) })
      ),
    CompleteToolCall: ({ agentId, results }, { headers }) =>
      Effect.zipRight(authorize(agentId), backend.complete(agentId, results, connectionOf(headers))),
    // The agent is the token's: the payload names none.
    DecideApproval: (payload) =>
      Effect.flatMap(AuthenticatedAgent, ({ agentId }) => backend.decide(agentId, payload)).pipe(busyOnOutage("DecideApproval")),
    // The agent is the token's: the payload names none.
    CancelTask: ({ reason, taskId }) =>
      Effect.flatMap(AuthenticatedAgent, ({ agentId }) =>
        Effect.map(
          backend.cancel(agentId, { taskId, by: `agent ${agentId}`, reason: reason ?? "" }),
          (cancelled) => ({ cancelled })
        )).pipe(busyOnOutage("CancelTask")),
    WatchAssignments: (payload, { headers }) =>
      Effect.zipRight(authorize(payload.agentId), backend.watchAssignments(payload, connectionOf(headers)))
  })

/** The agent a token of `tokens` in the `authorization` header names, if it does. */
const agentOfToken = (tokens: ReadonlyMap<string, string>, headers: Headers.Headers): string | undefined => {
  const value = headers[authorizationHeader]
  const token = typeof value === "string" && value.startsWith("Bearer ") ? value.slice(7) : undefined
  return token === undefined ? undefined : tokens.get(token)
}

/** A token of `tokens` in the `authorization` header names the agent the calls are made as. */
const authenticationOf = (tokens: ReadonlyMap<string, string>) =>
  Layer.succeed(
    Authentication,
    Authentication.of(({ headers }) => {
      const agentId = agentOfToken(tokens, headers)
      return agentId === undefined
        ? Effect.fail(new Unauthorized({ message: unknownTokenMessage }))
        : Effect.succeed({ agentId })
    })
  )

const completeRpc = PlatformRpcs.requests.get("CompleteToolCall")!
/** The two payloads the wire decodes itself, without Effect's parser when plain (internal/util/plain.ts). */
const decodeAnswers = Plain.orParse(
  PlainEvents.decodeAnswers,
  Schema.decodeUnknownEither(completeRpc.payloadSchema as unknown as Schema.Schema<
    { readonly agentId: string; readonly results: ReadonlyArray<ToolCallResult> },
    unknown
  >)
)
const encodeAnswered = Schema.encodeSync(Rpc.exitSchema(completeRpc) as Schema.Schema<Exit.Exit<unknown, unknown>, any>)

type SubmitPayload = Omit<Parameters<Backend["submit"]>[0], "connection" | "writeEvents">
const submitRpc = PlatformRpcs.requests.get("SubmitTask")!
const decodeSubmit = Plain.orParse(
  Plain.plainStruct(submitRpc.payloadSchema.ast),
  Schema.decodeUnknownEither(submitRpc.payloadSchema as unknown as Schema.Schema<SubmitPayload, unknown>)
)
const encodeSubmitEnd = Schema.encodeSync(Rpc.exitSchema(submitRpc) as Schema.Schema<Exit.Exit<unknown, unknown>, any>)

/**
 * A stream's mailbox read to its end, as `RpcServer` reads a handler's: holding only its end, its events written
 * straight to the connection (`writeEvents`, TaskDelivery.ts's `writtenStraight`); an event in it is a defect.
 */
const drained = (mailbox: Mailbox.ReadonlyMailbox<TaskEvent>): Effect.Effect<void> =>
  Effect.flatMap(mailbox.takeAll, ([chunk, done]) =>
    Chunk.isNonEmpty(chunk)
      ? Effect.die(new Error("a task's events came through its stream's mailbox, not written to its connection"))
      : done
      ? Effect.void
      : drained(mailbox))

/**
 * The calls the wire answers itself (Wire.ts, `WireDirect`), each decoded with its Schema, its token the agent's
 * (as `authorize`), handled by the backend in a fiber of its own with no fiber of `RpcServer`'s: `CompleteToolCall`,
 * on every delivered call's way, and `SubmitTask`, a stream whose events its task writes on the connection
 * (`StreamWriters`) and whose end is the wire's. Their fibers are the layer's, as `RpcServer`'s are its own: its
 * end interrupts those still running and waits for them. None when a tracer is installed: then every call has its
 * `RpcServer` span.
 */
const directCalls = (backend: Backend, tokens: ReadonlyMap<string, string>, writers: StreamWriters) =>
  Effect.gen(function*() {
    if (runtimeListening(yield* Effect.runtime<never>())) return new Map<string, DirectCall>()
    const fork = yield* FiberSet.makeRuntime<never>()
    /** Runs `effect`, its exit encoded by `encode` to `done`; gives the way to stop it. */
    const run = <A, E>(
      effect: Effect.Effect<A, E>,
      encode: (exit: Exit.Exit<A, E>) => Schema.ExitEncoded<unknown, unknown, unknown>,
      done: (exit: Schema.ExitEncoded<unknown, unknown, unknown>) => void
    ) => {
      const fiber = fork(effect)
      fiber.addObserver((exit) => done(encode(exit)))
      return () => fiber.unsafeInterruptAsFork(FiberId.none)
    }
    const answers: DirectCall = (payload, headers, done) => {
      const decoded = decodeAnswers(payload)
      if (Either.isLeft(decoded) || agentOfToken(tokens, headers) !== decoded.right.agentId) return undefined
      const { agentId, results } = decoded.right
      return run(backend.complete(agentId, results, connectionOf(headers)), encodeAnswered, done)
    }
    const submit: DirectCall = (payload, headers, done) => {
      const decoded = decodeSubmit(payload)
      if (Either.isLeft(decoded) || agentOfToken(tokens, headers) !== decoded.right.agentId) return undefined
      // Not on a connection that can be written (closed meanwhile): `RpcServer` takes it, as any other.
      const writeEvents = writers.writerOf(headers)
      if (writeEvents === undefined) return undefined
      const submitted = backend.submit({ ...decoded.right, connection: connectionOf(headers), writeEvents })
      return run(Effect.scoped(Effect.flatMap(busyOnOutage("SubmitTask")(submitted), drained)), encodeSubmitEnd, done)
    }
    return new Map([["CompleteToolCall", answers], ["SubmitTask", submit]])
  })

/** `PlatformState` over the agents, the tasks and the assignments. */
const stateOf = ({ agents, assignments, tasks }: Parts) =>
  Layer.succeed(PlatformState, {
    manifestHashes: (agentId) =>
      Effect.map(Clock.currentTimeMillis, (now) => agents.live(agentId, now).map((p) => p.manifestHash)),
    visibleTools: (agentId) =>
      Effect.map(Clock.currentTimeMillis, (now) => agents.visible(agentId, "", now).map((t) => t.entry.name)),
    lifecycleCalls: (agentId) => Effect.sync(() => agents.lifecycleCalls(agentId)),
    processCount: (agentId) => Effect.sync(() => agents.processCount(agentId)),
    agentUsage: (agentId) =>
      Effect.sync(() => ({ ...tasks.usageOf(agentId), manifestBytes: agents.manifestBytes(agentId) })),
    taskCount: Effect.sync(() => tasks.count()),
    watchingProcesses: (agentId) => Effect.sync(() => assignments.watching(agentId))
  })

// --- layers ---

/**
 * The protocol's handlers on `backend`, authentication and state: what `layerWebSocket` serves; and
 * the limits its wire refuses frames by before they are decoded.
 */
export const layerOf = (backend: Backend, parts: Parts, options: Options) => {
  const writers = new StreamWriters()
  const { connections } = parts.tasks.routes
  return Layer.mergeAll(
    handlersOf(backend, writers),
    stateOf(parts),
    Layer.succeed(WireLimits, {
      maxManifestBytes: parts.limits.maxManifestBytes,
      // Read at each upgrade: a reloaded configuration applies to the next connection.
      maxConnectionsOf: (agentId) => agentSettingsOf(options, agentId)?.limits?.maxConnections
    }),
    Layer.scoped(WireDirect, directCalls(backend, options.tokens, writers)),
    // The calls given to serving processes learn when their connections close; the streams write on them.
    Layer.succeed(WireConnections, {
      opened: (connection, write) => {
        writers.opened(connection, write)
        connections.opened(connection)
      },
      closed: (connection) => {
        writers.closed(connection)
        connections.closed(connection)
      }
    })
  ).pipe(
    Layer.provideMerge(authenticationOf(options.tokens))
  )
}

/**
 * The platform: protocol handlers, authentication and state. Needs the tasks' `LanguageModel`.
 * With `journal`, fails with `JournalUnavailable` if the file cannot be opened or read. Its scope
 * stops the parts in the reverse of their start order (Parts.ts), and last the journal, opened first.
 * With operator tokens (`operatorTokens`, `PLATFORM_OPERATOR_TOKENS`), the operator API too, which
 * `layerWebSocket` serves under `/api/v1` (docs: operations).
 */
export const layerHandlers = (options: Options) =>
  Layer.scopedContext(Effect.gen(function*() {
    // Opened before the tasks' fibers exist, so closed after they have stopped.
    const journal = yield* Journal.serviceOrFile(options.journal)
    const parts = yield* makeParts(options, journal)
    const backend = localBackend(parts)
    // Its feed watches the tasks before any is taken back: their first events are kept.
    const operator = yield* operatorListener({ options, parts, backend, journal })
    if (journal !== undefined) yield* parts.tasks.takeBack(journal, parts.limits.keepEndedTasksMillis)
    const context = Context.add(yield* Layer.build(layerOf(backend, parts, options)), Health.Readiness, Health.embedded(journal))
    return operator === undefined ? context : Context.add(context, OperatorListener, operator)
  }))
