/**
 * The platform's side of the protocol's wire (design: Serving, The platform): `@effect/rpc`'s
 * `RpcServer.Protocol` over the WebSocket connections of WebSocket.ts, in the protocol's JSON framing
 * (protocol/Framing.ts). Handler lookup, middleware and spans are `@effect/rpc`'s; this module only
 * moves frames, and keeps what the platform promises a connection: a frame is read or refused with an
 * answer, never thrown (design: Hostile clients), and the token travels once, as the `authorization`
 * header of the upgrade, which every call's headers then carry. The client's side is the serving
 * side's own (internal/serve/wire.ts): the two share only protocol/.
 *
 * Nothing of its own to stop: the WebSocket server (WebSocket.ts) ends the connections, each `close`
 * ending its reader and telling `RpcServer`, whose fiber its scope interrupts.
 */
import * as Headers from "@effect/platform/Headers"
import type { FromClientEncoded, FromServerEncoded } from "@effect/rpc/RpcMessage"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Cause, Context, Effect, Exit, Mailbox, Option, Runtime, Schema, type Scope } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import { Ids } from "../Ids.js"
import * as Framing from "../protocol/Framing.js"
import { ManifestRejected, PlatformRpcs } from "../protocol/Protocol.js"
import * as Toolkit from "../Toolkit.js"

/**
 * The header every call of a connection carries: the connection's id, set by the platform (one a
 * client sends of that name is replaced). An answer is taken only from the connection its call was
 * delivered to (design: Hostile clients); a call without it (in process) is from one connection.
 */
export const connectionHeader = "x-agent-tools-connection"

/** The connection in process (`PlatformClient.layerTest`), whose calls carry no connection header: there is one, always open. */
export const inProcessConnection = "in-process"

/**
 * What the wire refuses before a handler decodes it (design: Hostile clients): a `Register` frame
 * too large for a manifest of `maxManifestBytes` (decoding 2 MB of manifest holds the loop ~25 ms).
 * And an agent's own cap on its connections (`AgentLimits.maxConnections`), which the WebSocket server's upgrade
 * checks instead of its `maxConnectionsPerAgent`. Set by the handlers' layer (Handlers.ts, `layerOf`) from the
 * platform's options; none by default.
 */
export class WireLimits extends Context.Reference<WireLimits>()("agent-tools/platform/WireLimits", {
  defaultValue: (): {
    readonly maxManifestBytes: number
    readonly maxConnectionsOf?: ((agentId: string) => number | undefined) | undefined
  } => ({ maxManifestBytes: Infinity })
}) {}

/**
 * Who learns that a connection opened or closed (design: The platform): a call given to a serving process on
 * a connection that closed waits a while for the process to come back, then goes to another. Set by the
 * handlers' layer (Handlers.ts, `layerOf`); by default nobody.
 */
export class WireConnections extends Context.Reference<WireConnections>()("agent-tools/platform/WireConnections", {
  defaultValue: (): {
    /** With the way to write a frame on it (`StreamWriters`). */
    readonly opened: (connectionId: string, write: (frame: string) => void) => void
    readonly closed: (connectionId: string) => void
  } => ({ opened: () => undefined, closed: () => undefined })
}) {}

/**
 * The header a stream call carries its frame's id in, set by the wire (one a client sends of that name is
 * dropped): with its connection's, what its events need to be written straight to the connection.
 */
export const streamHeader = "x-agent-tools-stream"

/** Writes a stream call's next events, encoded, on its connection (`StreamWriters`). */
export type EventsWriter = (events: NonEmptyReadonlyArray<unknown>) => void

/**
 * The connections' ways to write a frame, by connection id, kept from what the wire tells (`WireConnections`):
 * a stream call's events written as they come, in the frame `RpcServer` would write (`{ id, events }`), with no
 * fiber between them and the socket. Its end still goes through `RpcServer`, after its last events.
 */
export class StreamWriters {
  private readonly writes = new Map<string, (frame: string) => void>()

  opened(connectionId: string, write: (frame: string) => void): void {
    this.writes.set(connectionId, write)
  }

  closed(connectionId: string): void {
    this.writes.delete(connectionId)
  }

  /** What writes the events of the stream call whose headers are `headers`; undefined for one not on a connection. */
  writerOf(headers: Headers.Headers): EventsWriter | undefined {
    const connection = headers[connectionHeader]
    const requestId = headers[streamHeader]
    const write = connection === undefined ? undefined : this.writes.get(connection)
    if (connection === undefined || write === undefined || requestId === undefined) return undefined
    // Not once the connection closed (news can wait past it, TaskDelivery.ts): its client attaches again for them.
    return (values) => {
      if (this.writes.get(connection) === write) write(Framing.serverFrame({ _tag: "Chunk", requestId, values })!)
    }
  }
}

/**
 * A call the wire answers itself, not through `RpcServer` (design: Serving): given the frame's payload as it came
 * and the headers `RpcServer` would give its handler (a stream's with `streamHeader`), it takes the call, gives
 * its end to `done` (the exit as `RpcServer` encodes it; a stream's events it writes itself, `StreamWriters`) and
 * returns the way to stop it (the client's cancel, the connection's close); or returns undefined and leaves it to
 * `RpcServer` (a payload that does not decode, a token not the agent's: `RpcServer` answers those as it answers any
 * call). A frame with a trace to continue always goes to `RpcServer`, whose span continues it.
 */
export type DirectCall = (
  payload: unknown,
  headers: Headers.Headers,
  done: (exit: Schema.ExitEncoded<unknown, unknown, unknown>) => void
) => (() => void) | undefined

/** The calls the wire answers itself, by name (Handlers.ts, `layerOf`); by default none. */
export class WireDirect extends Context.Reference<WireDirect>()("agent-tools/platform/WireDirect", {
  defaultValue: (): ReadonlyMap<string, DirectCall> => new Map()
}) {}

/** Room in a `Register` frame for what is not its manifest (the envelope, the ids, the hash). */
const registerEnvelopeBytes = 64 * 1024

/** The answer refusing a `Register` frame of `length` bytes (or characters): its manifest is over `max` bytes. */
const manifestTooLarge = (id: number, length: number, max: number): string =>
  JSON.stringify({
    id,
    error: Schema.encodeSync(ManifestRejected)(
      new ManifestRejected({
        violations: [
          new Toolkit.Violation({
            rule: "manifest-bytes",
            message:
              `the Register frame is at least ${length} bytes of JSON, over the platform's maxManifestBytes (${max})`
          })
        ]
      })
    )
  })

/** A client's connection on the platform's side. */
export interface ServerConnection {
  /** A frame from the client: its text, or its UTF-8 bytes (as the WebSocket gives them). */
  readonly receive: (frame: string | Uint8Array) => void
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

/** What the connections share: the clients' senders, the next client id, and the way into `RpcServer`. */
interface Hub {
  /** The calls the wire carries. */
  readonly group: Framing.Calls
  readonly runtime: Runtime.Runtime<never>
  /** Makes each connection's id: unguessable, so that no client names another's. */
  readonly ids: Ids["Type"]
  readonly limits: WireLimits["Type"]
  readonly connections: WireConnections["Type"]
  readonly direct: WireDirect["Type"]
  readonly clients: Map<number, (response: FromServerEncoded) => void>
  readonly disconnects: Mailbox.Mailbox<number>
  nextClientId: number
  /** Set by `Protocol.make` before it returns (and buffered by it until `RpcServer` runs). */
  writeRequest: (clientId: number, message: FromClientEncoded) => Effect.Effect<void>
}

// --- the protocol: RpcServer's view of the connections ---

/**
 * The wire for the calls of `group` (`PlatformRpcs` for the platform; another group on the same framing,
 * for the serve bench's rpc echo); its `protocol` is served by `RpcServer.make` in the same scope.
 */
export const makeServerFor = (group: Framing.Calls): Effect.Effect<Server, never, Scope.Scope> => Effect.gen(function*() {
  const hub: Hub = {
    group,
    runtime: yield* Effect.runtime<never>(),
    ids: yield* Ids,
    limits: yield* WireLimits,
    connections: yield* WireConnections,
    direct: yield* WireDirect,
    clients: new Map(),
    disconnects: yield* Mailbox.make<number>(),
    nextClientId: 0,
    writeRequest: () => Effect.void
  }
  const protocol = yield* RpcServer.Protocol.make((write) => {
    hub.writeRequest = write
    return Effect.succeed({
      disconnects: hub.disconnects,
      send: (clientId, response) => Effect.sync(() => hub.clients.get(clientId)?.(response)),
      // The WebSocket server ends connections; a client's end of calls needs nothing more.
      end: () => Effect.void,
      clientIds: Effect.sync(() => new Set(hub.clients.keys())),
      initialMessage: Effect.succeedNone,
      // Stream events are not acknowledged one chunk at a time: a client that does not read is
      // held back by `ListenOptions.maxBufferedBytes` on its whole connection.
      supportsAck: false,
      supportsTransferables: false,
      supportsSpanPropagation: true
    })
  })
  return { protocol, connect: (headers, send) => connectTo(hub, headers, send) }
})

/** The platform's side of the wire; its `protocol` is served by `RpcServer.make` in the same scope. */
export const makeServer: Effect.Effect<Server, never, Scope.Scope> = makeServerFor(PlatformRpcs)

// --- a connection: its answers out, its frames in ---

/** A client whose upgrade carried `headers`: its answers go to `send`, its frames to `RpcServer` in order. */
const connectTo = (hub: Hub, headers: Headers.Input, send: (frame: string) => void): ServerConnection => {
  const clientId = hub.nextClientId++
  const connectionId = hub.ids.make("connection")
  const upgradeHeaders = Object.entries(
    Headers.set(Headers.remove(Headers.fromInput(headers), streamHeader), connectionHeader, connectionId)
  )
  /** The calls running: whether each is a stream. */
  const running = new Map<string, boolean>()
  /** The calls running that the wire answers itself (`WireDirect`): the way to stop each. */
  const stops = new Map<string, () => void>()
  let closed = false
  const write = (frame: string) => {
    if (!closed) send(frame)
  }
  const answer = answerer(running, write)
  hub.clients.set(clientId, answer)
  // What a call the wire answers itself (`WireDirect`) reads: the headers every call of the connection carries.
  const callHeaders = Headers.fromInput(upgradeHeaders)
  hub.connections.opened(connectionId, write)

  // The frames read go to `RpcServer` in order, from one fiber per connection (not one per frame).
  const inbox = Runtime.runSync(hub.runtime)(Mailbox.make<readonly [number | undefined, FromClientEncoded]>())
  const forward = ([id, message]: readonly [number | undefined, FromClientEncoded]) =>
    closed ? Effect.void : Effect.catchAllCause(hub.writeRequest(clientId, message), (cause) =>
      Effect.sync(() => {
        // Total: a defect `RpcServer` let through is this call's answer, never the connection's end.
        if (Cause.isInterruptedOnly(cause)) return
        if (message._tag === "Request") running.delete(message.id)
        write(Framing.refusal(id, `the frame could not be handled: ${describe(Cause.squash(cause))}`))
      }))
  Runtime.runFork(hub.runtime)(Effect.whileLoop({
    while: () => !closed,
    body: () => Effect.flatMap(inbox.takeAll, ([frames]) => Effect.forEach(frames, forward, { discard: true })),
    step: () => undefined
  }))

  /**
   * A `Register` frame too large for a manifest of `maxManifestBytes` is refused (a character is at
   * least a byte: whatever it holds, its manifest is over): read from the frame's start, before it is
   * decoded, when it starts with its id and call (as ours do), else once it is parsed.
   */
  const { maxManifestBytes } = hub.limits
  const oversizeRegister = (data: string | Uint8Array, parsed?: { readonly id: number; readonly call: string }) => {
    if (data.length <= maxManifestBytes + registerEnvelopeBytes) return false
    const call = parsed ??
      Framing.leadingCall(typeof data === "string" ? data.slice(0, 80) : new TextDecoder().decode(data.subarray(0, 80)))
    if (call?.call !== "Register") return false
    write(manifestTooLarge(call.id, data.length, maxManifestBytes))
    return true
  }

  // Total (design: Hostile clients): whatever a frame holds, the worst it gets is a defect answer.
  const receive = (data: string | Uint8Array) => {
    try {
      if (oversizeRegister(data)) return
      const frame = typeof data === "string"
        ? Framing.readClientFrame(data, upgradeHeaders, hub.group)
        : Framing.readClientBytes(data, upgradeHeaders, hub.group)
      switch (frame._tag) {
        case "Refused":
          return write(frame.answer)
        case "Interrupt": {
          const stop = stops.get(frame.requestId)
          return void (stop === undefined ? inbox.unsafeOffer([undefined, frame]) : stop())
        }
        case "Request": {
          const { id, message } = frame
          if (running.has(message.id)) return write(Framing.refusal(id, `call id ${id} is already running`))
          if (oversizeRegister(data, { id, call: message.tag })) return
          const stream = Framing.isStream(message.tag, hub.group)
          if (answeredHere(hub, { inbox, running, stops, headers: callHeaders, answer }, message, stream)) return
          running.set(message.id, stream)
          // A stream's handler may write its events itself (`StreamWriters`): it is told the frame's id.
          return void inbox.unsafeOffer([
            id,
            stream ? { ...message, headers: [...message.headers, [streamHeader, message.id]] } : message
          ])
        }
      }
    } catch (error) {
      write(Framing.refusal(undefined, `the frame could not be handled: ${describe(error)}`))
    }
  }

  const close = () => {
    if (closed) return
    closed = true
    hub.clients.delete(clientId)
    inbox.unsafeDone(Exit.void)
    hub.disconnects.unsafeOffer(clientId)
    hub.connections.closed(connectionId)
    // As `RpcServer` interrupts the calls of a client gone: a stream's scope ends (its task learns it).
    for (const stop of [...stops.values()]) stop()
  }
  return { receive, close }
}

/**
 * A call the wire answers itself (`WireDirect`): taken at once, with no fiber of `RpcServer`'s, when no frame
 * read before it on its connection still waits for `RpcServer` (a connection's calls are taken in the order they came).
 * Kept in `stops` until its end, which a cancel frame for it or the connection's close hastens.
 */
const answeredHere = (
  hub: Hub,
  connection: {
    readonly inbox: Mailbox.Mailbox<readonly [number | undefined, FromClientEncoded]>
    readonly running: Map<string, boolean>
    readonly stops: Map<string, () => void>
    readonly headers: Headers.Headers
    readonly answer: (response: FromServerEncoded) => void
  },
  message: Extract<FromClientEncoded, { _tag: "Request" }>,
  stream: boolean
): boolean => {
  const direct = message.traceId === undefined ? hub.direct.get(message.tag) : undefined
  if (direct === undefined || Option.getOrElse(connection.inbox.unsafeSize(), () => 1) > 0) return false
  const { running, stops } = connection
  const requestId = message.id
  running.set(requestId, stream)
  let ended = false
  const stop = direct(
    message.payload,
    stream ? Headers.set(connection.headers, streamHeader, requestId) : connection.headers,
    (exit) => {
      ended = true
      stops.delete(requestId)
      connection.answer({ _tag: "Exit", requestId, exit })
    }
  )
  if (stop === undefined) running.delete(requestId)
  else if (!ended) stops.set(requestId, stop)
  return stop !== undefined
}

/** `RpcServer`'s answers to one client, as frames; a call's success is held to the end of the event loop's turn. */
const answerer = (running: Map<string, boolean>, write: (frame: string) => void) => {
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
  return (response: FromServerEncoded) => {
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
  }
}
