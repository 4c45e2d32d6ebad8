/**
 * The console's pages on the platform's port (docs: console), by real HTTP requests: served only with `console`
 * on (and operator tokens), each with its CSP, `nosniff` and no cookie; GET and HEAD only; another site's
 * request refused as the API refuses it; the trace URL template given to the client; the client under its
 * size budget; and the API's `GET /operator` telling the client who its token is.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Exit, Layer, Logger, LogLevel, Scope } from "effect"
import { request as httpRequest } from "node:http"
import { gzipSync } from "node:zlib"
import { Journal, LanguageModel } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { operatorTokens, viewer } from "../support/operators.js"

const quiet = Logger.withMinimumLogLevel(LogLevel.Error)

const startPlatform = (options: Pick<PlatformServer.Options, "console" | "operatorTokens">) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const listening = yield* Layer.buildWithScope(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]), ...options })),
        Layer.provide(Journal.layerMemory),
        Layer.provide(LanguageModel.layerScripted([])),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))
      ),
      scope
    )
    return Context.get(listening, PlatformServer.Listening).port
  })

const get = (port: number, path: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, init)
    return { status: response.status, headers: response.headers, body: new Uint8Array(await response.arrayBuffer()) }
  })

/** A GET with the `Host` header as given (fetch sends the URL's): its status. */
const withHost = (port: number, host: string) =>
  Effect.async<number>((resume) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/console", headers: { host } })
    req.on("response", (response) => (response.resume(), resume(Effect.succeed(response.statusCode ?? 0))))
    req.on("error", (error) => resume(Effect.die(error)))
    req.end()
  })

describe("the console's pages", () => {
  it.scopedLive("are served with a strict CSP, nosniff and no cookie; the client is under 150 KB gzipped", () =>
    Effect.gen(function*() {
      const port = yield* startPlatform({ operatorTokens, console: { traceUrl: "https://ui.honeycomb.io/trace?trace_id={traceId}" } })
      const page = yield* get(port, "/console")
      assert.strictEqual(page.status, 200)
      assert.strictEqual(page.headers.get("content-type"), "text/html; charset=utf-8")
      const csp = page.headers.get("content-security-policy") ?? ""
      assert.include(csp, "default-src 'none'")
      assert.include(csp, "script-src 'self';")
      assert.include(csp, "connect-src 'self';")
      assert.include(csp, "frame-ancestors 'none'")
      assert.notInclude(csp, "unsafe")
      assert.strictEqual(page.headers.get("x-content-type-options"), "nosniff")
      assert.isNull(page.headers.get("set-cookie"))
      const html = new TextDecoder().decode(page.body)
      assert.include(html, "<script type=\"module\" src=\"/console/console.js\"></script>")
      assert.notMatch(html, /<script>|<script [^>]*>[^<]/, "no inline script in the page")

      const script = yield* get(port, "/console/console.js")
      assert.strictEqual(script.status, 200)
      assert.strictEqual(script.headers.get("content-type"), "text/javascript; charset=utf-8")
      assert.isBelow(gzipSync(script.body).byteLength, 150 * 1024)
      assert.notInclude(new TextDecoder().decode(script.body), "innerHTML", "the client makes no element from markup")

      const config = yield* get(port, "/console/config.json")
      assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(config.body)), {
        traceUrl: "https://ui.honeycomb.io/trace?trace_id={traceId}"
      })
      assert.strictEqual((yield* get(port, "/console/nothing.js")).status, 404)
      const post = yield* get(port, "/console", { method: "POST", body: "x" })
      assert.strictEqual(post.status, 405)
      assert.strictEqual(yield* withHost(port, "evil.example"), 403, "a rebound DNS name is refused")
      const foreign = yield* get(port, "/console", { headers: { origin: "http://evil.example" } })
      assert.strictEqual(foreign.status, 403)
    }).pipe(quiet), 30_000)

  it.scopedLive("are not served without console on; GET /api/v1/operator names the token's operator and role", () =>
    Effect.gen(function*() {
      const port = yield* startPlatform({ operatorTokens })
      const none = yield* get(port, "/console")
      assert.strictEqual(none.status, 404)
      assert.include(new TextDecoder().decode(none.body), "no console")
      const me = yield* get(port, "/api/v1/operator", { headers: { authorization: `Bearer ${viewer}` } })
      assert.deepStrictEqual(JSON.parse(new TextDecoder().decode(me.body)), { name: "vera", role: "viewer" })
      assert.strictEqual((yield* get(port, "/api/v1/operator")).status, 401)
      const noApi = yield* startPlatform({ operatorTokens: [], console: true })
      assert.strictEqual((yield* get(noApi, "/console")).status, 426, "no operator token: no API, no console")
    }).pipe(quiet), 30_000)
})
