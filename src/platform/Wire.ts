/**
 * The platform protocol's wire (design: Serving, The platform): `@effect/rpc`'s `RpcServer.Protocol`
 * and `RpcClient.Protocol` over a `ws` WebSocket, in the protocol's JSON framing
 * (protocol/Framing.ts). Handler lookup, middleware, spans and the typed client are `@effect/rpc`'s;
 * this module only moves frames, and keeps what the platform promises a connection: a frame is
 * read or refused with an answer, never thrown (design: Hostile clients), and the token travels
 * once, as the `authorization` header of the upgrade, which every call's headers then carry.
 */
import * as Headers from "@effect/platform/Headers"
import * as RpcClient from "@effect/rpc/RpcClient"
import { RpcClientError } from "@effect/rpc/RpcClientError"
import type { FromClientEncoded, FromServerEncoded } from "@effect/rpc/RpcMessage"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Cause, Effect, Exit, Mailbox, Runtime, type Scope } from "effect"
import { WebSocket } from "ws"
import * as Framing from "../protocol/Framing.js"
import { Unauthorized } from "../protocol/Protocol.js"

// ---------------------------------------------------------------------------------------------
// The platform's side.

/** A client's connection on the platform's side. */
export interface ServerConnection {
  /** A frame from the client. */
  readonly receive: (text: string) => void
  /** The client went away: every call and stream it has running is interrupted. */
  readonly close: () => void
}

/** The platform's side of the wire: `RpcServer`'s protocol, and the connections it answers. */
export interface Server {
  /** For `RpcServer.make`. */
  readonly protocol: RpcServer.Protocol["Type"]
  /** A client whose upgrade carried `headers`: its frames go to `receive`, its answers to `send`. */
  readonly connect: (headers: Headers.Input, send: (frame: string) => void) => ServerConnection
}

const describe = (error: unknown): string => error instanceof Error ? error.message : String(error)

/** The platform's side of the wire; its `protocol` is served by `RpcServer.make` in the same scope. */
export const makeServer: Effect.Effect<Server, never, Scope.Scope> = Effect.gen(function*() {
  const runtime = yield* Effect.runtime<never>()
  const runFork = Runtime.runFork(runtime)
  const disconnects = yield* Mailbox.make<number>()
  const clients = new Map<number, (response: FromServerEncoded) => void>()
  let nextClientId = 0
  // Set by `Protocol.make` before it returns (and buffered by it until `RpcServer` runs).
  let writeRequest!: (clientId: number, message: FromClientEncoded) => Effect.Effect<void>
  const protocol = yield* RpcServer.Protocol.make((write) => {
    writeRequest = write
    return Effect.succeed({
      disconnects,
      send: (clientId, response) => Effect.sync(() => clients.get(clientId)?.(response)),
      // The WebSocket server ends connections; a client's end of calls needs nothing more.
      end: () => Effect.void,
      clientIds: Effect.sync(() => new Set(clients.keys())),
      initialMessage: Effect.succeedNone,
      // Stream events are not acknowledged one chunk at a time: a client that does not read is
      // held back by `ListenOptions.maxBufferedBytes` on its whole connection.
      supportsAck: false,
      supportsTransferables: false,
      supportsSpanPropagation: true
    })
  })

  const connect = (headers: Headers.Input, send: (frame: string) => void): ServerConnection => {
    const clientId = nextClientId++
    const upgradeHeaders = Object.entries(Headers.fromInput(headers))
    /** The calls running: whether each is a stream. */
    const running = new Map<string, boolean>()
    let closed = false
    const write = (frame: string) => {
      if (!closed) send(frame)
    }
    let soon: Array<string> = []
    const writeSoon = (frame: string) => {
      soon.push(frame)
      if (soon.length > 1) return
      setImmediate(() => {
        const frames = soon
        soon = []
        for (const frame of frames) write(frame)
      })
    }
    clients.set(clientId, (response) => {
      if (response._tag !== "Exit") {
        const frame = Framing.serverFrame(response)
        if (frame !== undefined) write(frame)
        return
      }
      const stream = running.get(response.requestId)
      running.delete(response.requestId)
      const frame = Framing.serverFrame(response)
      if (frame === undefined) return
      // A call's success goes out once this turn of the event loop is done: the answer to a
      // CompleteToolCall must not go before the next call that answer lets out.
      if (stream === false && response.exit._tag === "Success") writeSoon(frame)
      else write(frame)
    })

    // The frames read go to `RpcServer` in order, from one fiber per connection (not one per frame).
    const inbox = Runtime.runSync(runtime)(Mailbox.make<readonly [number | undefined, FromClientEncoded]>())
    const forward = ([id, message]: readonly [number | undefined, FromClientEncoded]) =>
      closed ? Effect.void : Effect.catchAllCause(writeRequest(clientId, message), (cause) =>
        Effect.sync(() => {
          // Total: a defect `RpcServer` let through is this call's answer, never the connection's end.
          if (Cause.isInterruptedOnly(cause)) return
          if (message._tag === "Request") running.delete(message.id)
          write(Framing.refusal(id, `the frame could not be handled: ${describe(Cause.squash(cause))}`))
        }))
    runFork(Effect.whileLoop({
      while: () => !closed,
      body: () => Effect.flatMap(inbox.takeAll, ([frames]) => Effect.forEach(frames, forward, { discard: true })),
      step: () => undefined
    }))

    // Total (design: Hostile clients): whatever a frame holds, the worst it gets is a defect answer.
    const receive = (text: string) => {
      try {
        const frame = Framing.readClientFrame(text, upgradeHeaders)
        switch (frame._tag) {
          case "Refused":
            return write(frame.answer)
          case "Interrupt":
            return void inbox.unsafeOffer([undefined, frame])
          case "Request": {
            const { id, message } = frame
            if (running.has(message.id)) return write(Framing.refusal(id, `call id ${id} is already running`))
            running.set(message.id, Framing.isStream(message.tag))
            return void inbox.unsafeOffer([id, message])
          }
        }
      } catch (error) {
        write(Framing.refusal(undefined, `the frame could not be handled: ${describe(error)}`))
      }
    }

    const close = () => {
      if (closed) return
      closed = true
      clients.delete(clientId)
      inbox.unsafeDone(Exit.void)
      disconnects.unsafeOffer(clientId)
    }
    return { receive, close }
  }

  return { protocol, connect }
})

// ---------------------------------------------------------------------------------------------
// The client's side.

/** Where the client's wire connects, and the limits it keeps. */
export interface ClientOptions {
  /**
   * `ws://host:port/rpc`, or several (a cluster's runners): a connection that fails to open, or
   * drops, is followed by one to the next URL, in turn.
   */
  readonly urls: ReadonlyArray<string>
  /** The upgrade's headers: the token. */
  readonly headers: Readonly<Record<string, string>>
  /** The largest frame accepted from the platform. */
  readonly maxFrameBytes: number
  /** The largest frame sent: a call over it fails with `FrameTooLarge` (the cause of its `RpcClientError`), unsent. */
  readonly maxSendBytes: number
  /** How long opening the WebSocket may take, in milliseconds. */
  readonly handshakeTimeout: number
}

const unreachable = (message: string, cause?: unknown) => new RpcClientError({ reason: "Protocol", message, cause })

interface Connection {
  readonly socket: WebSocket
  readonly opened: Promise<WebSocket>
  open: boolean
}

/**
 * The client's side of the wire, for `RpcClient.make`. The connection opens with the first call and
 * again with the first call after it dropped; calls waiting when it drops fail with an
 * `RpcClientError`, and a refused token with one whose cause is the protocol's `Unauthorized`.
 */
export const makeClient = (options: ClientOptions): Effect.Effect<RpcClient.Protocol["Type"], never, Scope.Scope> =>
  RpcClient.Protocol.make((writeResponse) =>
    Effect.gen(function*() {
      // The frames read go to `RpcClient` in order, from one fiber (not one per frame).
      const inbox = yield* Mailbox.make<FromServerEncoded>()
      yield* Effect.forkScoped(Effect.forever(
        Effect.flatMap(inbox.takeAll, ([messages]) => Effect.forEach(messages, writeResponse, { discard: true }))
      ))
      const deliver = (message: FromServerEncoded) => void inbox.unsafeOffer(message)
      /** The calls sent and not answered yet, by request id (a defect's text names its call). */
      const calls = new Map<string, string>()
      let current: Connection | undefined
      let closed = false
      /** The URL the next connection opens to. */
      let next = 0

      const connect = (): Connection => {
        const url = options.urls[next % options.urls.length]!
        const socket = new WebSocket(url, {
          headers: options.headers,
          maxPayload: options.maxFrameBytes,
          handshakeTimeout: options.handshakeTimeout,
          perMessageDeflate: false
        })
        let settle: { resolve: (socket: WebSocket) => void; reject: (error: RpcClientError) => void } | undefined
        const connection: Connection = {
          socket,
          open: false,
          opened: new Promise<WebSocket>((resolve, reject) => void (settle = { resolve, reject }))
        }
        // Nobody may be waiting when it fails: the failure still counts as handled.
        connection.opened.catch(() => undefined)
        socket.on("open", () => {
          connection.open = true
          settle?.resolve(socket)
        })
        // The platform checks the token at the upgrade: a 401 is the protocol's Unauthorized, not an outage.
        socket.on("unexpected-response", (request, response) => {
          const status = response.statusCode ?? 0
          response.resume()
          request.destroy()
          if (current === connection) current = undefined
          settle?.reject(
            status === 401
              ? unreachable("missing or unknown platform token", new Unauthorized({ message: "missing or unknown platform token" }))
              : unreachable(`the platform refused the connection (${status} ${response.statusMessage ?? ""})`)
          )
        })
        socket.on("message", (data) => {
          const message = Framing.readServerFrame(String(data), (id) => calls.get(id))
          if (message === undefined) return
          if (message._tag === "Exit") calls.delete(message.requestId)
          deliver(message)
        })
        socket.on("error", (error) => {
          // Failing to open: the next call tries a new connection (ws also emits "close" after this).
          if (!connection.open && current === connection) current = undefined
          settle?.reject(unreachable(error.message))
        })
        socket.on("close", (code, reason) => {
          if (current === connection) current = undefined
          // Failed or dropped: the next connection tries the next URL (the same one if there is one).
          next++
          const why = `connection closed, code ${code}${reason.length > 0 ? `: ${String(reason)}` : ""}`
          settle?.reject(unreachable(why))
          calls.clear()
          // Every call waiting fails: the connection it went out on is gone.
          deliver({ _tag: "ClientProtocolError", error: unreachable(why) })
        })
        return connection
      }

      const open: Effect.Effect<WebSocket, RpcClientError> = Effect.suspend(() => {
        if (closed) return Effect.fail(unreachable("the client is closed"))
        const connection = current ??= connect()
        if (connection.open) return Effect.succeed(connection.socket)
        return Effect.tryPromise({
          try: () => connection.opened,
          catch: (error) => error instanceof RpcClientError ? error : unreachable(describe(error))
        })
      })

      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          closed = true
          current?.socket.close()
          current = undefined
        })
      )

      const send = (request: FromClientEncoded): Effect.Effect<void, RpcClientError> => {
        switch (request._tag) {
          case "Request": {
            const frame = Framing.callFrame(request)
            const bytes = Framing.bytesOver(frame, options.maxSendBytes)
            if (bytes !== undefined) {
              const tooLarge = new Framing.FrameTooLarge({ call: request.tag, bytes, limit: options.maxSendBytes })
              return Effect.fail(unreachable(tooLarge.message, tooLarge))
            }
            return Effect.map(open, (socket) => {
              calls.set(request.id, request.tag)
              socket.send(frame)
            })
          }
          case "Interrupt":
            return Effect.sync(() => {
              // Never a connection opened for it: a call whose connection dropped is gone with it.
              if (!calls.delete(request.requestId) || current?.open !== true) return
              current.socket.send(Framing.cancelFrame(request.requestId))
            })
          default:
            return Effect.void
        }
      }

      return { send, supportsAck: false, supportsTransferables: false }
    })
  )
