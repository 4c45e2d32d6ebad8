/**
 * The serving side's view of the platform (S14): the protocol's calls, with the token attached,
 * transport failures typed. `layer` speaks WebSocket to `PLATFORM_URL`; `layerTest` runs the
 * platform's handlers in the same process, with no sockets, for tests and single-process setups.
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import type * as Rpc from "@effect/rpc/Rpc"
import * as RpcClient from "@effect/rpc/RpcClient"
import type * as RpcClientError from "@effect/rpc/RpcClientError"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcMiddleware from "@effect/rpc/RpcMiddleware"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcTest from "@effect/rpc/RpcTest"
import { Config, Context, Effect, Layer, Option, Redacted, Schema, Stream } from "effect"
import {
  Authentication,
  authorizationHeader,
  type LifecycleBudgetExceeded,
  type ManifestRejected,
  PlatformRpcs,
  type TaskEvent,
  type ToolCallResult,
  type Unauthorized,
  type UnknownTask
} from "./platform/Protocol.js"
import * as Settings from "./internal/settings.js"
import type * as Toolkit from "./Toolkit.js"

/** A setting the serving side needs is not set. */
export class MissingSetting extends Schema.TaggedError<MissingSetting>("agent-tools/MissingSetting")("MissingSetting", {
  variable: Schema.String
}) {
  override get message(): string {
    return `${this.variable} is not set`
  }
}

/** The platform could not be reached (no connection, or it dropped). */
export class PlatformUnavailable extends Schema.TaggedError<PlatformUnavailable>("agent-tools/PlatformUnavailable")(
  "PlatformUnavailable",
  { message: Schema.String }
) {}

/** Who is calling: the agent and this process. */
export interface Caller {
  readonly agentId: string
  readonly processId: string
}

/** The protocol's calls, token attached. */
export class PlatformClient extends Context.Tag("agent-tools/PlatformClient")<PlatformClient, {
  readonly register: (
    payload: Caller & { readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>; readonly manifestHash: string }
  ) => Effect.Effect<
    { readonly heartbeatIntervalMillis: number },
    ManifestRejected | LifecycleBudgetExceeded | Unauthorized | PlatformUnavailable
  >
  readonly heartbeat: (
    payload: Caller & { readonly manifestHash: string }
  ) => Effect.Effect<{ readonly known: boolean }, LifecycleBudgetExceeded | Unauthorized | PlatformUnavailable>
  readonly deregister: (payload: Caller) => Effect.Effect<void, LifecycleBudgetExceeded | Unauthorized | PlatformUnavailable>
  readonly submitTask: (
    payload: Caller & { readonly prompt: string }
  ) => Stream.Stream<TaskEvent, Unauthorized | PlatformUnavailable>
  readonly attachTask: (
    payload: Caller & { readonly taskId: string }
  ) => Stream.Stream<TaskEvent, UnknownTask | Unauthorized | PlatformUnavailable>
  /** Answers one or more delivered calls. */
  readonly completeToolCall: (
    payload: Caller & { readonly results: ReadonlyArray<ToolCallResult> }
  ) => Effect.Effect<void, UnknownTask | Unauthorized | PlatformUnavailable>
}>() {}

// A transport failure becomes PlatformUnavailable; the protocol's own errors pass through.
const typed = <E>(error: E | RpcClientError.RpcClientError): Exclude<E, RpcClientError.RpcClientError> | PlatformUnavailable =>
  isClientError(error)
    ? new PlatformUnavailable({ message: `the platform is unreachable (${error.reason})` })
    : error as Exclude<E, RpcClientError.RpcClientError>

const isClientError = (error: unknown): error is RpcClientError.RpcClientError =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "RpcClientError"

const fromRpcClient = (client: RpcClient.RpcClient<PlatformRpcsRpcs, RpcClientError.RpcClientError>) =>
  PlatformClient.of({
    register: (payload) => Effect.mapError(client.Register(payload), typed),
    heartbeat: (payload) => Effect.mapError(client.Heartbeat(payload), typed),
    deregister: (payload) => Effect.mapError(client.Deregister(payload), typed),
    submitTask: (payload) => Stream.mapError(client.SubmitTask(payload), typed),
    attachTask: (payload) => Stream.mapError(client.AttachTask(payload), typed),
    completeToolCall: (payload) => Effect.mapError(client.CompleteToolCall(payload), typed)
  })

type PlatformRpcsRpcs = RpcGroup.Rpcs<typeof PlatformRpcs>

/** A required setting, or `MissingSetting` naming it. */
export const required = <A>(variable: string, config: Config.Config<A>): Effect.Effect<A, MissingSetting> =>
  Effect.flatMap(Settings.optional(config), (value) =>
    Option.isSome(value) ? Effect.succeed(value.value) : Effect.fail(new MissingSetting({ variable })))

/** Attaches `authorization: Bearer <PLATFORM_TOKEN>` to every call. */
const authenticationClient = Layer.unwrapEffect(
  Effect.map(required("PLATFORM_TOKEN", Config.redacted("PLATFORM_TOKEN")), (token) =>
    RpcMiddleware.layerClient(Authentication, ({ request }) =>
      Effect.succeed({
        ...request,
        headers: { ...request.headers, [authorizationHeader]: `Bearer ${Redacted.value(token)}` }
      })))
)

/** The platform at `PLATFORM_URL` (`ws://host:port/rpc`) over WebSocket; reconnects by itself. */
export const layer: Layer.Layer<PlatformClient, MissingSetting> = Layer.unwrapScoped(
  Effect.gen(function*() {
    const url = yield* required("PLATFORM_URL", Config.string("PLATFORM_URL"))
    return Layer.scoped(PlatformClient, Effect.map(RpcClient.make(PlatformRpcs), fromRpcClient)).pipe(
      Layer.provide(authenticationClient),
      Layer.provide(RpcClient.layerProtocolSocket({ retryTransientErrors: true })),
      Layer.provide(RpcSerialization.layerJson),
      Layer.provide(NodeSocket.layerWebSocket(url))
    )
  })
)

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
