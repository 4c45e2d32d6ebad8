/**
 * The serving side's view of the platform (design: Serving): the protocol's calls, with the token attached,
 * transport failures typed. `layer` speaks WebSocket to `PLATFORM_URL`; `layerTest` runs the
 * platform's handlers in the same process, with no sockets, for tests and single-process setups.
 */
import type * as Rpc from "@effect/rpc/Rpc"
import * as RpcClient from "@effect/rpc/RpcClient"
import type * as RpcClientError from "@effect/rpc/RpcClientError"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcMiddleware from "@effect/rpc/RpcMiddleware"
import * as RpcTest from "@effect/rpc/RpcTest"
import { Config, Context, Duration, Effect, Exit, Layer, Mailbox, Option, Redacted, Schema, type Scope, Stream } from "effect"
import { WebSocket } from "ws"
import {
  Authentication,
  authorizationHeader,
  type EventsWanted,
  type LifecycleBudgetExceeded,
  type ManifestRejected,
  PlatformRpcs,
  type TaskEvent,
  type ToolCallResult,
  Unauthorized,
  type UnknownTask
} from "./protocol/Protocol.js"
import * as Settings from "./internal/settings.js"
import * as Wire from "./platform/Wire.js"
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
  /**
   * Submits a task. Its events arrive in the mailbox for as long as the scope lives (closing it
   * stops them); the mailbox ends after the task's last event, or fails.
   */
  readonly submitTask: (
    payload: Caller & { readonly prompt: string; readonly events?: EventsWanted | undefined }
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<TaskEvent, Unauthorized | PlatformUnavailable>, never, Scope.Scope>
  /** Attaches to a task again (after a reconnect): its pending calls come again. */
  readonly attachTask: (
    payload: Caller & { readonly taskId: string; readonly events?: EventsWanted | undefined }
  ) => Effect.Effect<
    Mailbox.ReadonlyMailbox<TaskEvent, UnknownTask | Unauthorized | PlatformUnavailable>,
    never,
    Scope.Scope
  >
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
    submitTask: (payload) => Mailbox.fromStream(Stream.mapError(client.SubmitTask(payload), typed)),
    attachTask: (payload) => Mailbox.fromStream(Stream.mapError(client.AttachTask(payload), typed)),
    completeToolCall: (payload) => Effect.mapError(client.CompleteToolCall(payload), typed)
  })

type PlatformRpcsRpcs = RpcGroup.Rpcs<typeof PlatformRpcs>

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
}

/**
 * The platform at `PLATFORM_URL` (`ws://host:port/rpc`) over WebSocket, on the protocol's own
 * wire (platform/Wire.ts), the token sent once with the upgrade. The connection opens with the
 * first call and again with the first call after it dropped; calls in flight when it drops fail
 * with `PlatformUnavailable` (Serve retries them on `Timing.reconnect`).
 */
export const layerWith = (options?: LayerOptions): Layer.Layer<PlatformClient, MissingSetting> =>
  Layer.scoped(
    PlatformClient,
    Effect.gen(function*() {
      const url = yield* required("PLATFORM_URL", Config.string("PLATFORM_URL"))
      const token = yield* required("PLATFORM_TOKEN", Config.redacted("PLATFORM_TOKEN"))
      const handshakeTimeout = Duration.toMillis(Duration.decode(options?.connectTimeout ?? "10 seconds"))
      const unavailable = (reason: string) => new PlatformUnavailable({ message: `the platform is unreachable (${reason})` })

      interface Connection {
        readonly socket: WebSocket
        readonly opened: Promise<Wire.Link>
        link: Wire.Link | undefined
      }
      let current: Connection | undefined
      let closed = false

      const connect = (): Connection => {
        const socket = new WebSocket(url, {
          headers: { [authorizationHeader]: `Bearer ${Redacted.value(token)}` },
          maxPayload: options?.maxFrameBytes ?? Wire.defaultClientMaxFrameBytes,
          handshakeTimeout,
          perMessageDeflate: false
        })
        let settle: { resolve: (link: Wire.Link) => void; reject: (error: Error) => void } | undefined
        const connection: Connection = {
          socket,
          link: undefined,
          opened: new Promise<Wire.Link>((resolve, reject) => void (settle = { resolve, reject }))
        }
        // Nobody may be waiting when it fails: the failure still counts as handled.
        connection.opened.catch(() => undefined)
        socket.on("open", () => {
          connection.link = { send: (frame) => socket.send(frame) }
          settle?.resolve(connection.link)
        })
        // The platform checks the token at the upgrade: a 401 is the protocol's Unauthorized, not an outage.
        socket.on("unexpected-response", (request, response) => {
          const status = response.statusCode ?? 0
          response.resume()
          request.destroy()
          if (current === connection) current = undefined
          settle?.reject(
            status === 401
              ? new Unauthorized({ message: "missing or unknown platform token" })
              : new Error(`the platform refused the connection (${status} ${response.statusMessage ?? ""})`)
          )
        })
        socket.on("message", (data) => client.receive(String(data)))
        socket.on("error", (error) => {
          // Failing to open: the next call tries a new connection (ws also emits "close" after this).
          if (connection.link === undefined && current === connection) current = undefined
          settle?.reject(error)
        })
        socket.on("close", (code, reason) => {
          if (current === connection) current = undefined
          const why = `connection closed, code ${code}${reason.length > 0 ? `: ${String(reason)}` : ""}`
          settle?.reject(new Error(why))
          client.dropped(why)
        })
        return connection
      }

      const open: Effect.Effect<Wire.Link, PlatformUnavailable | Unauthorized> = Effect.suspend(() => {
        if (closed) return Effect.fail(unavailable("the client is closed"))
        const connection = current ??= connect()
        if (connection.link !== undefined) return Effect.succeed(connection.link)
        return Effect.tryPromise({
          try: () => connection.opened,
          catch: (error) => error instanceof Unauthorized ? error : unavailable(String((error as Error).message ?? error))
        })
      })

      const client = Wire.makeClient<PlatformUnavailable | Unauthorized>({
        group: PlatformRpcs,
        open,
        unavailable,
        maxSendBytes: options?.maxSendBytes
      })
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          closed = true
          current?.socket.close()
          current = undefined
        })
      )
      type Call = PlatformClient["Type"]
      // Over the platform's frame limit: halves, each sent on its own (an error of either is the answer's);
      // a single result that alone is over it becomes the error result the model reads instead.
      const completeToolCall: Call["completeToolCall"] = (payload) =>
        Effect.catchIf(
          client.call("CompleteToolCall", payload),
          (error) => error instanceof Wire.FrameTooLarge,
          (error): Effect.Effect<unknown, unknown> => {
            const tooLarge = error as Wire.FrameTooLarge
            const { results } = payload
            if (results.length > 1) {
              const half = Math.ceil(results.length / 2)
              return Effect.flatMap(
                Effect.zipWith(
                  Effect.exit(completeToolCall({ ...payload, results: results.slice(0, half) })),
                  Effect.exit(completeToolCall({ ...payload, results: results.slice(half) })),
                  Exit.zipRight
                ),
                (exit) => exit
              )
            }
            return completeToolCall({
              ...payload,
              results: results.map((r) => ({
                ...r,
                result: ToolResult.failure(new InvalidOutput({
                  reason: `the result is ${tooLarge.bytes} bytes, over the platform's frame limit of ${tooLarge.limit}`
                }))
              }))
            })
          }
        ) as ReturnType<Call["completeToolCall"]>
      return PlatformClient.of({
        register: (payload) => client.call("Register", payload) as ReturnType<Call["register"]>,
        heartbeat: (payload) => client.call("Heartbeat", payload) as ReturnType<Call["heartbeat"]>,
        deregister: (payload) => client.call("Deregister", payload) as ReturnType<Call["deregister"]>,
        submitTask: (payload) => client.stream("SubmitTask", payload) as ReturnType<Call["submitTask"]>,
        attachTask: (payload) => client.stream("AttachTask", payload) as ReturnType<Call["attachTask"]>,
        completeToolCall
      })
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
