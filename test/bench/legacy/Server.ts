/**
 * The platform's wire as it was before it moved onto `@effect/rpc`'s `RpcServer.Protocol` and
 * `RpcClient.Protocol`: the serve bench's baseline, measured in the same run as the wire in src/.
 * A copy for the bench only; nothing in src/ or the tests imports it.
 */
import * as Headers from "@effect/platform/Headers"
import type * as Rpc from "@effect/rpc/Rpc"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import { Config, Duration, Effect, Exit, Layer, Redacted, Runtime } from "effect"
import { createServer, STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { WebSocket, WebSocketServer } from "ws"
import { PlatformServer } from "../../../src/exports/platform.js"
import { PlatformClient } from "../../../src/exports/serve.js"
import { type MissingSetting, PlatformUnavailable, required } from "../../../src/PlatformClient.js"
import { Authentication, authorizationHeader, PlatformRpcs, Unauthorized } from "../../../src/protocol/Protocol.js"
import { ToolResult } from "../../../src/ToolResult.js"
import * as Wire from "./Wire.js"

type ListenOptions = PlatformServer.ListenOptions
const { defaultListenLimits, Listening, ListenError, path } = PlatformServer
const PlatformClientTag = PlatformClient.PlatformClient

/**
 * The platform on a real WebSocket (`ws://host:port/rpc`), on the protocol's own wire
 * (./Wire.ts). Needs the handlers: `Layer.provide(layerHandlers(options))`.
 */
export const layerWebSocket = (
  listen: ListenOptions
): Layer.Layer<PlatformServer.Listening, PlatformServer.ListenError, Rpc.ToHandler<RpcGroup.Rpcs<typeof PlatformRpcs>> | Authentication> =>
  Layer.scoped(
    Listening,
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<never>()
      const authentication = yield* Authentication
      const host = listen.host ?? "127.0.0.1"
      const maxPayload = listen.maxFrameBytes ?? defaultListenLimits.maxFrameBytes
      const maxConnections = listen.maxConnections ?? defaultListenLimits.maxConnections
      const pingMillis = Duration.toMillis(Duration.decode(listen.pingInterval ?? defaultListenLimits.pingInterval))
      const maxBuffered = listen.maxBufferedBytes ?? defaultListenLimits.maxBufferedBytes
      const warn = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
      const runCallback = Runtime.runCallback(runtime)
      const server = createServer((_, response) => {
        response.writeHead(426, { "content-type": "text/plain" })
        response.end(`the platform speaks WebSocket at ${path}\n`)
      })
      // One message per turn of the event loop: a client flooding small frames cannot starve the others.
      const sockets = new WebSocketServer({ noServer: true, maxPayload, perMessageDeflate: false, allowSynchronousEvents: false })
      /** Live connections: whether each was heard from since the last ping. */
      const live = new Map<WebSocket, { heard: boolean }>()
      let upgrading = 0
      // Refused before the socket is a WebSocket: nothing the client sends after is read.
      const refuse = (socket: Duplex, status: number, text: string) => {
        socket.end(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: text/plain\r\n` +
            `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`
        )
        socket.destroy()
      }
      // The rpc the upgrade's check names to the middleware: any call carries the same token.
      const anyRpc = PlatformRpcs.requests.values().next().value as unknown as Rpc.AnyWithProps
      server.on("upgrade", (request, socket, head) => {
        // A client resetting mid-upgrade must not be an uncaught error.
        socket.on("error", () => socket.destroy())
        if (new URL(request.url ?? "/", "http://platform").pathname !== path) return refuse(socket, 404, "not found\n")
        if (live.size + upgrading >= maxConnections) {
          warn(`a connection was refused: ${maxConnections} are open (maxConnections)`)
          return refuse(socket, 503, `the platform holds ${maxConnections} connections already\n`)
        }
        upgrading++
        // The token is checked here, once more per call by the middleware (which binds the agent).
        runCallback(authentication({ clientId: 0, rpc: anyRpc, payload: undefined, headers: Headers.fromInput(request.headers) }), {
          onExit: (exit) => {
            upgrading--
            if (Exit.isFailure(exit)) return refuse(socket, 401, "missing or unknown platform token\n")
            if (socket.destroyed) return
            sockets.handleUpgrade(request, socket, head, (ws) => accept(ws, request.headers))
          }
        })
      })
      const accept = (ws: WebSocket, headers: Headers.Input) => {
        const state = { heard: true }
        live.set(ws, state)
        let paused: ReturnType<typeof setInterval> | undefined
        // A client that does not read: stop reading it until what it was sent has gone out.
        const send = (frame: string) => {
          ws.send(frame)
          if (paused === undefined && ws.bufferedAmount > maxBuffered) {
            ws.pause()
            paused = setInterval(() => {
              if (ws.bufferedAmount > maxBuffered / 2) return
              clearInterval(paused)
              paused = undefined
              ws.resume()
            }, 10)
          }
        }
        const connection = Wire.serveConnection({ group: PlatformRpcs, runtime }, headers, send)
        ws.on("message", (data) => {
          state.heard = true
          connection.receive(String(data))
        })
        ws.on("pong", () => void (state.heard = true))
        ws.on("error", (error: Error & { code?: string }) =>
          warn(
            error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"
              ? `a client sent a frame over ${maxPayload} bytes; its connection is closed (1009)`
              : `a platform connection failed: ${error.message}; it is closed`
          ))
        ws.on("close", () => {
          live.delete(ws)
          if (paused !== undefined) clearInterval(paused)
          connection.close()
        })
      }
      const pinger = setInterval(() => {
        for (const [ws, state] of live) {
          if (!state.heard) {
            ws.terminate()
            continue
          }
          state.heard = false
          ws.ping()
        }
      }, pingMillis)
      pinger.unref()
      const port = yield* Effect.async<number, PlatformServer.ListenError>((resume) => {
        server.once("error", (error) =>
          resume(Effect.fail(new ListenError({ message: `the platform cannot listen on ${host}:${listen.port}: ${error.message}` }))))
        server.listen(listen.port, host, () => {
          const address = server.address()
          resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : listen.port))
        })
      })
      yield* Effect.addFinalizer(() =>
        Effect.async<void>((resume) => {
          clearInterval(pinger)
          for (const client of sockets.clients) client.terminate()
          sockets.close()
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
      )
      return { host, port }
    })
  )

/** Options of `layerWith` (as PlatformClient's were). */
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
 * wire (./Wire.ts), the token sent once with the upgrade. The connection opens with the
 * first call and again with the first call after it dropped; calls in flight when it drops fail
 * with `PlatformUnavailable` (Serve retries them on `Timing.reconnect`).
 */
export const layerWith = (options?: LayerOptions): Layer.Layer<PlatformClient.PlatformClient, MissingSetting> =>
  Layer.scoped(
    PlatformClientTag,
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
      type Call = PlatformClient.PlatformClient["Type"]
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
                result: ToolResult.failure(`invalid output: the result is ${tooLarge.bytes} bytes, over the platform's frame limit of ${tooLarge.limit}`)
              }))
            })
          }
        ) as ReturnType<Call["completeToolCall"]>
      return PlatformClientTag.of({
        register: (payload) => client.call("Register", payload) as ReturnType<Call["register"]>,
        heartbeat: (payload) => client.call("Heartbeat", payload) as ReturnType<Call["heartbeat"]>,
        deregister: (payload) => client.call("Deregister", payload) as ReturnType<Call["deregister"]>,
        submitTask: (payload) => client.stream("SubmitTask", payload) as ReturnType<Call["submitTask"]>,
        attachTask: (payload) => client.stream("AttachTask", payload) as ReturnType<Call["attachTask"]>,
        completeToolCall,
        cancel: (taskId, reason) => client.call("CancelTask", { taskId, reason }) as ReturnType<Call["cancel"]>,
        approve: (taskId, toolCallId) =>
          client.call("DecideApproval", { taskId, toolCallId, approved: true }) as ReturnType<Call["approve"]>,
        deny: (taskId, toolCallId, options) =>
          client.call("DecideApproval", { taskId, toolCallId, approved: false, reason: options?.reason }) as ReturnType<
            Call["deny"]
          >
      })
    })
  )

