/**
 * The serving side's half of the protocol's wire (design: Serving): `@effect/rpc`'s `RpcClient.Protocol`
 * over a `ws` WebSocket, in the protocol's JSON framing (protocol/Framing.ts), for `PlatformClient`.
 * The typed client is `@effect/rpc`'s, but for the calls on every delivery (`Direct`: the task streams and the
 * answers), read and written here from the socket's frames with the same Schemas. The token travels once, as the
 * `authorization` header of the upgrade. The platform's half is its own (platform/Wire.ts): the two
 * share only protocol/.
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcClient from "@effect/rpc/RpcClient"
import { RpcClientError } from "@effect/rpc/RpcClientError"
import type { FromClientEncoded, FromServerEncoded } from "@effect/rpc/RpcMessage"
import * as RpcSchema from "@effect/rpc/RpcSchema"
import { Effect, Either, Exit, Mailbox, Option, Schedule, Schema, SchemaAST, Scope, type Tracer } from "effect"
import { WebSocket } from "ws"
import * as Framing from "../../protocol/Framing.js"
import * as Plain from "../util/plain.js"
import { listening } from "../util/tracing.js"
import * as PlainEvents from "../../protocol/plainEvents.js"
import { TaskEvent, Unauthorized, unknownTokenMessage } from "../../protocol/Protocol.js"

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
  /**
   * With several URLs: while connected to another than the first (the preferred one, after a failover),
   * how often, in milliseconds, the first is tried; once it answers, the connection moves back to it
   * (`returnToPreferred`). 0: never.
   */
  readonly preferredEvery?: number | undefined
}

const describe = (error: unknown): string => error instanceof Error ? error.message : String(error)

const unreachable = (message: string, cause?: unknown) => new RpcClientError({ reason: "Protocol", message, cause })

interface Connection {
  readonly socket: WebSocket
  readonly opened: Promise<WebSocket>
  open: boolean
}

/** What the connections of one client share, one after another. */
interface Link {
  readonly options: ClientOptions
  /** Hands a frame read to `RpcClient`, in order. */
  readonly deliver: (message: FromServerEncoded) => void
  /** The calls sent and not answered yet, by request id (a defect's text names its call). */
  readonly calls: Map<string, string>
  /** The direct calls and streams waiting (`Direct`), by their own ids. */
  readonly direct: Map<number, DirectEntry>
  current: Connection | undefined
  closed: boolean
  /** The URL the next connection opens to. */
  next: number
}

// --- a connection ---

/** A new connection to the link's next URL; its frames go to `RpcClient`, its end fails the calls waiting. */
const connect = (link: Link): Connection => {
  const { calls, deliver, options } = link
  const url = options.urls[link.next % options.urls.length]!
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
    if (link.current === connection) link.current = undefined
    settle?.reject(
      status === 401
        ? unreachable(unknownTokenMessage, new Unauthorized({ message: unknownTokenMessage }))
        : unreachable(`the platform refused the connection (${status} ${response.statusMessage ?? ""})`)
    )
  })
  socket.on("message", (data) => {
    const text = String(data)
    if (link.direct.size > 0 && readDirect(link, text)) return
    const message = Framing.readServerFrame(text, (id) => calls.get(id))
    if (message === undefined) return
    if (message._tag === "Exit") calls.delete(message.requestId)
    deliver(message)
  })
  socket.on("error", (error) => {
    // Failing to open: the next call tries a new connection (ws also emits "close" after this).
    if (!connection.open && link.current === connection) link.current = undefined
    settle?.reject(unreachable(error.message))
  })
  socket.on("close", (code, reason) => {
    if (link.current === connection) link.current = undefined
    // Failed or dropped: the next connection tries the next URL (the same one if there is one).
    link.next++
    const why = `connection closed, code ${code}${reason.length > 0 ? `: ${String(reason)}` : ""}`
    settle?.reject(unreachable(why))
    calls.clear()
    // Every call waiting fails: the connection it went out on is gone.
    failDirect(link, unreachable(why))
    deliver({ _tag: "ClientProtocolError", error: unreachable(why) })
  })
  return connection
}

/** The open connection, opened now if there is none. */
const open = (link: Link): Effect.Effect<WebSocket, RpcClientError> =>
  Effect.suspend(() => {
    if (link.closed) return Effect.fail(unreachable("the client is closed"))
    const connection = link.current ??= connect(link)
    if (connection.open) return Effect.succeed(connection.socket)
    return Effect.tryPromise({
      try: () => connection.opened,
      catch: (error) => error instanceof RpcClientError ? error : unreachable(describe(error))
    })
  })

// --- sending ---

/** A call goes out as a frame (one over `maxSendBytes` fails unsent), an interruption as a cancel frame. */
const sendOn = (link: Link) => (request: FromClientEncoded): Effect.Effect<void, RpcClientError> => {
  const { calls, options } = link
  switch (request._tag) {
    case "Request": {
      const frame = Framing.callFrame(request)
      const bytes = Framing.bytesOver(frame, options.maxSendBytes)
      if (bytes !== undefined) {
        const tooLarge = new Framing.FrameTooLarge({ call: request.tag, bytes, limit: options.maxSendBytes })
        return Effect.fail(unreachable(tooLarge.message, tooLarge))
      }
      return Effect.map(open(link), (socket) => {
        calls.set(request.id, request.tag)
        socket.send(frame)
      })
    }
    case "Interrupt":
      return Effect.sync(() => {
        // Never a connection opened for it: a call whose connection dropped is gone with it.
        if (!calls.delete(request.requestId) || link.current?.open !== true) return
        link.current.socket.send(Framing.cancelFrame(request.requestId))
      })
    default:
      return Effect.void
  }
}

// --- direct calls ---

/**
 * A call or stream sent as its frame and answered straight from the socket's frames, without `RpcClient`
 * (its fiber a call, its queue and the fiber that hands it frames): a stream's events are decoded and offered
 * to its mailbox as their frame is read, a call's answer resumes its caller. The same frames and Schemas as
 * `RpcClient`'s; the ids their own, far past the ones `RpcClient` counts from 0.
 */
export interface Direct {
  /** The call `rpc` with `payload`: its success, its typed error, or an `RpcClientError` (not sent, or the connection gone). */
  readonly call: (rpc: Rpc.AnyWithProps, payload: unknown) => Effect.Effect<unknown, unknown>
  /**
   * The stream `rpc` with `payload`, its events in a mailbox for as long as the scope lives (closing it sends the
   * cancel, unless an event `last` accepts came: the platform ends the stream after it, and its end is awaited
   * without a frame); `typed` makes its end the caller's (an `RpcClientError` among its failures).
   */
  readonly stream: (
    rpc: Rpc.AnyWithProps,
    payload: unknown,
    typed: (exit: Exit.Exit<void, unknown>) => Exit.Exit<void, unknown>,
    last?: (event: unknown) => boolean
  ) => Effect.Effect<Mailbox.ReadonlyMailbox<unknown, unknown>, never, Scope.Scope>
}

type DirectEntry =
  | { readonly _tag: "Call"; readonly rpc: Rpc.AnyWithProps; readonly resume: (exit: Exit.Exit<unknown, unknown>) => void }
  | {
    readonly _tag: "Stream"
    readonly rpc: Rpc.AnyWithProps
    readonly mailbox: Mailbox.Mailbox<unknown, unknown>
    readonly typed: (exit: Exit.Exit<void, unknown>) => Exit.Exit<void, unknown>
    readonly decode: (events: unknown) => Either.Either<ReadonlyArray<unknown>, unknown>
    readonly last: ((event: unknown) => boolean) | undefined
    /** Its last event came: the stream's end follows, and is not cancelled. */
    ending: boolean
  }

/** The ids of direct calls: past any `RpcClient` counts to, within the 15 digits the platform reads first. */
let directIds = 100_000_000_000_000

const chunkDecoders = new WeakMap<Rpc.AnyWithProps, (events: unknown) => Either.Either<ReadonlyArray<unknown>, unknown>>()
/** A stream's events as `RpcClient` decodes them (its success Schema, a non-empty array). */
const chunkDecoder = (rpc: Rpc.AnyWithProps) => {
  let decode = chunkDecoders.get(rpc)
  if (decode === undefined) {
    const schemas = Option.getOrThrow(RpcSchema.getStreamSchemas(rpc.successSchema.ast))
    const event = schemas.success as Schema.Schema<unknown, unknown, never>
    const decodeAll = Schema.decodeUnknownEither(Schema.NonEmptyArray(event))
    // Each event as Effect decodes the array's (one by one), most without its parser (`Plain`); one refused: the
    // array by Effect's parser, for its words.
    const byHand = event.ast === TaskEvent.ast ? PlainEvents.decoders : undefined
    const decodeOne = Plain.orParse(Plain.plainTagged(event.ast, byHand), Schema.decodeUnknownEither(event))
    decode = (events) => {
      if (!Array.isArray(events) || events.length === 0) return decodeAll(events)
      const decoded = new Array<unknown>(events.length)
      for (let i = 0; i < events.length; i++) {
        const one = decodeOne(events[i])
        if (Either.isLeft(one)) return decodeAll(events)
        decoded[i] = one.right
      }
      return Either.right(decoded)
    }
    chunkDecoders.set(rpc, decode)
  }
  return decode
}

/** A call's outcome as `RpcClient` decodes it (`Rpc.exitSchema`); a frame that does not decode is a defect. */
const decodeExit = (rpc: Rpc.AnyWithProps, encoded: unknown): Exit.Exit<unknown, unknown> =>
  Either.match(Schema.decodeUnknownEither(Rpc.exitSchema(rpc as any) as unknown as Schema.Schema<Exit.Exit<unknown, unknown>, unknown, never>)(encoded), {
    onLeft: (error) => Exit.die(error),
    onRight: (exit) => exit
  })

const returnsVoid = (rpc: Rpc.AnyWithProps) => SchemaAST.isVoidKeyword(rpc.successSchema.ast)

const leadingId = /^\{"id":(\d{1,16})[,}]/

/** Reads a frame of a direct call or stream (its id first, as the platform writes it); whether it was one. */
const readDirect = (link: Link, text: string): boolean => {
  const found = leadingId.exec(text)
  const id = found === null ? undefined : Number(found[1])
  const entry = id === undefined ? undefined : link.direct.get(id)
  if (entry === undefined) return false
  let frame: Record<string, unknown>
  try {
    frame = JSON.parse(text)
  } catch {
    return true
  }
  if ("events" in frame) {
    if (entry._tag !== "Stream" || !Array.isArray(frame.events) || frame.events.length === 0) return true
    const events = entry.decode(frame.events)
    if (Either.isRight(events)) {
      if (entry.last !== undefined && events.right.some(entry.last)) entry.ending = true
      entry.mailbox.unsafeOfferAll(events.right)
      return true
    }
    link.direct.delete(id!)
    entry.mailbox.unsafeDone(entry.typed(Exit.die(events.left)))
    return true
  }
  link.direct.delete(id!)
  // A void call's success (an answer's acknowledgment) has nothing to decode.
  if (entry._tag === "Call" && frame.ok === undefined && !("error" in frame) && !("defect" in frame) && returnsVoid(entry.rpc)) {
    entry.resume(Exit.void)
    return true
  }
  const encoded = "error" in frame
    ? { _tag: "Failure", cause: { _tag: "Fail", error: frame.error } }
    : "defect" in frame
    ? (Framing.readServerFrame(text, () => entry.rpc._tag) as Extract<FromServerEncoded, { _tag: "Exit" }>).exit
    : { _tag: "Success", value: frame.ok }
  const exit = decodeExit(entry.rpc, encoded)
  if (entry._tag === "Call") entry.resume(exit)
  else entry.mailbox.unsafeDone(entry.typed(Exit.asVoid(exit)))
  return true
}

/** The connection is gone: every direct call and stream waiting fails with `error`. */
const failDirect = (link: Link, error: RpcClientError) => {
  const entries = [...link.direct.values()]
  link.direct.clear()
  for (const entry of entries) {
    if (entry._tag === "Call") entry.resume(Exit.fail(error))
    else entry.mailbox.unsafeDone(entry.typed(Exit.fail(error)))
  }
}

/** A direct call's frame (its payload encoded as `RpcClient` encodes it), or why it cannot go. */
const directFrame = (
  link: Link,
  rpc: Rpc.AnyWithProps,
  id: number,
  payload: unknown,
  span: { readonly traceId: string; readonly spanId: string; readonly sampled: boolean } | undefined
): Effect.Effect<string, RpcClientError> => {
  let encoded: Either.Either<unknown, unknown>
  try {
    const made = rpc.payloadSchema.make === undefined ? payload : rpc.payloadSchema.make(payload)
    encoded = Schema.encodeUnknownEither(rpc.payloadSchema as Schema.Schema<unknown, unknown, never>)(made)
  } catch (error) {
    encoded = Either.left(error)
  }
  if (Either.isLeft(encoded)) return Effect.die(encoded.left)
  const frame = Framing.callFrame({
    _tag: "Request",
    id: String(id),
    tag: rpc._tag,
    payload: encoded.right,
    headers: [],
    ...(span?.sampled === true ? { traceId: span.traceId, spanId: span.spanId, sampled: true } : {})
  })
  const bytes = Framing.bytesOver(frame, link.options.maxSendBytes)
  if (bytes === undefined) return Effect.succeed(frame)
  const tooLarge = new Framing.FrameTooLarge({ call: rpc._tag, bytes, limit: link.options.maxSendBytes })
  return Effect.fail(unreachable(tooLarge.message, tooLarge))
}

/**
 * Tells the platform a direct call or stream is no longer wanted, if it still waits and its connection is up; a
 * stream whose last event came is left to its end, which the platform is writing (no cancel crosses it).
 */
const cancelDirect = (link: Link, id: number) => {
  const entry = link.direct.get(id)
  if (entry === undefined || (entry._tag === "Stream" && entry.ending)) return
  link.direct.delete(id)
  if (link.current?.open !== true) return
  link.current.socket.send(Framing.cancelFrame(String(id)))
}

/**
 * A direct call or stream's span, as `RpcClient` makes one, when a tracer listens (util/tracing.ts); none otherwise,
 * and so no trace in its frame: the platform then answers a `CompleteToolCall` on the wire itself (platform/Wire.ts).
 */
const spanOf = (rpc: Rpc.AnyWithProps): Effect.Effect<Tracer.Span | undefined, never, Scope.Scope> =>
  Effect.withFiberRuntime((fiber) =>
    listening(fiber)
      ? Effect.makeSpanScoped(`RpcClient.${rpc._tag}`, { captureStackTrace: false })
      : noSpan
  )
const noSpan: Effect.Effect<Tracer.Span | undefined> = Effect.as(Effect.void, undefined)

const directCall = (link: Link, rpc: Rpc.AnyWithProps, payload: unknown, span: Tracer.Span | undefined) => {
  const id = directIds++
  return Effect.flatMap(directFrame(link, rpc, id, payload, span), (frame) =>
    Effect.flatMap(open(link), (socket) =>
      Effect.async<unknown, unknown>((resume) => {
        link.direct.set(id, { _tag: "Call", rpc, resume: (exit) => resume(exit) })
        socket.send(frame)
        return Effect.sync(() => cancelDirect(link, id))
      })))
}

const makeDirect = (link: Link): Direct => ({
  call: (rpc, payload) =>
    Effect.withFiberRuntime((fiber) =>
      listening(fiber)
        ? Effect.useSpan(`RpcClient.${rpc._tag}`, { captureStackTrace: false }, (span) => directCall(link, rpc, payload, span))
        : directCall(link, rpc, payload, undefined)
    ),
  stream: (rpc, payload, typed, last) => directStream(link, rpc, payload, typed, last)
})

/** A direct stream (`Direct.stream`), by one generator function for every stream (design: Generators on hot paths). */
const directStream = Effect.fnUntraced(function*(
  link: Link,
  rpc: Rpc.AnyWithProps,
  payload: unknown,
  typed: (exit: Exit.Exit<void, unknown>) => Exit.Exit<void, unknown>,
  last: ((event: unknown) => boolean) | undefined
) {
  const span = yield* spanOf(rpc)
  const id = directIds++
  const mailbox = yield* Mailbox.make<unknown, unknown>()
  // On the scope itself: `Effect.addFinalizer` would also restore this fiber's references around it, for nothing.
  yield* Scope.addFinalizer(yield* Effect.scope, Effect.sync(() => cancelDirect(link, id)))
  const sent = Effect.flatMap(directFrame(link, rpc, id, payload, span), (frame) =>
    Effect.map(open(link), (socket) => {
      link.direct.set(id, { _tag: "Stream", rpc, mailbox, typed, decode: chunkDecoder(rpc), last, ending: false })
      socket.send(frame)
    }))
  // Sent from the caller's fiber: a connection that cannot open ends the mailbox, as a dropped one does.
  const exit = yield* Effect.exit(sent)
  if (Exit.isFailure(exit)) mailbox.unsafeDone(typed(exit))
  return mailbox
})

// --- back to the preferred URL ---

/** Whether a WebSocket to `url` opens (the token accepted), within the handshake timeout; closed at once. */
const answers = (link: Link, url: string): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const socket = new WebSocket(url, { headers: link.options.headers, handshakeTimeout: link.options.handshakeTimeout })
    const done = (ok: boolean) => {
      socket.removeAllListeners()
      socket.on("error", () => undefined)
      socket.terminate()
      resume(Effect.succeed(ok))
    }
    socket.on("open", () => done(true))
    socket.on("error", () => done(false))
    socket.on("unexpected-response", () => done(false))
    return Effect.sync(() => done(false))
  })

/**
 * Spreading again after a failover (design: Serving): a client whose connection went on to another URL
 * than its first tries the first now and then, and once it answers closes its connection, as a
 * dropped one: the next call connects to the first URL, and the serving process registers and
 * re-attaches its tasks there, as after a failover. So serving processes given their runners in
 * different orders spread over them again after a rolling restart, rather than stay on the last one up.
 */
const returnToPreferred = (link: Link): Effect.Effect<void> =>
  Effect.suspend(() => {
    const connection = link.current
    const preferred = link.options.urls[0]!
    if (link.closed || connection === undefined || !connection.open || link.next % link.options.urls.length === 0) {
      return Effect.void
    }
    return Effect.flatMap(answers(link, preferred), (ok) =>
      Effect.suspend(() => {
        if (!ok || link.closed || link.current !== connection) return Effect.void
        // Closed as a drop is: "close" moves `next` on by one; set it so that it lands on the first URL.
        link.next = -1
        connection.socket.close(1000, "moving back to the preferred platform URL")
        return Effect.logInfo(`the platform at ${preferred} answers again: moving back to it`)
      }))
  })

// --- the protocol ---

/**
 * The client's side of the wire, for `RpcClient.make`. The connection opens with the first call and
 * again with the first call after it dropped; calls waiting when it drops fail with an
 * `RpcClientError`, and a refused token with one whose cause is the protocol's `Unauthorized`.
 * Shutdown: the scope closes the connection, then stops the fiber that hands frames to `RpcClient`.
 */
export const makeClient = (options: ClientOptions): Effect.Effect<RpcClient.Protocol["Type"], never, Scope.Scope> =>
  Effect.map(makeClientWith(options), ({ protocol }) => protocol)

/** `makeClient`, with the direct calls and streams on the same connections (`Direct`). */
export const makeClientWith = (
  options: ClientOptions
): Effect.Effect<{ readonly protocol: RpcClient.Protocol["Type"]; readonly direct: Direct }, never, Scope.Scope> => {
  let direct: Direct | undefined
  return Effect.map(
    RpcClient.Protocol.make((writeResponse) =>
    Effect.gen(function*() {
      // The frames read go to `RpcClient` in order, from one fiber (not one per frame).
      const inbox = yield* Mailbox.make<FromServerEncoded>()
      yield* Effect.forkScoped(Effect.forever(
        Effect.flatMap(inbox.takeAll, ([messages]) => Effect.forEach(messages, writeResponse, { discard: true }))
      ))
      const link: Link = {
        options,
        deliver: (message) => void inbox.unsafeOffer(message),
        calls: new Map(),
        direct: new Map(),
        current: undefined,
        closed: false,
        next: 0
      }
      const every = options.preferredEvery ?? 0
      if (options.urls.length > 1 && every > 0) {
        yield* Effect.forkScoped(Effect.schedule(returnToPreferred(link), Schedule.spaced(every)))
      }
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          link.closed = true
          link.current?.socket.close()
          link.current = undefined
        })
      )
      direct = makeDirect(link)
      return { send: sendOn(link), supportsAck: false, supportsTransferables: false }
    })
    ),
    (protocol) => ({ protocol, direct: direct! })
  )
}
