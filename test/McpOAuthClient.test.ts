/**
 * The official SDK client's OAuth flow against `Mcp.layerHttp` as a resource server, end to end over real HTTP on
 * 127.0.0.1: it starts with no token, gets 401 with the metadata's URL, discovers the resource's metadata (RFC
 * 9728) and the authorization server's (RFC 8414), registers (RFC 7591), authorizes with PKCE for our resource
 * (RFC 8707), exchanges the code, and calls the tool its scope allows; the token's audience is our resource. When
 * the authorization server rotates its keys, the old token is refused and the client's refresh token gets one
 * signed with the new key, which the server checks against the keys it fetches again.
 */
import { assert, describe, it } from "@effect/vitest"
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { Effect, Layer } from "effect"
import { decodeJwt, decodeProtectedHeader } from "jose"
import { createHash } from "node:crypto"
import { Mcp } from "../src/exports/mcp.js"
import { authorizationServer, connectWithOAuth as connect, newKey, TestProvider } from "./support/authorizationServer.js"
import { echoToolkit } from "./support/mcpHttp.js"
import { freePort } from "./support/postgres.js"

describe("the official client's OAuth flow against Mcp.layerHttp", () => {
  it.scopedLive("no token, discovery, registration, PKCE, a token for our resource, the tool called; a refresh after a rotation", () =>
    Effect.gen(function*() {
      const as = yield* authorizationServer
      // The resource is the URL the client connects to: the SDK checks the metadata's resource against it.
      const port = yield* Effect.promise(freePort)
      const resource = `http://127.0.0.1:${port}/mcp`
      // The keys are kept no time here: a key the authorization server withdraws is refused at the next request.
      const oauth: Mcp.OAuthOptions = {
        issuer: as.issuer,
        resource,
        scopes: ["mcp"],
        toolScopes: { echo: "echo:call" },
        jwksCooldownMillis: 0,
        jwksMaxAgeMillis: 0
      }
      yield* Layer.build(Mcp.layerHttp(echoToolkit, { port, oauth }))
      const provider = new TestProvider()
      // First connection: 401, then discovery, registration and the authorization request, which ends with a code.
      const first = yield* connect(resource, provider)
      assert.instanceOf(first.failure, UnauthorizedError)
      assert.strictEqual(as.state.clients.size, 1)
      assert.isString(provider.code)
      yield* Effect.promise(() => first.transport.finishAuth(provider.code!))
      const exchange = as.state.tokenRequests[0]!
      assert.strictEqual(exchange.grant_type, "authorization_code")
      assert.strictEqual(exchange.resource, resource)
      // The token: for our resource, with the scopes the resource's metadata lists (the client asked for them).
      const claims = decodeJwt(provider.saved!.access_token)
      assert.strictEqual(claims.aud, resource)
      assert.strictEqual(claims.iss, as.issuer)
      assert.deepStrictEqual(String(claims.scope).split(" ").sort(), ["echo:call", "mcp"])
      // Connected with it, the client calls the tool.
      const second = yield* connect(resource, provider)
      assert.isUndefined(second.failure)
      const result = yield* Effect.promise(() => second.client.callTool({ name: "echo", arguments: { text: "hi" } }))
      assert.deepStrictEqual(result.structuredContent, { result: "hi" })
      // The authorization server replaces its key: the old token is refused (401), the client refreshes and goes on.
      const before = provider.saved!.access_token
      as.state.keys = [yield* Effect.promise(() => newKey("k2"))]
      const again = yield* Effect.promise(() => second.client.callTool({ name: "echo", arguments: { text: "again" } }))
      assert.deepStrictEqual(again.structuredContent, { result: "again" })
      assert.strictEqual(as.state.tokenRequests.at(-1)!.grant_type, "refresh_token")
      assert.notStrictEqual(provider.saved!.access_token, before)
      assert.strictEqual(decodeProtectedHeader(provider.saved!.access_token).kid, "k2")
      assert.strictEqual(decodeJwt(provider.saved!.access_token).aud, resource)
      // The authorization server checks PKCE: a code asked for with one challenge is not exchanged with another verifier.
      const clientId = provider.information!.client_id
      const challenge = createHash("sha256").update("the-right-verifier").digest("base64url")
      const query = new URLSearchParams({ response_type: "code", client_id: clientId, redirect_uri: provider.redirectUrl, resource })
      query.set("code_challenge", challenge)
      query.set("code_challenge_method", "S256")
      const authorize = `${as.issuer}/authorize?${query}`
      const redirected = yield* Effect.promise(() => fetch(authorize, { redirect: "manual" }))
      const code = new URL(redirected.headers.get("location")!).searchParams.get("code")!
      const form = { grant_type: "authorization_code", code, client_id: clientId, redirect_uri: provider.redirectUrl, code_verifier: "another-verifier" }
      const wrong = yield* Effect.promise(() => fetch(`${as.issuer}/token`, { method: "POST", body: new URLSearchParams(form) }))
      assert.strictEqual(wrong.status, 400)
      assert.strictEqual(((yield* Effect.promise(() => wrong.json())) as { error_description: string }).error_description, "code_verifier: does not match the code_challenge")
    }), 60_000)
})
