/**
 * The operator API's server (docs: operations): OperatorApi.ts's routes (OperatorRoutes.ts) as a `node:http`
 * request listener for the platform's own server (WebSocket.ts), behind three checks. A request from another
 * site is refused before anything else (`foreignRequest`: its `Host` must name this server, its `Origin`, when
 * sent, this server too): a page a browser shows cannot reach the API, nor can a DNS name rebound to it. A body
 * is held to `maxBodyBytes`. Then each route but the OpenAPI document's takes an operator token
 * (`Authorization: Bearer`), found by its SHA-256 digest compared with each known one in constant time
 * (`timingSafeEqual`), never logged, never an agent's; its role is checked by the route. The console's pages
 * (Console.ts, docs: console), when the platform has them, come after the first check and take no token.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import type * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Clock, Context, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { ConsoleOptions, OperatorToken } from "../Options.js"
import { makeFeed } from "./Feeds.js"
import { isConsolePath, type OperatorListener, type Served } from "./Listener.js"
import { OperatorAuth, OperatorUnauthorized } from "./OperatorApi.js"
import { layerApi } from "./OperatorRoutes.js"
import { type OperatedPlatform, type Operations, operationsOf } from "./Operations.js"

/** The largest request body the API reads (a decision and its reason are far smaller). */
export const maxBodyBytes = 16 * 1024

// --- tokens ---

const digestOf = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()

/**
 * The operator a token names, or undefined: its digest compared with every known one's, each in constant time
 * and all of them always, so that the time taken tells nothing of which token, or how much of one, matched.
 */
export const makeTokenBook = (tokens: ReadonlyArray<OperatorToken>) => {
  const known = tokens.map((token) => ({ digest: digestOf(Redacted.value(token.token)), role: token.role, name: token.name }))
  return (presented: string): { readonly name: string; readonly role: OperatorToken["role"] } | undefined => {
    const digest = digestOf(presented)
    let found: (typeof known)[number] | undefined
    for (const entry of known) if (timingSafeEqual(entry.digest, digest) && found === undefined) found = entry
    return found === undefined ? undefined : { name: found.name, role: found.role }
  }
}

/** The security middleware: the bearer token of the request's `Authorization` header, or 401 saying what is wrong. */
const layerAuth = (tokens: ReadonlyArray<OperatorToken>) => {
  const find = makeTokenBook(tokens)
  const refused = (reason: string) => Effect.fail(new OperatorUnauthorized({ reason }))
  return Layer.succeed(OperatorAuth, {
    // The header is read here, not from the decoded credential: an absent one and a malformed one are told apart.
    bearer: () =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
        const header = request.headers.authorization
        if (header === undefined) return refused("no operator token: send Authorization: Bearer <operator token>")
        const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
        if (match === null) return refused("the Authorization header is not Bearer <operator token>")
        const operator = find(match[1]!)
        return operator === undefined
          ? refused("the operator token is not known to this platform (an agent's token is not an operator's)")
          : Effect.succeed(operator)
      })
  })
}

// --- requests from another site ---

const loopback = new Set(["127.0.0.1", "::1", "localhost"])
const everywhere = new Set(["0.0.0.0", "::"])

/**
 * The `Host` values the API answers: its listening `host:port` (a loopback or every-interface host also as
 * `localhost`, `127.0.0.1` and `[::1]` with the port), and `hosts`, as a client sends them; lowercase.
 */
export const allowedHosts = (address: { readonly host: string; readonly port: number }, hosts: ReadonlyArray<string>) => {
  const named = (host: string) => `${host.includes(":") ? `[${host}]` : host}:${address.port}`
  const allowed = new Set(hosts.map((host) => host.toLowerCase()))
  if (!everywhere.has(address.host)) allowed.add(named(address.host).toLowerCase())
  if (loopback.has(address.host) || everywhere.has(address.host)) for (const host of loopback) allowed.add(named(host))
  return allowed
}

/**
 * Why a request is refused as another site's, or undefined: a `Host` this server does not answer; an `Origin`
 * other than this server's (the `Host`, over http or https); a browser's `Sec-Fetch-Site: cross-site`.
 */
export const foreignRequest = (
  headers: IncomingMessage["headers"],
  allowed: ReadonlySet<string>
): string | undefined => {
  const host = headers.host?.toLowerCase()
  if (host === undefined || !allowed.has(host)) {
    return "the Host header does not name this server (the operator API answers its listening address and operatorHosts)"
  }
  const origin = headers.origin?.toLowerCase()
  if (origin !== undefined && origin !== `http://${host}` && origin !== `https://${host}`) {
    return "a request from another site (its Origin is not this server's) is refused"
  }
  if (headers["sec-fetch-site"] === "cross-site") return "a request from another site (Sec-Fetch-Site: cross-site) is refused"
  return undefined
}

/** A refusal before the routes, in the API's error form. */
const refuse = (response: ServerResponse, status: number, tag: string, reason: string) => {
  const body = JSON.stringify({ _tag: tag, reason })
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" })
  response.end(body)
}

// --- the listener ---

/** The API's settings: its tokens, the `Host` values it answers besides its own, and the console's, when it has one. */
interface Settings {
  readonly tokens: ReadonlyArray<OperatorToken>
  readonly hosts: ReadonlyArray<string>
  readonly console?: ConsoleOptions | undefined
}

/**
 * The request listener of `operations`' API for `served`: the checks, then the routes (`HttpApiBuilder`'s app
 * on `@effect/platform-node`'s request conversion), each request a fiber of its own, interrupted if its client goes.
 */
const listenerOf = (
  operations: Operations,
  settings: Settings
) =>
(served: Served): Effect.Effect<(request: IncomingMessage, response: ServerResponse) => void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      layerApi(operations, served.connections, layerAuth(settings.tokens)).pipe(
        Layer.provideMerge(HttpApiBuilder.Router.Live),
        Layer.provideMerge(HttpApiBuilder.Middleware.layer),
        Layer.provideMerge(NodeHttpServer.layerContext)
      )
    )
    const app: HttpApp.Default<never, HttpRouter.HttpRouter.DefaultServices> = yield* Effect.provide(
      HttpApiBuilder.httpApp,
      context
    )
    const handler = yield* NodeHttpServer.makeHandler(
      HttpIncomingMessage.withMaxBodySize(app, Option.some(maxBodyBytes))
    ).pipe(Effect.provide(context))
    // The console's pages (docs: console), behind the same check of another site's requests.
    const consolePages = settings.console === undefined
      ? undefined
      : yield* Effect.promise(() => import("./Console.js")).pipe(Effect.flatMap((pages) => pages.make(settings.console!)))
    let allowed = allowedHosts(served.address(), settings.hosts)
    let port = served.address().port
    return (request, response) => {
      // The port is known once the server listens (0 picks one).
      if (served.address().port !== port) {
        port = served.address().port
        allowed = allowedHosts(served.address(), settings.hosts)
      }
      const foreign = foreignRequest(request.headers, allowed)
      if (foreign !== undefined) return refuse(response, 403, "OperatorForbidden", foreign)
      if (isConsolePath(request.url)) {
        if (consolePages === undefined) return refuse(response, 404, "OperatorNotFound", "this platform has no console (--console)")
        return consolePages(request, response)
      }
      if (Number(request.headers["content-length"] ?? 0) > maxBodyBytes) {
        return refuse(response, 413, "OperatorBadRequest", `a body over ${maxBodyBytes} bytes is refused`)
      }
      handler(request, response)
    }
  })

/**
 * A platform process's operator API: its operations on its parts, its backend's decisions and its journal,
 * with the platform's feed of events kept from now on (let go with the scope).
 */
export const make = (
  settings: Settings,
  platform: OperatedPlatform
): Effect.Effect<Context.Tag.Service<typeof OperatorListener>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const feed = makeFeed(platform.parts.tasks.watch, yield* Clock.currentTimeMillis)
    yield* Effect.addFinalizer(() => Effect.sync(feed.stop))
    const operations = operationsOf(platform, feed)
    return { listener: listenerOf(operations, settings) }
  })
