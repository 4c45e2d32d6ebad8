/**
 * MCP over Streamable HTTP, the face `Mcp.layerHttp` serves (design: MCP, Hostile clients): each request checked
 * (Host and Origin, the body read within its limits), then handed to its session's transport, or to a new session
 * for `initialize`; the sessions capped and expired when idle. Requests to the MCP path are taken from Node's server
 * as they come (`Direct`), with no fiber of the Effect HTTP server a request; its router serves the rest.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { type Clock, Duration, Effect, FiberId, Runtime } from "effect"
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server as NodeServer,
  type ServerResponse,
  STATUS_CODES
} from "node:http"
import type { Socket } from "node:net"
import { type Answer, type BodyLimits, closing, isAnswer, jsonRpcError, readPost, send, textAnswer } from "./httpBody.js"
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

// The hostnames of the Host and Origin values seen last: a client sends the same ones with every request.
const hostnames = new Map<string, string | undefined>()

/** The hostname of a Host header or Origin URL, lowercased, or undefined if it has none. */
const hostnameOf = (value: string): string | undefined => {
  if (hostnames.has(value)) return hostnames.get(value)
  let hostname: string | undefined
  try {
    hostname = new URL(value.includes("://") ? value : `http://${value}`).hostname.toLowerCase()
  } catch {
    hostname = undefined
  }
  if (hostnames.size >= 256) hostnames.clear()
  hostnames.set(value, hostname)
  return hostname
}

/**
 * DNS-rebinding protection: a page on another site must not reach a server on this machine. The
 * Host must name this machine (or the configured host); an Origin, when sent, too.
 */
const foreignRequest = (headers: IncomingHttpHeaders, host: string): string | undefined => {
  const allowed = (hostname: string | undefined) =>
    hostname !== undefined && (loopbackHosts.has(hostname) || hostname === host.toLowerCase())
  const hostHeader = headers.host
  if (hostHeader === undefined || !allowed(hostnameOf(hostHeader))) return "the Host header does not name this server"
  const origin = headers.origin
  if (origin !== undefined && !allowed(hostnameOf(origin))) return "the Origin is not allowed"
  return undefined
}

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

/** What the HTTP face holds: its limits, its sessions (open, and opening) and how a new one is served. */
export interface HttpFace extends BodyLimits {
  readonly host: string
  /** Token -> the client's name (for its sessions); undefined: no authentication. */
  readonly tokens: ReadonlyMap<string, string> | undefined
  /** OAuth access tokens checked as JWTs, in place of `tokens` (design: MCP authorization). */
  readonly oauth?: { readonly options: OAuth.OAuthOptions; readonly verify: (token: string) => Promise<OAuth.Principal | OAuth.Refusal> } | undefined
  readonly maxSessions: number
  /** An event stream's bytes waiting for a client that does not read: past this, the stream is closed. */
  readonly maxStreamBufferedBytes: number
  readonly idleMillis: number
  readonly clock: Clock.Clock
  readonly sessions: Map<string, Session>
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

/** Who a request is: the client's name (with `tokens` or `oauth`), and with `oauth` the principal. */
interface Authenticated {
  readonly client: string | undefined
  readonly principal?: OAuth.Principal
}

/** `authenticate` with the static `tokens`. */
const authenticateToken = (face: HttpFace, header: string | undefined, token: string | undefined): Authenticated | Answer => {
  if (face.tokens === undefined) return { client: undefined }
  const client = token === undefined ? undefined : face.tokens.get(token)
  if (client !== undefined) return { client }
  const challenge = header === undefined ? "Bearer realm=\"mcp\"" : "Bearer realm=\"mcp\", error=\"invalid_token\""
  const message = header === undefined
    ? "this MCP server requires a bearer token (Authorization: Bearer <token>)"
    : "the bearer token is not one of this MCP server's"
  return jsonRpcError(401, -32001, message, { ...closing, "www-authenticate": challenge })
}

/** A request whose handling failed (a defect of ours or the SDK's): 500, as the HTTP server answers a defect. */
const failed = (res: ServerResponse) => () => send(res, textAnswer(500, "internal server error"))

/**
 * A request to the MCP path, on Node's own request and response (no fiber a request): checked (host, origin,
 * token, body), then to its session, or a new one for `initialize`. With `tokens`, the token is checked before the
 * body is read or a session counted; with `oauth`, the access token is.
 */
export const handleHttp = (face: HttpFace, req: IncomingMessage, res: ServerResponse): void => {
  const refused = foreignRequest(req.headers, face.host)
  if (refused !== undefined) return send(res, textAnswer(403, refused))
  const header = req.headers.authorization
  const token = header === undefined ? undefined : bearer.exec(header)?.[1]
  const oauth = face.oauth
  if (oauth === undefined) {
    const authenticated = authenticateToken(face, header, token)
    if (isAnswer(authenticated)) return send(res, authenticated)
    return withBody(face, req, res, authenticated)
  }
  if (token === undefined) return send(res, oauthRefusal(oauth.options, undefined))
  oauth.verify(token).then((checked) =>
    "name" in checked
      ? withBody(face, req, res, { client: checked.name, principal: checked })
      : send(res, oauthRefusal(oauth.options, checked)), failed(res))
}

/** The body is read once, here, and handed to the transport parsed: the web Request has none. */
const withBody = (face: HttpFace, req: IncomingMessage, res: ServerResponse, authenticated: Authenticated): void => {
  if (req.method !== "POST") return toSession(face, req, res, authenticated, undefined)
  readPost(req, res, face, (read) =>
    isAnswer(read) ? send(res, read) : toSession(face, req, res, authenticated, read.parsedBody))
}

/** The value of a header as the web's `Headers` gives it: repeated values joined. */
const headerValue = (value: string | Array<string> | undefined): string | null =>
  value === undefined ? null : Array.isArray(value) ? value.join(", ") : value

/** Node's headers read as the web's `Headers` are (lowercase names). */
class NodeHeaders {
  constructor(private readonly headers: IncomingHttpHeaders) {}
  get(name: string): string | null {
    return headerValue(this.headers[name.toLowerCase()])
  }
  has(name: string): boolean {
    return this.headers[name.toLowerCase()] !== undefined
  }
  *entries(): IterableIterator<[string, string]> {
    for (const name of Object.keys(this.headers)) {
      const value = headerValue(this.headers[name])
      if (value !== null) yield [name, value]
    }
  }
  [Symbol.iterator]() {
    return this.entries()
  }
  forEach(f: (value: string, name: string) => void): void {
    for (const [name, value] of this.entries()) f(value, name)
  }
}

/**
 * The request as the SDK's transport reads it: its method, URL and headers (the body is handed over parsed). Node's
 * request read in place: a web `Request` cost tens of microseconds a request to build (its headers copied and
 * checked, its signal made), as much as the call itself.
 */
const webRequest = (req: IncomingMessage): Request => {
  let url = "http://127.0.0.1/mcp"
  try {
    url = new URL(req.url ?? "/", `http://${req.headers.host}`).href
  } catch {
    // The fallback: the transport reads the URL for the request's info only.
  }
  return { method: req.method!, url, headers: new NodeHeaders(req.headers) } as unknown as Request
}

/** A checked request with its body, to its session, or to a new one for `initialize`. */
const toSession = (face: HttpFace, req: IncomingMessage, res: ServerResponse, authenticated: Authenticated, parsedBody: unknown) => {
  // A tool's own scope, checked once the body says which tool is called.
  if (face.oauth !== undefined && authenticated.principal !== undefined) {
    const scope = OAuth.missingToolScope(face.oauth.options, authenticated.principal, parsedBody)
    if (scope !== undefined) return send(res, oauthRefusal(face.oauth.options, OAuth.toolScopeRefusal(face.oauth.options, scope)))
  }
  const client = authenticated.client
  const sessionId = req.headers["mcp-session-id"] as string | undefined
  const known = sessionId === undefined ? undefined : face.sessions.get(sessionId)
  // Another token's session is as good as unknown: its id tells a client nothing.
  if (sessionId !== undefined && (known === undefined || known.client !== client)) {
    return send(res, textAnswer(404, "unknown or closed MCP session"))
  }
  if (known !== undefined) return inSession(face, known, webRequest(req), parsedBody, res)
  if (isInitializeRequest(parsedBody) && face.sessions.size + face.opening >= face.maxSessions) {
    return send(res, jsonRpcError(
      503,
      -32000,
      `the server has its maximum of ${face.maxSessions} MCP sessions open; close one (DELETE) or retry later`,
      { "retry-after": String(Math.ceil(face.idleMillis / 1000)) }
    ))
  }
  // A new session: its first request must be `initialize` (the transport answers 400 otherwise).
  openSession(face, client, webRequest(req), parsedBody, res)
}

/** `BodyLimits.after` on `runtime`, by `clock` (a fiber only for a body still arriving once its first bytes are read). */
export const afterOn = (runtime: Runtime.Runtime<never>, clock: Clock.Clock) => (millis: number, f: () => void) => {
  if (!Number.isFinite(millis)) return () => undefined
  const fiber = Runtime.runFork(runtime)(Effect.andThen(clock.sleep(Duration.millis(millis)), Effect.sync(f)))
  return () => fiber.unsafeInterruptAsFork(FiberId.none)
}

/** A request begins or ends in `session`: it is busy meanwhile, and active as of now. */
const busy = (face: HttpFace, session: Session, by: 1 | -1) => {
  session.busy += by
  session.lastActive = face.clock.unsafeCurrentTimeMillis()
}

/**
 * A request of a known session, through its transport. A GET's stream, once open, does not keep the session: it
 * ends with the session when the session expires.
 */
const inSession = (face: HttpFace, session: Session, web: Request, parsedBody: unknown, res: ServerResponse) => {
  busy(face, session, 1)
  const transport = session.transport
  let answering = true
  // The HTTP request closed before its answer: cancel its calls, as notifications/cancelled would.
  const onClose = () => {
    answering = false
    busy(face, session, -1)
    for (const requestId of requestIds(parsedBody)) {
      transport.onmessage?.({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId, reason: "the HTTP request closed" }
      })
    }
  }
  res.once("close", onClose)
  transport.handleRequest(web, { parsedBody }).then((response) => {
    if (!answering) return void response.body?.cancel().catch(() => undefined)
    res.off("close", onClose)
    busy(face, session, -1)
    releaseAnswered(transport)
    writeWeb(res, response, web.method === "GET", face.maxStreamBufferedBytes)
  }).catch(failed(res))
}

/**
 * The transport's web Response, written to Node's: a JSON answer at once, with its length; an SSE stream as its
 * events come (a GET's with `streamOpened` first), cancelled when the client goes away or stops reading
 * (`maxBuffered` bytes waiting for it).
 */
export const writeWeb = (res: ServerResponse, response: Response, get: boolean, maxBuffered: number): void => {
  if (res.destroyed) return void response.body?.cancel().catch(() => undefined)
  const headers: Record<string, string> = {}
  response.headers.forEach((value, key) => {
    headers[key] = value
  })
  const body = response.body
  if (body === null) {
    res.writeHead(response.status, headers)
    return void res.end()
  }
  if ((headers["content-type"] ?? "").startsWith("text/event-stream")) return writeStream(res, response.status, headers, body, get, maxBuffered)
  response.arrayBuffer().then((bytes) => {
    if (res.destroyed) return
    headers["content-length"] = String(bytes.byteLength)
    res.writeHead(response.status, headers)
    res.end(Buffer.from(bytes))
  }).catch(failed(res))
}

/**
 * An SSE body written as its events come, `streamOpened` first when `opened`; the client gone, the stream
 * cancelled. Read as it comes, not as the client reads: a client that holds the stream open and never reads
 * it would otherwise have every event queue for it until its session expires. Past `maxBuffered` bytes
 * waiting to be sent, the stream is closed (and the events it would carry dropped by the transport, as for a
 * client that closed it); the client may open another.
 */
const writeStream = (
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: ReadableStream<Uint8Array>,
  opened: boolean,
  maxBuffered: number
): void => {
  const reader = body.getReader()
  let open = true
  const onClose = () => {
    open = false
    reader.cancel().catch(() => undefined)
  }
  res.once("close", onClose)
  res.writeHead(status, headers)
  if (opened) res.write(streamOpened)
  const end = () => {
    if (!open) return
    res.off("close", onClose)
    res.end()
  }
  const next = (): void => {
    reader.read().then((chunk) => {
      if (!open) return
      if (chunk.done) return end()
      res.write(chunk.value)
      if (res.writableLength > maxBuffered) return void res.destroy()
      next()
    }, end)
  }
  next()
}

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

/**
 * A new session: its server and transport, kept once the transport names it (its `initialize` went through). It
 * counts towards the cap while it opens, until its answer or the client going away.
 */
const openSession = (face: HttpFace, client: string | undefined, web: Request, parsedBody: unknown, res: ServerResponse) => {
  face.opening++
  let opening = true
  const opened = () => {
    if (opening) face.opening--
    opening = false
  }
  res.once("close", opened)
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
  served.server.connect(transport)
    .then(() => transport.handleRequest(web, { parsedBody }))
    .then(async (response) => {
      releaseAnswered(transport)
      if (transport.sessionId === undefined) await Effect.runPromise(served.close)
      opened()
      res.off("close", opened)
      writeWeb(res, response, false, face.maxStreamBufferedBytes)
    })
    .catch(failed(res))
}

/**
 * A request to the MCP path through the Effect HTTP server's router (a path that is a pattern; a plain path is
 * taken from Node at once, `Direct`): handled as `handleHttp` does, on the request's Node objects.
 */
export const handleRouted = (face: HttpFace, request: HttpServerRequest.HttpServerRequest) =>
  Effect.async<HttpServerResponse.HttpServerResponse>((resume) => {
    const res = NodeHttpServerRequest.toServerResponse(request)
    let done = false
    const finished = () => {
      if (!done) resume(Effect.succeed(HttpServerResponse.empty()))
      done = true
    }
    res.once("finish", finished)
    res.once("close", finished)
    handleHttp(face, NodeHttpServerRequest.toIncomingMessage(request), res)
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
 * The MCP path taken from Node's server as requests come, before the Effect HTTP server sees them (a fiber, its
 * router and its response for every request cost more than the MCP call itself): `handle` once the face is up.
 */
export interface Direct {
  /** A plain path (`/mcp`); undefined for a pattern, which the router matches. */
  readonly path: string | undefined
  handle: ((req: IncomingMessage, res: ServerResponse) => void) | undefined
}

/** The request's path, without its query. */
const pathOf = (url: string | undefined): string => {
  const query = url === undefined ? -1 : url.indexOf("?")
  return query === -1 ? url ?? "" : url!.slice(0, query)
}

/**
 * A `node:http` server holding at most `maxConnections` connections: one more gets 503 and is closed before
 * it is read, and each is counted until it closes. Refusals are reported once per 10 s with their count.
 * Node's own timeouts bound a request's headers (`headersTimeoutMillis`) and, behind `bodyTimeout`, the
 * whole request; they are checked every second. Closing it cuts the connections still open. A request to
 * `direct`'s path goes to its handler; any other to the server's `request` listeners (the Effect HTTP server's).
 */
export const makeNodeServer = (limits: ConnectionLimits, warn: (message: string) => void, direct?: Direct): NodeServer => {
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
  if (direct?.path === undefined) return server
  const emit = server.emit
  server.emit = function(this: NodeServer, event: string | symbol, ...args: Array<unknown>) {
    const handle = direct.handle
    if (event === "request" && handle !== undefined && pathOf((args[0] as IncomingMessage).url) === direct.path) {
      const res = args[1] as ServerResponse
      try {
        handle(args[0] as IncomingMessage, res)
      } catch {
        failed(res)()
      }
      return true
    }
    return Reflect.apply(emit, this, [event, ...args]) as boolean
  } as NodeServer["emit"]
  return server
}

/** The Protected Resource Metadata (RFC 9728) of `oauth`, as JSON: public, for any client. */
export const metadataResponse = (oauth: OAuth.OAuthOptions) =>
  HttpServerResponse.unsafeJson(OAuth.metadata(oauth), { headers: { "cache-control": "max-age=300" } })
