/**
 * The platform protocol's wire as it was before it moved onto `@effect/rpc`'s `RpcServer.Protocol` and
 * `RpcClient.Protocol` (a copy for the serve bench's baseline; nothing in src/ or the tests imports it):
 * the calls of `PlatformRpcs` as JSON text frames on a WebSocket, with its own handler lookup and middleware.
 *
 * Frames, client to platform:
 *   `{ "id": 7, "call": "Register", "payload": { ... } }`   a call (a stream call too)
 *   `{ "id": 7, "cancel": true }`                            stop a call or stream
 * Platform to client:
 *   `{ "id": 7, "ok": <success> }`        a call's success (no `ok` for a void success; a stream's end)
 *   `{ "id": 7, "events": [ ... ] }`      a stream's next events
 *   `{ "id": 7, "error": <typed error> }` a call's typed failure
 *   `{ "id": 7, "defect": "text" }`       the call could not run (unknown call, invalid payload, a bug)
 *   `{ "defect": "text" }`                a frame that could not be read at all
 *
 * The token travels once, as the `authorization` header of the WebSocket upgrade, and the
 * protocol's authentication middleware reads it for every call.
 */
import * as Headers from "@effect/platform/Headers"
import type * as Rpc from "@effect/rpc/Rpc"
import type * as RpcMiddleware from "@effect/rpc/RpcMiddleware"
import * as RpcSchema from "@effect/rpc/RpcSchema"
import {
  Cause,
  Context,
  Data,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberId,
  FiberRef,
  FiberRefs,
  Mailbox,
  Option,
  ParseResult,
  Runtime,
  Schema,
  type Scope,
  Stream
} from "effect"
import * as Json from "../../../src/internal/util/json.js"

/**
 * The largest frame the platform accepts, by default: 2 MiB, room for a call's 1 MiB of arguments or
 * a 1 MiB result (Invocation's limits) with the frame around it.
 */
export const defaultMaxFrameBytes = 2 * 1024 * 1024

/** The largest frame a client accepts from the platform, by default: 16 MiB (a model's long text). */
export const defaultClientMaxFrameBytes = 16 * 1024 * 1024

/** Frames nested deeper than this are refused before they are decoded (results are held to 128). */
export const maxFrameDepth = 512

/** Error texts in frames are cut to this many characters. */
const maxTextLength = 2048

// ---------------------------------------------------------------------------------------------
// Codecs, one per call, built once.

interface Codec {
  readonly rpc: Rpc.AnyWithProps
  readonly stream: boolean
  readonly decodePayload: (input: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly encodePayload: (value: unknown) => Either.Either<unknown, ParseResult.ParseError>
  /** A call's success, or one event of a stream. */
  readonly encodeSuccess: (value: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly decodeSuccess: (input: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly encodeFailure: (error: unknown) => Either.Either<unknown, ParseResult.ParseError>
  readonly decodeFailure: (input: unknown) => Either.Either<unknown, ParseResult.ParseError>
}

/** An `RpcGroup`, whatever its calls. */
export interface AnyGroup {
  readonly requests: ReadonlyMap<string, unknown>
}

const codecsCache = new WeakMap<object, ReadonlyMap<string, Codec>>()

/** The codec of every call in the group. */
export const codecs = (group: AnyGroup): ReadonlyMap<string, Codec> => {
  const cached = codecsCache.get(group)
  if (cached !== undefined) return cached
  const map = new Map<string, Codec>()
  for (const [tag, rpc] of group.requests as ReadonlyMap<string, Rpc.AnyWithProps>) {
    const streamSchemas = RpcSchema.getStreamSchemas(rpc.successSchema.ast)
    const stream = Option.isSome(streamSchemas)
    const success = stream ? streamSchemas.value.success : rpc.successSchema
    const failures = new Set<Schema.Schema.All>([rpc.errorSchema])
    if (stream) failures.add(streamSchemas.value.failure)
    for (const middleware of rpc.middlewares) failures.add(middleware.failure)
    const failure = Schema.Union(...failures) as Schema.Schema<unknown, unknown>
    const payload = rpc.payloadSchema as Schema.Schema<unknown, unknown>
    const successSchema = success as Schema.Schema<unknown, unknown>
    map.set(tag, {
      rpc,
      stream,
      decodePayload: Schema.decodeUnknownEither(payload, { onExcessProperty: "error" }),
      encodePayload: Schema.encodeUnknownEither(payload),
      encodeSuccess: Schema.encodeUnknownEither(successSchema),
      decodeSuccess: Schema.decodeUnknownEither(successSchema),
      encodeFailure: Schema.encodeUnknownEither(failure),
      decodeFailure: Schema.decodeUnknownEither(failure)
    })
  }
  codecsCache.set(group, map)
  return map
}

/** Cuts `text` to the frames' limit. */
const bounded = (text: string): string => text.length <= maxTextLength ? text : text.slice(0, maxTextLength - 1) + "…"

// Total: the formatter recurses into the actual value; a value too deep for it is still described.
const parseErrorText = (error: ParseResult.ParseError): string => {
  try {
    return bounded(ParseResult.TreeFormatter.formatErrorSync(error))
  } catch {
    return "the value is too deeply nested to describe"
  }
}

const defectText = (defect: unknown): string => {
  try {
    return bounded(defect instanceof Error ? defect.message : typeof defect === "string" ? defect : String(defect))
  } catch {
    return "a defect that cannot be described"
  }
}

// ---------------------------------------------------------------------------------------------
// The platform's side: one connection.

/** What the platform's side needs to answer a connection. */
export interface ServerOptions {
  readonly group: AnyGroup
  /** Holds the handlers (`Rpc.ToHandler`) and the middleware services. */
  readonly runtime: Runtime.Runtime<never>
}

/** A live connection on the platform's side. */
export interface ServerConnection {
  /** A frame from the client. */
  readonly receive: (text: string) => void
  /** The client went away: every running call and stream is interrupted. */
  readonly close: () => void
}

let nextClientId = 0

/**
 * Answers one client: decodes each frame, applies the protocol's middleware with the upgrade's
 * headers, runs the handler in its own fiber, and sends the outcome with `send`.
 */
export const serveConnection = (
  options: ServerOptions,
  upgradeHeaders: Headers.Input,
  send: (frame: string) => void
): ServerConnection => {
  const table = codecs(options.group)
  const context = options.runtime.context as Context.Context<never>
  const headers = Headers.fromInput(upgradeHeaders)
  const clientId = ++nextClientId
  const running = new Map<number, Fiber.RuntimeFiber<void, never>>()
  const runFork = Runtime.runFork(options.runtime)
  // Per call, a runtime whose context also holds what its handler captured (built once).
  const forks = new Map<
    string,
    <A, E>(effect: Effect.Effect<A, E>, options?: Runtime.RunForkOptions) => Fiber.RuntimeFiber<A, E>
  >()
  const forkFor = (codec: Codec, entry: Rpc.Handler<string>) => {
    let fork = forks.get(codec.rpc._tag)
    if (fork === undefined) {
      fork = Runtime.runFork(Runtime.make({
        context: Context.merge(options.runtime.context, entry.context),
        // A handler's failure goes back to the client as its answer: not an "unhandled error" log line.
        fiberRefs: FiberRefs.updateAs(options.runtime.fiberRefs, {
          fiberId: FiberId.none,
          fiberRef: FiberRef.unhandledErrorLogLevel,
          value: Option.none()
        }),
        runtimeFlags: options.runtime.runtimeFlags
      }))
      forks.set(codec.rpc._tag, fork)
    }
    return fork
  }
  let closed = false

  const write = (frame: object) => {
    if (closed) return
    let text: string
    try {
      text = JSON.stringify(frame)
    } catch (error) {
      // Only a value the platform built itself could be too deep; say so rather than die.
      const id = (frame as { id?: unknown }).id
      text = JSON.stringify({ ...(typeof id === "number" ? { id } : {}), defect: `the answer could not be written: ${defectText(error)}` })
    }
    send(text)
  }
  let soon: Array<object> = []
  const writeSoon = (frame: object) => {
    soon.push(frame)
    if (soon.length > 1) return
    setImmediate(() => {
      const frames = soon
      soon = []
      for (const frame of frames) write(frame)
    })
  }

  const run = (id: number, codec: Codec, payload: unknown) => {
    const entry = context.unsafeMap.get(codec.rpc.key) as Rpc.Handler<string> | undefined
    if (entry === undefined) return write({ id, defect: `the platform has no handler for ${codec.rpc._tag}` })
    const result = entry.handler(payload, { clientId, headers })
    const writeEvents = (chunk: Iterable<unknown>) => {
      const events: Array<unknown> = []
      for (const event of chunk) {
        const encoded = codec.encodeSuccess(event)
        if (Either.isLeft(encoded)) throw new Error(`an event could not be encoded: ${parseErrorText(encoded.left)}`)
        events.push(encoded.right)
      }
      if (events.length > 0) write({ id, events })
    }
    let effect: Effect.Effect<unknown, unknown, any> = !codec.stream
      ? result as Effect.Effect<unknown, unknown>
      : Effect.isEffect(result)
      // A stream handler may give a mailbox (fewer steps per event than a Stream).
      ? Effect.scoped(Effect.flatMap(result as Effect.Effect<Mailbox.ReadonlyMailbox<unknown, unknown>, unknown, Scope.Scope>, (mailbox) => {
        const next: Effect.Effect<void, unknown> = Effect.flatMap(mailbox.takeAll, ([chunk, done]) => {
          writeEvents(chunk)
          return done ? Effect.void : next
        })
        return next
      }))
      : Stream.runForEachChunk(result as Stream.Stream<unknown, unknown>, (chunk) => Effect.sync(() => writeEvents(chunk)))
    for (const tag of codec.rpc.middlewares) effect = withMiddleware(tag, context, { clientId, rpc: codec.rpc, payload, headers }, effect)
    // Started on this stack: a handler that completes at once is answered at once.
    const fiber = forkFor(codec, entry)(
      // What the handler still needs is in the runtime (the platform's layer).
      Effect.matchCauseEffect(effect as Effect.Effect<unknown, unknown>, {
        onSuccess: (value) =>
          Effect.sync(() => {
            if (codec.stream) return write({ id })
            // A call's success goes out once this turn of the event loop is done: the answer to a
            // CompleteToolCall must not go before the next call that answer lets out.
            if (value === undefined) return writeSoon({ id })
            const encoded = codec.encodeSuccess(value)
            writeSoon(Either.isRight(encoded) ? { id, ok: encoded.right } : { id, defect: parseErrorText(encoded.left) })
          }),
        onFailure: (cause) =>
          Effect.sync(() => {
            if (Cause.isInterruptedOnly(cause)) return
            const failure = Cause.failureOption(cause)
            if (Option.isSome(failure)) {
              const encoded = codec.encodeFailure(failure.value)
              if (Either.isRight(encoded)) return write({ id, error: encoded.right })
            }
            write({ id, defect: defectText(Cause.squash(cause)) })
          })
      }),
      { immediate: true }
    )
    if (fiber.unsafePoll() !== null) return
    running.set(id, fiber)
    fiber.addObserver(() => running.delete(id))
  }

  // Total (design: Hostile clients): whatever a frame holds, the worst it gets is a defect answer.
  const receive = (text: string) => {
    try {
      receiveFrame(text)
    } catch (error) {
      write({ defect: `the frame could not be handled: ${defectText(error)}` })
    }
  }

  const receiveFrame = (text: string) => {
    let frame: unknown
    try {
      // V8's parser does not recurse: any depth parses; the depth check comes next.
      frame = JSON.parse(text)
    } catch {
      return write({ defect: "the frame is not valid JSON" })
    }
    if (typeof frame !== "object" || frame === null || Array.isArray(frame)) {
      return write({ defect: "a frame must be a JSON object with an id and a call" })
    }
    const { call, cancel, id, payload } = frame as Record<string, unknown>
    if (typeof id !== "number" || !Number.isSafeInteger(id)) {
      return write({ defect: "a frame must have a numeric id" })
    }
    if (cancel === true) {
      const fiber = running.get(id)
      if (fiber !== undefined) runFork(Fiber.interrupt(fiber))
      return
    }
    const codec = typeof call === "string" ? table.get(call) : undefined
    if (codec === undefined) {
      return write({ id, defect: `unknown call ${Json.preview(call)}; the calls are ${[...table.keys()].join(", ")}` })
    }
    if (running.has(id)) return write({ id, defect: `call id ${id} is already running` })
    // Nothing deeper reaches a decoder, a formatter or a handler.
    if (Json.deeperThan(payload, maxFrameDepth)) {
      return write({ id, defect: `invalid ${call} payload: nested deeper than ${maxFrameDepth} levels` })
    }
    const decoded = codec.decodePayload(payload)
    if (Either.isLeft(decoded)) return write({ id, defect: `invalid ${call} payload: ${parseErrorText(decoded.left)}` })
    run(id, codec, decoded.right)
  }

  const close = () => {
    if (closed) return
    closed = true
    for (const fiber of running.values()) runFork(Fiber.interrupt(fiber))
    running.clear()
  }

  return { receive, close }
}

/** One of the protocol's middlewares around a handler, as `RpcServer` applies them. */
const withMiddleware = (
  tag: RpcMiddleware.TagClassAny,
  context: Context.Context<never>,
  options: { clientId: number; rpc: Rpc.AnyWithProps; payload: unknown; headers: Headers.Headers },
  handler: Effect.Effect<unknown, unknown, any>
): Effect.Effect<unknown, unknown, any> => {
  const middleware = context.unsafeMap.get(tag.key)
  if (middleware === undefined) return Effect.dieMessage(`the platform has no ${tag.key} middleware`)
  if (tag.wrap) return (middleware as RpcMiddleware.RpcMiddlewareWrap<any, any>)({ ...options, next: handler as any })
  const provided = (middleware as RpcMiddleware.RpcMiddleware<any, any>)(options)
  if (tag.optional) {
    return Effect.matchEffect(provided, {
      onFailure: () => handler,
      onSuccess: (value) => tag.provides === undefined ? handler : Effect.provideService(handler, tag.provides, value)
    })
  }
  return tag.provides === undefined
    ? Effect.zipRight(provided, handler)
    : Effect.flatMap(provided, (value) => Effect.provideService(handler, tag.provides!, value))
}

// ---------------------------------------------------------------------------------------------
// The client's side.

/** A connection the client sends frames on. */
export interface Link {
  readonly send: (frame: string) => void
}

/** The client's side of the wire, over links it opens when needed. */
export interface Client {
  /** A call; `unavailable` is the error for a link that could not be opened or dropped. */
  readonly call: (tag: string, payload: unknown) => Effect.Effect<unknown, unknown>
  /** A stream call: its events in a mailbox while the scope lives. */
  readonly stream: (tag: string, payload: unknown) => Effect.Effect<Mailbox.ReadonlyMailbox<unknown, unknown>, never, Scope.Scope>
  /** A frame from the platform, on the link currently open. */
  readonly receive: (text: string) => void
  /** The link dropped: every call and stream on it fails with `unavailable`. */
  readonly dropped: (reason: string) => void
}

/** A call's frame would be over the platform's frame limit: it was not sent. */
export class FrameTooLarge extends Data.TaggedError("FrameTooLarge")<{
  readonly tag: string
  readonly bytes: number
  readonly limit: number
}> {
  override get message(): string {
    return `the ${this.tag} frame is ${this.bytes} bytes, over the platform's limit of ${this.limit}`
  }
}

interface Waiting {
  readonly codec: Codec
  readonly onFrame: (frame: Record<string, unknown>) => void
  readonly onDropped: (reason: string) => void
}

/**
 * The client: `open` gives the link to send on (opening it if needed, failing with the
 * transport's error), `unavailable` turns a reason into that error.
 */
export const makeClient = <E>(options: {
  readonly group: AnyGroup
  readonly open: Effect.Effect<Link, E>
  readonly unavailable: (reason: string) => E
  /** A call whose frame is larger fails with `FrameTooLarge`, unsent. Default `defaultMaxFrameBytes`. */
  readonly maxSendBytes?: number | undefined
}): Client => {
  const maxSendBytes = options.maxSendBytes ?? defaultMaxFrameBytes
  const table = codecs(options.group)
  const waiting = new Map<number, Waiting>()
  let nextId = 0

  const codecOf = (tag: string): Codec => {
    const codec = table.get(tag)
    if (codec === undefined) throw new Error(`the protocol has no call ${tag}`)
    return codec
  }

  /** A call's frame: its id and text, or the frame's size when it is over the limit. */
  const frameOf = (codec: Codec, payload: unknown): { readonly id: number; readonly text: string } | FrameTooLarge => {
    const id = ++nextId
    const encoded = codec.encodePayload(payload)
    if (Either.isLeft(encoded)) throw new Error(`invalid ${codec.rpc._tag} payload: ${parseErrorText(encoded.left)}`)
    const text = JSON.stringify({ id, call: codec.rpc._tag, payload: encoded.right })
    // A character is one to three UTF-8 bytes: only a long text is measured.
    if (text.length * 3 > maxSendBytes) {
      const bytes = Buffer.byteLength(text, "utf8")
      if (bytes > maxSendBytes) return new FrameTooLarge({ tag: codec.rpc._tag, bytes, limit: maxSendBytes })
    }
    return { id, text }
  }

  /** Sends a call's frame on `link`, its frames going to `onFrame` until it ends. */
  const send = (link: Link, codec: Codec, frame: { readonly id: number; readonly text: string }, onFrame: Waiting["onFrame"], onDropped: Waiting["onDropped"]) => {
    waiting.set(frame.id, { codec, onFrame, onDropped })
    link.send(frame.text)
    return frame.id
  }

  const cancel = (id: number, link: Link) =>
    Effect.sync(() => {
      if (!waiting.delete(id)) return
      try {
        link.send(JSON.stringify({ id, cancel: true }))
      } catch {
        // The link is gone: so is the call.
      }
    })

  const failureOf = (codec: Codec, frame: Record<string, unknown>): Exit.Exit<never, unknown> => {
    if ("error" in frame) {
      const decoded = codec.decodeFailure(frame.error)
      return Either.isRight(decoded)
        ? Exit.fail(decoded.right)
        : Exit.die(new Error(`the platform sent an unreadable ${codec.rpc._tag} error: ${parseErrorText(decoded.left)}`))
    }
    return Exit.die(new Error(`the platform could not run ${codec.rpc._tag}: ${String(frame.defect)}`))
  }

  const call = (tag: string, payload: unknown): Effect.Effect<unknown, unknown> => {
    const codec = codecOf(tag)
    // Encoded at each run: a retried call gets a new id.
    return Effect.suspend(() => {
      const frame = frameOf(codec, payload)
      if (frame instanceof FrameTooLarge) return Effect.fail(frame)
      return Effect.flatMap(options.open, (link) =>
        Effect.async<unknown, unknown>((resume) => {
          const onFrame = (frame: Record<string, unknown>) => {
            if ("error" in frame || "defect" in frame) return resume(failureOf(codec, frame))
            if (!("ok" in frame)) return resume(Exit.void)
            const decoded = codec.decodeSuccess(frame.ok)
            resume(
              Either.isRight(decoded)
                ? Exit.succeed(decoded.right)
                : Exit.die(new Error(`the platform sent an unreadable ${tag} answer: ${parseErrorText(decoded.left)}`))
            )
          }
          const id = send(link, codec, frame, onFrame, (reason) => resume(Exit.fail(options.unavailable(reason))))
          return cancel(id, link)
        }))
    })
  }

  const stream = (tag: string, payload: unknown): Effect.Effect<Mailbox.ReadonlyMailbox<unknown, unknown>, never, Scope.Scope> => {
    const codec = codecOf(tag)
    return Effect.gen(function*() {
      const mailbox = yield* Mailbox.make<unknown, unknown>()
      const onFrame = (frame: Record<string, unknown>) => {
        if ("events" in frame && Array.isArray(frame.events)) {
          for (const event of frame.events) {
            const decoded = codec.decodeSuccess(event)
            if (Either.isLeft(decoded)) {
              mailbox.unsafeDone(
                Exit.die(new Error(`the platform sent an unreadable ${tag} event: ${parseErrorText(decoded.left)}`))
              )
              return
            }
            mailbox.unsafeOffer(decoded.right)
          }
          return
        }
        if ("error" in frame || "defect" in frame) mailbox.unsafeDone(failureOf(codec, frame))
        else mailbox.unsafeDone(Exit.void)
      }
      const frame = frameOf(codec, payload)
      if (frame instanceof FrameTooLarge) {
        mailbox.unsafeDone(Exit.die(frame))
        return mailbox
      }
      const link = yield* Effect.either(options.open)
      if (Either.isLeft(link)) {
        mailbox.unsafeDone(Exit.fail(link.left))
        return mailbox
      }
      const id = send(link.right, codec, frame, onFrame, (reason) => mailbox.unsafeDone(Exit.fail(options.unavailable(reason))))
      yield* Effect.addFinalizer(() => cancel(id, link.right))
      return mailbox
    })
  }

  const receive = (text: string) => {
    let frame: unknown
    try {
      frame = JSON.parse(text)
    } catch {
      return
    }
    if (typeof frame !== "object" || frame === null) return
    const id = (frame as { id?: unknown }).id
    if (typeof id !== "number") return
    const entry = waiting.get(id)
    if (entry === undefined) return
    const record = frame as Record<string, unknown>
    // A stream's events leave it waiting; anything else ends the call.
    if (!(entry.codec.stream && "events" in record)) waiting.delete(id)
    try {
      entry.onFrame(record)
    } catch (error) {
      waiting.delete(id)
      entry.onFrame({ id, defect: `a frame from the platform could not be read: ${defectText(error)}` })
    }
  }

  const dropped = (reason: string) => {
    const entries = [...waiting.values()]
    waiting.clear()
    for (const entry of entries) entry.onDropped(reason)
  }

  return { call, stream, receive, dropped }
}
