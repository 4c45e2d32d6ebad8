/**
 * MCP over Streamable HTTP, the face `Mcp.layerHttp` serves (design: MCP, Hostile clients): each request checked
 * (Host and Origin, the body read within its limits), then handed to its session's transport, or to a new session
 * for `initialize`; the sessions capped and expired when idle.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { type Clock, Duration, Effect } from "effect"
import * as Json from "../util/json.js"

/** A server of one connection (stdio) or one session (HTTP), and how to close it. */
export interface Served {
  readonly server: Server
  /** Closes the transport (which aborts the calls in flight) and waits for those calls' finalizers. */
  readonly close: Effect.Effect<void>
}

/** The ids of the JSON-RPC requests in a body (one message or a batch). */
const requestIds = (body: unknown): Array<string | number> =>
  (Array.isArray(body) ? body : [body]).flatMap((message) => {
    const id = typeof message === "object" && message !== null && "method" in message ? (message as { id?: unknown }).id : undefined
    return typeof id === "string" || typeof id === "number" ? [id] : []
  })

const loopbackHosts = new Set(["127.0.0.1", "localhost", "[::1]", "::1"])

/** The hostname of a Host header or Origin URL, lowercased, or undefined if it has none. */
const hostnameOf = (value: string): string | undefined => {
  try {
    return new URL(value.includes("://") ? value : `http://${value}`).hostname.toLowerCase()
  } catch {
    return undefined
  }
}

/**
 * DNS-rebinding protection: a page on another site must not reach a server on this machine. The
 * Host must name this machine (or the configured host); an Origin, when sent, too.
 */
const foreignRequest = (request: HttpServerRequest.HttpServerRequest, host: string): string | undefined => {
  const allowed = (hostname: string | undefined) =>
    hostname !== undefined && (loopbackHosts.has(hostname) || hostname === host.toLowerCase())
  const hostHeader = request.headers.host
  if (hostHeader === undefined || !allowed(hostnameOf(hostHeader))) return "the Host header does not name this server"
  const origin = request.headers.origin
  if (origin !== undefined && !allowed(hostnameOf(origin))) return "the Origin is not allowed"
  return undefined
}

type Body = { readonly _tag: "Read"; readonly text: string } | { readonly _tag: "TooLarge" }

/**
 * The request body, or TooLarge as soon as more than `maxBytes` arrived (or were declared): a
 * client cannot make the server hold more than the limit. The rest of the body is not read; the 413
 * closes the connection.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, maxBytes: number): Effect.Effect<Body, Error> => {
  if (Number(request.headers["content-length"]) > maxBytes) return Effect.succeed({ _tag: "TooLarge" })
  const source = NodeHttpServerRequest.toIncomingMessage(request)
  return Effect.async<Body, Error>((resume) => {
    const chunks: Array<Buffer> = []
    let received = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    const onData = (chunk: Buffer) => {
      received += chunk.length
      if (received <= maxBytes) return void chunks.push(chunk)
      stop()
      chunks.length = 0
      source.pause()
      resume(Effect.succeed({ _tag: "TooLarge" }))
    }
    const onEnd = () => {
      stop()
      resume(Effect.succeed({ _tag: "Read", text: Buffer.concat(chunks).toString("utf8") }))
    }
    const onError = (error: Error) => {
      stop()
      resume(Effect.fail(error))
    }
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    return Effect.sync(stop)
  })
}

const jsonRpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson({ jsonrpc: "2.0", error: { code, message }, id: null }, { status, headers })

/** One session's server and transport, and what its expiry looks at. */
interface Session {
  readonly served: Served
  readonly transport: WebStandardStreamableHTTPServerTransport
  /** Requests being answered and GET streams open: a busy session never expires. */
  busy: number
  /** When the last request began or ended (Clock millis). */
  lastActive: number
}

// The first bytes of a GET stream: Node holds the headers back until a body chunk, and the SDK sends none
// until there is a message or its first keep-alive (15 s); a client waiting for the headers would hang.
const streamOpened = new TextEncoder().encode(": stream open\n\n")

/** The SSE body with `streamOpened` first, and `onEnd` once when it ends or the client goes away. */
const openedStream = (body: ReadableStream<Uint8Array>, onEnd: () => void): ReadableStream<Uint8Array> => {
  const reader = body.getReader()
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    onEnd()
  }
  return new ReadableStream<Uint8Array>({
    start: (controller) => controller.enqueue(streamOpened),
    pull: async (controller) => {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }))
      if (next.done) {
        end()
        controller.close()
      } else {
        controller.enqueue(next.value)
      }
    },
    cancel: (reason) => {
      end()
      return reader.cancel(reason)
    }
  })
}

/** A POST's body, read once within `maxBodyBytes` and parsed, or the answer that refuses it (413, 400). */
const readPost = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number,
  maxBodyDepth: number
): Effect.Effect<{ readonly parsedBody: unknown } | HttpServerResponse.HttpServerResponse> =>
  Effect.gen(function*() {
    const body = yield* Effect.either(readBody(request, maxBodyBytes))
    if (body._tag === "Right" && body.right._tag === "TooLarge") {
      // The unread rest of the body is not worth reading: the connection closes after the answer.
      return jsonRpcError(413, -32600, `the request body is over the limit of ${maxBodyBytes} bytes`, {
        connection: "close"
      })
    }
    const text = body._tag === "Right" && body.right._tag === "Read" ? body.right.text : undefined
    if (text !== undefined && Json.textDeeperThan(text, maxBodyDepth)) {
      return jsonRpcError(400, -32700, `Parse error: the body is nested deeper than ${maxBodyDepth} levels`)
    }
    const parsed = text === undefined ? undefined : yield* Effect.option(Effect.try(() => JSON.parse(text) as unknown))
    if (parsed === undefined || parsed._tag === "None") return jsonRpcError(400, -32700, "Parse error: the body is not JSON")
    return { parsedBody: parsed.value }
  })

/** What the HTTP face holds: its limits, its sessions (open, and opening) and how a new one is served. */
export interface HttpFace {
  readonly host: string
  readonly maxBodyBytes: number
  readonly maxBodyDepth: number
  readonly maxSessions: number
  readonly idleMillis: number
  readonly clock: Clock.Clock
  readonly sessions: Map<string, Session>
  /** Sessions being created (an `initialize` in progress): they count towards the cap too. */
  opening: number
  /** A new session's server, its transport's session ids from the id service. */
  readonly serve: () => Served
  readonly sessionId: () => string
}

/** A request to the MCP path: checked (host, origin, body), then to its session, or a new one for `initialize`. */
export const handleHttp = (face: HttpFace, request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const refused = foreignRequest(request, face.host)
    if (refused !== undefined) return HttpServerResponse.text(refused, { status: 403 })
    // The body is read once, here, and handed to the transport parsed: the web Request has none.
    let parsedBody: unknown = undefined
    if (request.method === "POST") {
      const read = yield* readPost(request, face.maxBodyBytes, face.maxBodyDepth)
      if (!("parsedBody" in read)) return read
      parsedBody = read.parsedBody
    }
    const url = HttpServerRequest.toURL(request)
    const web = new Request(url._tag === "Some" ? url.value : "http://127.0.0.1/mcp", {
      method: request.method,
      headers: request.headers
    })
    const sessionId = request.headers["mcp-session-id"]
    const known = sessionId === undefined ? undefined : face.sessions.get(sessionId)
    if (sessionId !== undefined && known === undefined) {
      return HttpServerResponse.text("unknown or closed MCP session", { status: 404 })
    }
    if (known !== undefined) return yield* inSession(face, known, web, parsedBody)
    if (isInitializeRequest(parsedBody) && face.sessions.size + face.opening >= face.maxSessions) {
      return jsonRpcError(
        503,
        -32000,
        `the server has its maximum of ${face.maxSessions} MCP sessions open; close one (DELETE) or retry later`,
        { "retry-after": String(Math.ceil(face.idleMillis / 1000)) }
      )
    }
    // A new session: its first request must be `initialize` (the transport answers 400 otherwise).
    face.opening++
    return yield* Effect.ensuring(openSession(face, web, parsedBody), Effect.sync(() => face.opening--))
  })

/** A request or a GET stream begins or ends in `session`: it is busy meanwhile, and active as of now. */
const busy = (face: HttpFace, session: Session, by: 1 | -1) => {
  session.busy += by
  session.lastActive = face.clock.unsafeCurrentTimeMillis()
}

/** A request of a known session, through its transport; a GET stream keeps the session busy until it ends. */
const inSession = (face: HttpFace, session: Session, web: Request, parsedBody: unknown) =>
  Effect.gen(function*() {
    busy(face, session, 1)
    const transport = session.transport
    const response = yield* Effect.promise(() => transport.handleRequest(web, { parsedBody })).pipe(
      // The HTTP request closed before its answer: cancel its calls, as notifications/cancelled would.
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          busy(face, session, -1)
          for (const requestId of requestIds(parsedBody)) {
            transport.onmessage?.({
              jsonrpc: "2.0",
              method: "notifications/cancelled",
              params: { requestId, reason: "the HTTP request closed" }
            })
          }
        })
      )
    )
    const stream = web.method === "GET" && response.body !== null &&
      (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
    if (!stream) {
      busy(face, session, -1)
      return HttpServerResponse.fromWeb(response)
    }
    return HttpServerResponse.fromWeb(
      new Response(openedStream(response.body!, () => busy(face, session, -1)), {
        status: response.status,
        headers: response.headers
      })
    )
  })

/** A new session: its server and transport, kept once the transport names it (its `initialize` went through). */
const openSession = (face: HttpFace, web: Request, parsedBody: unknown) =>
  Effect.gen(function*() {
    const served = face.serve()
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: face.sessionId,
      enableJsonResponse: true,
      onsessioninitialized: (id) =>
        void face.sessions.set(id, { served, transport, busy: 0, lastActive: face.clock.unsafeCurrentTimeMillis() }),
      onsessionclosed: (id) => void face.sessions.delete(id)
    })
    yield* Effect.promise(() => served.server.connect(transport))
    const response = yield* Effect.promise(() => transport.handleRequest(web, { parsedBody }))
    if (transport.sessionId === undefined) yield* served.close
    return HttpServerResponse.fromWeb(response)
  })

/**
 * The idle sessions closed: checked every tenth of the timeout (at most a minute), so a session ends
 * between 1x and 1.1x the timeout idle; every session closed when the face's scope ends.
 */
export const expireIdle = (face: HttpFace) =>
  Effect.gen(function*() {
    const closeAll = (all: Iterable<Session>) =>
      Effect.forEach(all, (session) => session.served.close, { concurrency: "unbounded", discard: true })
    const expire = Effect.suspend(() => {
      const now = face.clock.unsafeCurrentTimeMillis()
      const idle: Array<Session> = []
      for (const [id, session] of face.sessions) {
        if (session.busy === 0 && now - session.lastActive >= face.idleMillis) {
          face.sessions.delete(id)
          idle.push(session)
        }
      }
      return closeAll(idle)
    })
    const period = Duration.millis(Math.max(1, Math.min(face.idleMillis / 10, 60_000)))
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(period), expire)))
    yield* Effect.addFinalizer(() => closeAll(face.sessions.values()))
  })
