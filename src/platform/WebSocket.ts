/**
 * The platform on a real WebSocket (design: The platform, Hostile clients): a `node:http` server whose
 * upgrades to `/rpc` are checked (path, token, connection cap, the agent's share of it) before the
 * socket exists, and `ws` connections that carry the protocol's frames to `RpcServer` through the wire
 * (Wire.ts), each one pinged, held to a frame size and a time to finish a frame, and no longer read
 * while it does not read what it is sent.
 *
 * Shutdown (its scope, last-added first): the listener closes (the pinger stops, every connection is
 * terminated, the server closes), then `RpcServer`'s fiber, forked first, is interrupted.
 */
import * as Headers from "@effect/platform/Headers"
import type * as Rpc from "@effect/rpc/Rpc"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Context, Duration, Effect, Exit, Layer, Option, Runtime, Schema } from "effect"
import { createServer, type IncomingMessage, type Server as HttpServer, STATUS_CODES } from "node:http"
import type { Duplex } from "node:stream"
import { type RawData, type WebSocket, WebSocketServer } from "ws"
import * as Framing from "../protocol/Framing.js"
import { Authentication, PlatformRpcs, unknownTokenMessage } from "../protocol/Protocol.js"
import { isConsolePath, isOperatorPath, OperatorListener } from "./api/Listener.js"
import * as Health from "./Health.js"
import * as Metrics from "./Metrics.js"
import * as Wire from "./Wire.js"

/** Where the WebSocket server listens, and the limits each connection is held to (design: Hostile clients). */
export interface ListenOptions {
  /** Default 127.0.0.1. */
  readonly host?: string | undefined
  /** 0 picks a free port. */
  readonly port: number
  /** The largest frame accepted from a client; a larger one closes its connection (1009). Default 2 MiB. */
  readonly maxFrameBytes?: number | undefined
  /** Open connections (and upgrades being checked) at most; the upgrade over it gets 503. Default 256. */
  readonly maxConnections?: number | undefined
  /**
   * Open connections of one agent (its tokens) at most, so that one agent cannot take every
   * connection: its upgrade over it gets 503 naming this limit. Default 32.
   */
  readonly maxConnectionsPerAgent?: number | undefined
  /**
   * A frame begun (its fragments included) must have arrived whole within this; a connection that
   * holds one unfinished longer is closed (1008). Checked on a coarse timer (at most every second). Default 20 s.
   */
  readonly frameTimeout?: Duration.DurationInput | undefined
  /**
   * Each connection is pinged this often; one that answered neither the last ping nor sent a frame
   * since is closed (a client gone without a word, a half-open connection). Default 30 s.
   */
  readonly pingInterval?: Duration.DurationInput | undefined
  /**
   * Bytes queued for a client that does not read: past this the platform stops reading its frames
   * until the queue is below half of it (and its unread pong then closes it). Default 1 MiB.
   */
  readonly maxBufferedBytes?: number | undefined
}

/** The defaults of `ListenOptions`' limits. */
export const defaultListenLimits = {
  maxFrameBytes: Framing.defaultMaxFrameBytes,
  maxConnections: 256,
  // An eighth: eight agents at their share still leave half the connections to the others.
  maxConnectionsPerAgent: 32,
  // A 2 MiB frame at 100 KB/s, a slow link, arrives in this.
  frameTimeout: Duration.seconds(20),
  pingInterval: Duration.seconds(30),
  maxBufferedBytes: 1024 * 1024
} as const

/** The path of the protocol's WebSocket. */
export const path = "/rpc"

/** Where a platform served by `layerWebSocket` listens (the port picked for `port: 0`). */
export class Listening extends Context.Tag("agent-tools/platform/Listening")<Listening, {
  readonly host: string
  readonly port: number
}>() {}

/** The platform could not listen (the port is taken, say). */
export class ListenError extends Schema.TaggedError<ListenError>("agent-tools/platform/ListenError")("ListenError", {
  message: Schema.String
}) {}

/** `ListenOptions`, defaults applied. */
interface Limits {
  readonly maxPayload: number
  readonly maxConnections: number
  readonly maxConnectionsPerAgent: number
  readonly frameMillis: number
  readonly pingMillis: number
  readonly maxBuffered: number
}

/** A live connection: its agent, whether it was heard from since the last ping, since when it is mid-frame. */
interface Connection {
  readonly agentId: string
  heard: boolean
  /** When the frame timer first saw it mid-frame since its last whole message; undefined if it was not. */
  midFrameSince: number | undefined
  /** True while the platform does not read it (it does not read what it is sent): its frame waits for the platform. */
  paused: boolean
}

/** Live connections, and how many each agent has open. */
interface Live {
  readonly connections: Map<WebSocket, Connection>
  readonly perAgent: Map<string, number>
}

// --- refusing and accepting upgrades ---

/** Refused before the socket is a WebSocket: nothing the client sends after is read. */
const refuse = (socket: Duplex, status: number, text: string) => {
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: text/plain\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`
  )
  socket.destroy()
}

/** A message's bytes as `ws` gives them (a Buffer, with the default `binaryType`). */
const bytesOf = (data: RawData): Uint8Array =>
  Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : new Uint8Array(data)

/** A connection whose upgrade was accepted: its frames to the wire, its answers back, held to the limits. */
const acceptOf = (wire: Wire.Server, live: Live, limits: Limits, warn: (message: string) => void, info = warn) =>
(ws: WebSocket, headers: Headers.Input, agentId: string, from?: string) => {
  const state: Connection = { agentId, heard: true, midFrameSince: undefined, paused: false }
  live.connections.set(ws, state)
  live.perAgent.set(agentId, (live.perAgent.get(agentId) ?? 0) + 1)
  info(`a connection of agent ${agentId} opened from ${from ?? "?"} (${live.perAgent.get(agentId)} of the agent's open)`)
  let paused: ReturnType<typeof setInterval> | undefined
  // A client that does not read: stop reading it until what it was sent has gone out.
  const send = (frame: string) => {
    ws.send(frame)
    if (paused === undefined && ws.bufferedAmount > limits.maxBuffered) {
      ws.pause()
      state.paused = true
      paused = setInterval(() => {
        if (ws.bufferedAmount > limits.maxBuffered / 2) return
        clearInterval(paused)
        paused = undefined
        state.paused = false
        ws.resume()
      }, 10)
    }
  }
  const connection = wire.connect(headers, send)
  ws.on("message", (data) => {
    state.heard = true
    state.midFrameSince = undefined
    connection.receive(bytesOf(data))
  })
  ws.on("pong", () => void (state.heard = true))
  ws.on("error", (error: Error & { code?: string }) =>
    warn(
      error.code === "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH"
        ? `a client sent a frame over ${limits.maxPayload} bytes; its connection is closed (1009)`
        : `a platform connection failed: ${error.message}; it is closed`
    ))
  ws.on("close", () => {
    live.connections.delete(ws)
    const open = (live.perAgent.get(agentId) ?? 1) - 1
    if (open > 0) live.perAgent.set(agentId, open)
    else live.perAgent.delete(agentId)
    if (paused !== undefined) clearInterval(paused)
    info(`a connection of agent ${agentId} from ${from ?? "?"} closed (${open} of the agent's open)`)
    connection.close()
  })
}

/** Refusals logged once per 10 s with their count, not once each (a flood would log a line each). */
const countedWarning = (warn: (message: string) => void, line: (count: number) => string) => {
  const refused = { count: 0, since: -Infinity }
  return () => {
    const now = Date.now()
    refused.count++
    if (now - refused.since < 10_000) return
    warn(line(refused.count))
    refused.count = 0
    refused.since = now
  }
}

/**
 * The upgrade's checks, in order: the path (404), the token (401, checked here and once more per
 * call by the middleware, which binds the agent), the connection cap and the agent's share of it
 * (503: only a client with a valid token counts against them, or is told they are full); then the
 * WebSocket. Refusals at each cap are logged once per 10 s with their count, not once each.
 */
const onUpgradeOf = (
  options: {
    readonly sockets: WebSocketServer
    readonly live: Live
    readonly limits: Limits
    readonly authenticate: (
      headers: Headers.Headers,
      onExit: (exit: Exit.Exit<{ readonly agentId: string }, unknown>) => void
    ) => void
    readonly warn: (message: string) => void
    readonly accept: (ws: WebSocket, headers: Headers.Input, agentId: string, from?: string) => void
    /** The agent's own cap (`AgentLimits.maxConnections`), if its settings give one. */
    readonly capOf: (agentId: string) => number | undefined
  }
) => {
  const { accept, authenticate, capOf, limits, live, sockets, warn } = options
  let upgrading = 0
  const warnFull = countedWarning(warn, (count) =>
    `${count} connection(s) refused since the last line: ${limits.maxConnections} are open (maxConnections)`)
  const full = (socket: Duplex) => {
    warnFull()
    refuse(socket, 503, `the platform holds ${limits.maxConnections} connections already\n`)
  }
  const warnShare = countedWarning(warn, (count) =>
    `${count} connection(s) refused since the last line: their agent holds as many as it may ` +
    `(maxConnectionsPerAgent, or its own limits.maxConnections)`)
  const agentFull = (socket: Duplex, agentId: string, cap: number, own: boolean) => {
    warnShare()
    refuse(
      socket,
      503,
      `agent ${agentId} holds ${cap} connections already, ` +
        `${own ? "the most it may (its own limits.maxConnections)" : "the most one agent may (the platform's maxConnectionsPerAgent)"}\n`
    )
  }
  // The token is never logged: a client sending many is seen by its address and count.
  let refusedFrom = ""
  const warnToken = countedWarning(warn, (count) =>
    `${count} upgrade(s) with a token the platform does not know since the last line, each refused (401; the latest from ${refusedFrom})`)
  return (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A client resetting mid-upgrade must not be an uncaught error.
    socket.on("error", () => socket.destroy())
    if (new URL(request.url ?? "/", "http://platform").pathname !== path) return refuse(socket, 404, "not found\n")
    upgrading++
    authenticate(Headers.fromInput(request.headers), (exit) => {
      upgrading--
      if (Exit.isFailure(exit)) {
        refusedFrom = request.socket.remoteAddress ?? "?"
        warnToken()
        return refuse(socket, 401, `${unknownTokenMessage}\n`)
      }
      if (socket.destroyed) return
      const { agentId } = exit.value
      const own = capOf(agentId)
      const cap = own ?? limits.maxConnectionsPerAgent
      if ((live.perAgent.get(agentId) ?? 0) >= cap) return agentFull(socket, agentId, cap, own !== undefined)
      if (live.connections.size + upgrading >= limits.maxConnections) return full(socket)
      // The WebSocket is made at once (no `verifyClient`): the agent's count is up before the next upgrade's check.
      sockets.handleUpgrade(request, socket, head, (ws) => accept(ws, request.headers, agentId, request.socket.remoteAddress))
    })
  }
}

// --- the listener ---

/** Each connection pinged every interval; one not heard from since the last ping is closed. */
const startPinger = (live: Live, pingMillis: number) => {
  const pinger = setInterval(() => {
    for (const [ws, state] of live.connections) {
      if (!state.heard) {
        ws.terminate()
        continue
      }
      state.heard = false
      ws.ping()
    }
  }, pingMillis)
  pinger.unref()
  return pinger
}

/** What of `ws`'s Receiver (its internals, ws 8) the frame timer reads. */
interface ReceiverState {
  readonly _bufferedBytes: number
  readonly _fragmented: number
  readonly _state: number
}

/** True while the connection has a frame begun and not finished: bytes of one, a fragment, or a header read. */
const midFrame = (ws: WebSocket): boolean => {
  const receiver = (ws as unknown as { readonly _receiver?: ReceiverState })._receiver
  // 1-4: ws's GET_PAYLOAD_LENGTH_16, GET_PAYLOAD_LENGTH_64, GET_MASK, GET_DATA.
  return receiver !== undefined &&
    (receiver._bufferedBytes > 0 || receiver._fragmented !== 0 || (receiver._state >= 1 && receiver._state <= 4))
}

/**
 * A frame begun must have arrived whole within `frameMillis` (design: Hostile clients): a connection
 * seen mid-frame at one tick and still without a whole message `frameMillis` later is closed (1008),
 * and cut a second later if it does not close. A pong between fragments does not count as a frame;
 * a connection the platform does not read is not held to it. One coarse timer for all connections.
 */
const startFrameTimer = (live: Live, frameMillis: number, warn: (message: string) => void) => {
  const warnSlow = countedWarning(warn, (count) =>
    `${count} connection(s) closed since the last line: a frame took over ${frameMillis} ms (frameTimeout)`)
  const timer = setInterval(() => {
    const now = Date.now()
    for (const [ws, state] of live.connections) {
      if (state.paused || !midFrame(ws)) {
        state.midFrameSince = undefined
        continue
      }
      state.midFrameSince ??= now
      if (now - state.midFrameSince < frameMillis || ws.readyState !== ws.OPEN) continue
      warnSlow()
      ws.close(1008, `a frame took over ${frameMillis} ms to arrive (frameTimeout)`)
      setTimeout(() => ws.terminate(), 1000).unref()
    }
  }, Math.max(10, Math.min(1000, frameMillis / 4)))
  timer.unref()
  return timer
}

/** Listens on `host:port`; the port picked for 0. */
const listenOn = (server: HttpServer, host: string, port: number) =>
  Effect.async<number, ListenError>((resume) => {
    server.once("error", (error) =>
      resume(Effect.fail(new ListenError({ message: `the platform cannot listen on ${host}:${port}: ${error.message}` }))))
    server.listen(port, host, () => {
      const address = server.address()
      resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : port))
    })
  })

/**
 * The platform on a real WebSocket (`ws://host:port/rpc`): `RpcServer` on the protocol's wire
 * (platform/Wire.ts). Needs the handlers: `Layer.provide(layerHandlers(options))`.
 */
export const layerWebSocket = (
  listen: ListenOptions
): Layer.Layer<Listening, ListenError, Rpc.ToHandler<RpcGroup.Rpcs<typeof PlatformRpcs>> | Authentication> =>
  Layer.scoped(
    Listening,
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<never>()
      const authentication = yield* Authentication
      const wire = yield* Wire.makeServer
      const wireLimits = yield* Wire.WireLimits
      // A defect is its call's answer, not the end of every call on the connection.
      yield* RpcServer.make(PlatformRpcs, { disableFatalDefects: true }).pipe(
        Effect.provideService(RpcServer.Protocol, wire.protocol),
        Effect.interruptible,
        Effect.forkScoped
      )
      const host = listen.host ?? "127.0.0.1"
      const limits: Limits = {
        maxPayload: listen.maxFrameBytes ?? defaultListenLimits.maxFrameBytes,
        maxConnections: listen.maxConnections ?? defaultListenLimits.maxConnections,
        maxConnectionsPerAgent: listen.maxConnectionsPerAgent ?? defaultListenLimits.maxConnectionsPerAgent,
        frameMillis: Duration.toMillis(Duration.decode(listen.frameTimeout ?? defaultListenLimits.frameTimeout)),
        pingMillis: Duration.toMillis(Duration.decode(listen.pingInterval ?? defaultListenLimits.pingInterval)),
        maxBuffered: listen.maxBufferedBytes ?? defaultListenLimits.maxBufferedBytes
      }
      const warn = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
      const runCallback = Runtime.runCallback(runtime)
      // The rpc the upgrade's check names to the middleware: any call carries the same token.
      const anyRpc = PlatformRpcs.requests.values().next().value as unknown as Rpc.AnyWithProps
      const live: Live = { connections: new Map(), perAgent: new Map() }
      // The operator API, when the platform has one (docs: operations): its paths, on the same port.
      let address = { host, port: listen.port }
      const operator = yield* Effect.serviceOption(OperatorListener)
      const operatorApi = Option.isNone(operator) ? undefined : yield* operator.value.listener({
        address: () => address,
        connections: (agentId) => live.perAgent.get(agentId) ?? 0
      })
      // Liveness, readiness and (opt-in) the Prometheus text, unauthenticated (docs: operations).
      const health = Health.listener(Runtime.runFork(runtime), Option.getOrUndefined(yield* Effect.serviceOption(Health.Readiness)))
      const metrics = Option.map(yield* Effect.serviceOption(Metrics.Prometheus), (p) => p.listener(Runtime.runFork(runtime)))
      const server = createServer((request, response) => {
        // The console's pages (docs: console) go there too: the same check of another site's requests.
        const api = isOperatorPath(request.url) || isConsolePath(request.url)
        if (operatorApi !== undefined && api) return operatorApi(request, response)
        if (Health.isHealthPath(request.url)) return health(request, response)
        if (Option.isSome(metrics) && Metrics.isMetricsPath(request.url)) return metrics.value(request, response)
        response.writeHead(426, { "content-type": "text/plain" })
        response.end(`the platform speaks WebSocket at ${path}\n`)
      })
      // One message per turn of the event loop: a client flooding small frames cannot starve the others.
      const sockets = new WebSocketServer({
        noServer: true,
        maxPayload: limits.maxPayload,
        perMessageDeflate: false,
        allowSynchronousEvents: false
      })
      server.on("upgrade", onUpgradeOf({
        sockets,
        live,
        limits,
        warn,
        accept: acceptOf(wire, live, limits, warn, (message) => Runtime.runFork(runtime)(Effect.logInfo(message))),
        capOf: (agentId) => wireLimits.maxConnectionsOf?.(agentId),
        authenticate: (headers, onExit) =>
          runCallback(authentication({ clientId: 0, rpc: anyRpc, payload: undefined, headers }), { onExit })
      }))
      const pinger = startPinger(live, limits.pingMillis)
      const frameTimer = startFrameTimer(live, limits.frameMillis, warn)
      const port = yield* listenOn(server, host, listen.port)
      address = { host, port }
      yield* Effect.addFinalizer(() =>
        Effect.async<void>((resume) => {
          clearInterval(pinger)
          clearInterval(frameTimer)
          for (const client of sockets.clients) client.terminate()
          sockets.close()
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
      )
      return { host, port }
    })
  )

/** The WebSocket URL of a platform served by `layerWebSocket`. */
export const url = Effect.map(Listening, ({ host, port }) => `ws://${host.includes(":") ? `[${host}]` : host}:${port}${path}`)
