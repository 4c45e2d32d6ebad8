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
import { createServer, type Server as NodeServer, STATUS_CODES } from "node:http"
import type { Socket } from "node:net"
import * as Json from "../util/json.js"
import * as OAuth from "./oauth.js"

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

/** True when `host` (the address the server binds) is reachable from this machine only. */
export const isLoopback = (host: string): boolean => loopbackHosts.has(host.toLowerCase())

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

type Body =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "TooDeep" }
  | { readonly _tag: "Busy" }

/** The first bytes of every body, which the shared budget does not count: a small request always gets in. */
export const unbudgetedBodyBytes = 64 * 1024

/**
 * The request body, or TooLarge as soon as more than `maxBodyBytes` arrived (or were declared): a
 * client cannot make the server hold more than the limit. Busy as soon as its bytes past the first
 * `unbudgetedBodyBytes` would take the bodies being read over `maxBufferedBodyBytes` together. TooDeep when
 * its first bytes already nest deeper than `maxBodyDepth` (a body 4 MB deep is refused from its first chunk,
 * not read to the end). The rest of the body is not read; the answer closes the connection. Interrupted (its
 * time is up), it lets go of what it held.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, face: HttpFace): Effect.Effect<Body, Error> => {
  const declared = Number(request.headers["content-length"])
  if (declared > face.maxBodyBytes) return Effect.succeed({ _tag: "TooLarge" })
  // A declared length that cannot fit is refused before a byte is read.
  if (face.bufferedBodyBytes + declared - unbudgetedBodyBytes > face.maxBufferedBodyBytes) {
    return Effect.succeed({ _tag: "Busy" })
  }
  const source = NodeHttpServerRequest.toIncomingMessage(request)
  return Effect.async<Body, Error>((resume) => {
    let chunks: Array<Buffer> = []
    let received = 0
    let budgeted = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      face.bufferedBodyBytes -= budgeted
      budgeted = 0
      chunks = []
    }
    const refuse = (body: Body) => {
      stop()
      source.pause()
      resume(Effect.succeed(body))
    }
    const onData = (chunk: Buffer) => {
      const before = received
      received += chunk.length
      if (received > face.maxBodyBytes) return refuse({ _tag: "TooLarge" })
      // Once, with the first bytes that could nest too deep: the scan of a prefix stops where the whole text's would.
      if (before <= 2 * face.maxBodyDepth && received > 2 * face.maxBodyDepth) {
        const prefix = Buffer.concat([...chunks, chunk]).toString("utf8")
        if (Json.textDeeperThan(prefix, face.maxBodyDepth)) return refuse({ _tag: "TooDeep" })
      }
      const more = Math.max(0, received - unbudgetedBodyBytes) - budgeted
      if (more > 0 && face.bufferedBodyBytes + more > face.maxBufferedBodyBytes) return refuse({ _tag: "Busy" })
      face.bufferedBodyBytes += more
      budgeted += more
      chunks.push(chunk)
    }
    const onEnd = () => {
      const text = Buffer.concat(chunks).toString("utf8")
      stop()
      resume(Effect.succeed({ _tag: "Read", text }))
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

/** One session's server and transport, whose token opened it, and what its expiry looks at. */
interface Session {
  readonly served: Served
  readonly transport: WebStandardStreamableHTTPServerTransport
  /** The name of the token that opened it (with `tokens`): only that token's requests reach it. */
  readonly client: string | undefined
  /** Requests being answered (a GET until its stream's headers): a busy session never expires. An open stream is not. */
  busy: number
  /** When the last request began or ended (Clock millis). */
  lastActive: number
}

// The first bytes of a GET stream: Node holds the headers back until a body chunk, and the SDK sends none
// until there is a message or its first keep-alive (15 s); a client waiting for the headers would hang.
const streamOpened = new TextEncoder().encode(": stream open\n\n")

/** The SSE body with `streamOpened` first. */
const openedStream = (body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> => {
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>({
    start: (controller) => controller.enqueue(streamOpened),
    pull: async (controller) => {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }))
      if (next.done) controller.close()
      else controller.enqueue(next.value)
    },
    cancel: (reason) => reader.cancel(reason)
  })
}

// The unread rest of a refused body is not worth reading: the connection closes after the answer.
const closing = { connection: "close" } as const

/**
 * A POST's body, read once within `maxBodyBytes`, the shared budget and `bodyTimeout`, and parsed; or the
 * answer that refuses it (413, 503, 408, 400).
 */
const readPost = (
  request: HttpServerRequest.HttpServerRequest,
  face: HttpFace
): Effect.Effect<{ readonly parsedBody: unknown } | HttpServerResponse.HttpServerResponse> =>
  Effect.gen(function*() {
    const { bodyMillis, maxBodyBytes, maxBodyDepth, maxBufferedBodyBytes } = face
    const body = yield* Effect.either(readBody(request, face)).pipe(
      Effect.timeoutTo({ duration: bodyMillis, onSuccess: (read) => read, onTimeout: () => "TimedOut" as const })
    )
    if (body === "TimedOut") {
      return jsonRpcError(408, -32600, `the request body did not arrive within ${bodyMillis} ms`, closing)
    }
    if (body._tag === "Right" && body.right._tag === "TooLarge") {
      return jsonRpcError(413, -32600, `the request body is over the limit of ${maxBodyBytes} bytes`, closing)
    }
    if (body._tag === "Right" && body.right._tag === "TooDeep") {
      return jsonRpcError(400, -32700, `Parse error: the body is nested deeper than ${maxBodyDepth} levels`, closing)
    }
    if (body._tag === "Right" && body.right._tag === "Busy") {
      return jsonRpcError(
        503,
        -32000,
        `the server holds ${maxBufferedBodyBytes} bytes of request bodies being read already; retry later`,
        { ...closing, "retry-after": "1" }
      )
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
  /** Token -> the client's name (for its sessions); undefined: no authentication. */
  readonly tokens: ReadonlyMap<string, string> | undefined
  /** OAuth access tokens checked as JWTs, in place of `tokens` (design: MCP authorization). */
  readonly oauth?: { readonly options: OAuth.OAuthOptions; readonly verify: (token: string) => Promise<OAuth.Principal | OAuth.Refusal> } | undefined
  readonly maxBodyBytes: number
  readonly maxBodyDepth: number
  readonly maxBufferedBodyBytes: number
  readonly bodyMillis: number
  readonly maxSessions: number
  readonly idleMillis: number
  readonly clock: Clock.Clock
  readonly sessions: Map<string, Session>
  /** The bytes of the bodies being read that the shared budget counts. */
  bufferedBodyBytes: number
  /** Sessions being created (an `initialize` in progress): they count towards the cap too. */
  opening: number
  /** A new session's server for the client a token names (its tasks are that client's), ids from the id service. */
  readonly serve: (client: string | undefined) => Served
  readonly sessionId: () => string
}

const bearer = /^Bearer[ \t]+(\S+)[ \t]*$/i

/** An OAuth refusal: 401 or 403, its `WWW-Authenticate` pointing at the metadata (design: MCP authorization). */
const oauthRefusal = (oauth: OAuth.OAuthOptions, refusal: OAuth.Refusal | undefined) =>
  jsonRpcError(
    refusal?.status ?? 401,
    -32001,
    refusal?.description ?? "this MCP server requires an OAuth access token (Authorization: Bearer <token>)",
    { ...closing, "www-authenticate": OAuth.challenge(oauth, refusal) }
  )

/**
 * With `oauth`, the principal of a request whose access token is valid, or the 401/403 that refuses it (the
 * token never repeated); with `tokens`, the client's name for a request with `Authorization: Bearer <token>` of
 * one of them, or the 401; without either, no name.
 */
const authenticate = (
  face: HttpFace,
  request: HttpServerRequest.HttpServerRequest
): Effect.Effect<{ readonly client: string | undefined; readonly principal?: OAuth.Principal } | HttpServerResponse.HttpServerResponse> => {
  const header = request.headers.authorization
  const token = header === undefined ? undefined : bearer.exec(header)?.[1]
  const oauth = face.oauth
  if (oauth !== undefined) {
    if (token === undefined) return Effect.succeed(oauthRefusal(oauth.options, undefined))
    return Effect.map(Effect.promise(() => oauth.verify(token)), (checked) =>
      "name" in checked ? { client: checked.name, principal: checked } : oauthRefusal(oauth.options, checked))
  }
  return Effect.succeed(authenticateToken(face, header, token))
}

/** `authenticate` with the static `tokens`. */
const authenticateToken = (
  face: HttpFace,
  header: string | undefined,
  token: string | undefined
): { readonly client: string | undefined } | HttpServerResponse.HttpServerResponse => {
  if (face.tokens === undefined) return { client: undefined }
  const client = token === undefined ? undefined : face.tokens.get(token)
  if (client !== undefined) return { client }
  const challenge = header === undefined ? "Bearer realm=\"mcp\"" : "Bearer realm=\"mcp\", error=\"invalid_token\""
  const message = header === undefined
    ? "this MCP server requires a bearer token (Authorization: Bearer <token>)"
    : "the bearer token is not one of this MCP server's"
  return jsonRpcError(401, -32001, message, { ...closing, "www-authenticate": challenge })
}

/**
 * A request to the MCP path: checked (host, origin, token, body), then to its session, or a new one for
 * `initialize`. The token is checked before the body is read or a session counted.
 */
export const handleHttp = (face: HttpFace, request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const refused = foreignRequest(request, face.host)
    if (refused !== undefined) return HttpServerResponse.text(refused, { status: 403 })
    const authenticated = yield* authenticate(face, request)
    if (!("client" in authenticated)) return authenticated
    const client = authenticated.client
    // The body is read once, here, and handed to the transport parsed: the web Request has none.
    let parsedBody: unknown = undefined
    if (request.method === "POST") {
      const read = yield* readPost(request, face)
      if (!("parsedBody" in read)) return read
      parsedBody = read.parsedBody
    }
    // A tool's own scope, checked once the body says which tool is called.
    if (face.oauth !== undefined && authenticated.principal !== undefined) {
      const scope = OAuth.missingToolScope(face.oauth.options, authenticated.principal, parsedBody)
      if (scope !== undefined) return oauthRefusal(face.oauth.options, OAuth.toolScopeRefusal(face.oauth.options, scope))
    }
    const url = HttpServerRequest.toURL(request)
    const web = new Request(url._tag === "Some" ? url.value : "http://127.0.0.1/mcp", {
      method: request.method,
      headers: request.headers
    })
    const sessionId = request.headers["mcp-session-id"]
    const known = sessionId === undefined ? undefined : face.sessions.get(sessionId)
    // Another token's session is as good as unknown: its id tells a client nothing.
    if (sessionId !== undefined && (known === undefined || known.client !== client)) {
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
    return yield* Effect.ensuring(openSession(face, client, web, parsedBody), Effect.sync(() => face.opening--))
  })

/** A request begins or ends in `session`: it is busy meanwhile, and active as of now. */
const busy = (face: HttpFace, session: Session, by: 1 | -1) => {
  session.busy += by
  session.lastActive = face.clock.unsafeCurrentTimeMillis()
}

/**
 * A request of a known session, through its transport. A GET's stream, once open, does not keep the session: it
 * ends with the session when the session expires.
 */
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
    busy(face, session, -1)
    releaseAnswered(transport)
    const stream = web.method === "GET" && response.body !== null &&
      (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
    if (!stream) return HttpServerResponse.fromWeb(response)
    return HttpServerResponse.fromWeb(
      new Response(openedStream(response.body!), { status: response.status, headers: response.headers })
    )
  })

/** The SDK transport's maps from a request's stream to its answer, and from a request id to its stream. */
interface TransportMaps {
  readonly _streamMapping?: Map<string, { readonly resolveJson?: unknown; readonly cleanup: () => void }>
  readonly _requestToStreamMapping?: Map<unknown, string>
}

/**
 * Lets go of the answered requests the SDK's transport keeps. In JSON response mode (ours) it resolves a POST's
 * response but keeps its entry, the `Response` with it (SDK 1.32): one entry a request, for the session's life,
 * a session's memory growing with its requests. An entry whose requests no longer name it was answered: dropped.
 * One still being answered is named by its requests, set with it, so it stays.
 */
const releaseAnswered = (transport: WebStandardStreamableHTTPServerTransport): void => {
  const { _requestToStreamMapping: requests, _streamMapping: streams } = transport as unknown as TransportMaps
  if (streams === undefined || requests === undefined || streams.size === 0) return
  const unanswered = new Set(requests.values())
  for (const [streamId, entry] of streams) {
    if (entry.resolveJson !== undefined && !unanswered.has(streamId)) entry.cleanup()
  }
}

/** A new session: its server and transport, kept once the transport names it (its `initialize` went through). */
const openSession = (face: HttpFace, client: string | undefined, web: Request, parsedBody: unknown) =>
  Effect.gen(function*() {
    const served = face.serve(client)
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: face.sessionId,
      enableJsonResponse: true,
      onsessioninitialized: (id) =>
        void face.sessions.set(id, {
          served,
          transport,
          client,
          busy: 0,
          lastActive: face.clock.unsafeCurrentTimeMillis()
        }),
      onsessionclosed: (id) => void face.sessions.delete(id)
    })
    yield* Effect.promise(() => served.server.connect(transport))
    const response = yield* Effect.promise(() => transport.handleRequest(web, { parsedBody }))
    releaseAnswered(transport)
    if (transport.sessionId === undefined) yield* served.close
    return HttpServerResponse.fromWeb(response)
  })

/**
 * The idle sessions closed, their GET streams ended: checked every tenth of the timeout (at most a minute), so a
 * session ends between 1x and 1.1x the timeout without a request; every session closed when the face's scope ends.
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

/** The connection limits of the HTTP server, in milliseconds. */
export interface ConnectionLimits {
  readonly maxConnections: number
  readonly bodyMillis: number
}

/** Node's limit on a request's headers: a client that sends them a byte at a time is cut off then (408). */
export const headersTimeoutMillis = 10_000

/** A connection refused before a byte of it is read: a 503, then closed. */
const refuse = (socket: Socket, text: string) => {
  socket.on("error", () => socket.destroy())
  socket.end(
    `HTTP/1.1 503 ${STATUS_CODES[503]}\r\nconnection: close\r\nretry-after: 1\r\ncontent-type: text/plain\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
    () => socket.destroy()
  )
}

/**
 * A `node:http` server holding at most `maxConnections` connections: one more gets 503 and is closed before
 * it is read, and each is counted until it closes. Refusals are reported once per 10 s with their count.
 * Node's own timeouts bound a request's headers (`headersTimeoutMillis`) and, behind `bodyTimeout`, the
 * whole request; they are checked every second. Closing it cuts the connections still open.
 */
export const makeNodeServer = (limits: ConnectionLimits, warn: (message: string) => void): NodeServer => {
  const server = createServer({
    headersTimeout: headersTimeoutMillis,
    requestTimeout: Number.isFinite(limits.bodyMillis) ? limits.bodyMillis + headersTimeoutMillis : 0,
    connectionsCheckingInterval: 1_000
  })
  let open = 0
  const refused = { count: 0, since: -Infinity }
  server.on("connection", (socket: Socket) => {
    if (open >= limits.maxConnections) {
      const now = Date.now()
      refused.count++
      if (now - refused.since >= 10_000) {
        warn(`MCP over HTTP: ${refused.count} connection(s) refused since the last line: ` +
          `${limits.maxConnections} are open (maxConnections)`)
        refused.count = 0
        refused.since = now
      }
      return refuse(socket, `the MCP server holds ${limits.maxConnections} connections already\n`)
    }
    open++
    socket.once("close", () => void open--)
  })
  // Closing waits for every connection to end: those still open then (a stream, a body never finished) are cut.
  const close = server.close.bind(server)
  server.close = (callback) => {
    close(callback)
    server.closeAllConnections()
    return server
  }
  return server
}

/** The Protected Resource Metadata (RFC 9728) of `oauth`, as JSON: public, for any client. */
export const metadataResponse = (oauth: OAuth.OAuthOptions) =>
  HttpServerResponse.unsafeJson(OAuth.metadata(oauth), { headers: { "cache-control": "max-age=300" } })
