/**
 * `Mcp.layerHttp` as an OAuth 2.1 resource server, against a test authorization server on 127.0.0.1 (its
 * metadata and JWKS served over real HTTP, its keys and tokens made with jose): the Protected Resource Metadata
 * (RFC 9728); a valid token with the tool's scope calls it through the official client; no token, wrong audience,
 * wrong issuer, expired, unsigned (`alg: none`), another key, a scope short: 401/403 with the right
 * `WWW-Authenticate`; a rotation of the server's keys is picked up; each subject sees only its own tasks.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { exportJWK, generateKeyPair, type JWK, SignJWT, UnsecuredJWT } from "jose"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Mcp } from "../src/exports/mcp.js"
import { echoToolkit, initialize, mcpServer, mcpSessionWith } from "./support/mcpHttp.js"

/** An authorization server: its metadata and JWKS over HTTP, keys it can rotate, and tokens it signs. */
const authorizationServer = Effect.gen(function*() {
  const newKey = async (kid: string) => {
    const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
    return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } as JWK }
  }
  const state = { keys: [yield* Effect.promise(() => newKey("k1"))], jwksFetches: 0 }
  const server = createServer((request, response) => {
    const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const body = request.url === "/.well-known/oauth-authorization-server"
      ? { issuer, jwks_uri: `${issuer}/jwks.json`, token_endpoint: `${issuer}/token` }
      : request.url === "/jwks.json"
      ? (state.jwksFetches++, { keys: state.keys.map((k) => k.jwk) })
      : undefined
    response.writeHead(body === undefined ? 404 : 200, { "content-type": "application/json" })
    response.end(JSON.stringify(body ?? {}))
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
    () => Effect.sync(() => server.close())
  )
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const sign = (claims: Record<string, unknown>, options?: { readonly key?: { readonly kid: string; readonly privateKey: Parameters<SignJWT["sign"]>[0] }; readonly expiresIn?: string; readonly iss?: string; readonly aud?: string }) => {
    const key = options?.key ?? state.keys[0]!
    return Effect.promise(() =>
      new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: key.kid }).setIssuer(options?.iss ?? issuer)
        .setAudience(options?.aud ?? "").setIssuedAt().setExpirationTime(options?.expiresIn ?? "5 minutes").sign(key.privateKey)
    )
  }
  return { issuer, state, newKey, sign }
})

const post = (port: number, token: string | undefined, body: unknown) =>
  Effect.promise(() =>
    fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` })
      },
      body: JSON.stringify(body)
    })
  )

describe("Mcp over HTTP with OAuth", () => {
  it.scopedLive("metadata, valid and refused tokens, scopes, rotation", () =>
    Effect.gen(function*() {
      const as = yield* authorizationServer
      // The resource's canonical URL, as a deployment behind a proxy would name it: tokens carry it as their audience.
      const resource = "https://mcp.example.test/mcp"
      const oauth: Mcp.OAuthOptions = { issuer: as.issuer, resource, scopes: ["mcp"], toolScopes: { echo: "echo:call" }, jwksCooldownMillis: 0 }
      const port = yield* mcpServer(echoToolkit, undefined, { oauth })
      // RFC 9728 metadata at the well-known path for the resource's path.
      const meta = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`).then((r) => r.json()))
      assert.deepStrictEqual(meta, {
        resource,
        authorization_servers: [as.issuer],
        bearer_methods_supported: ["header"],
        scopes_supported: ["mcp", "echo:call"]
      })
      const metadataUrl = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
      // No token: 401 pointing at the metadata.
      const none = yield* post(port, undefined, initialize)
      assert.strictEqual(none.status, 401)
      assert.strictEqual(none.headers.get("www-authenticate"), `Bearer resource_metadata="${metadataUrl}"`)
      const good = yield* as.sign({ sub: "alice", scope: "mcp echo:call" }, { aud: resource })
      const refused = {
        audience: yield* as.sign({ sub: "alice", scope: "mcp echo:call" }, { aud: "http://127.0.0.1:1/other" }),
        issuer: yield* as.sign({ sub: "alice", scope: "mcp echo:call" }, { aud: resource, iss: "http://127.0.0.1:1" }),
        expired: yield* as.sign({ sub: "alice", scope: "mcp echo:call" }, { aud: resource, expiresIn: "-10 minutes" }),
        unsigned: new UnsecuredJWT({ sub: "alice", scope: "mcp echo:call" }).setIssuer(as.issuer).setAudience(resource).setExpirationTime("5 minutes").encode(),
        otherKey: yield* as.sign({ sub: "alice", scope: "mcp echo:call" }, { aud: resource, key: yield* Effect.promise(() => as.newKey("k1")) })
      }
      for (const [why, token] of Object.entries(refused)) {
        const response = yield* post(port, token, initialize)
        assert.strictEqual(response.status, 401, why)
        const header = response.headers.get("www-authenticate") ?? ""
        assert.include(header, `error="invalid_token"`, why)
        assert.include(header, `resource_metadata="${metadataUrl}"`, why)
      }
      // A token without the server's scope: 403 naming it.
      const short = yield* post(port, yield* as.sign({ sub: "alice", scope: "other" }, { aud: resource }), initialize)
      assert.strictEqual(short.status, 403)
      assert.include(short.headers.get("www-authenticate") ?? "", `error="insufficient_scope", error_description="the token lacks the scope mcp", scope="mcp"`)
      // The official client with a valid token calls the tool; without the tool's scope, 403 naming it.
      const client = yield* mcpSessionWith(port, { authorization: `Bearer ${good}` })
      const result = yield* Effect.promise(() => client.callTool({ name: "echo", arguments: { text: "hi" } }))
      assert.deepStrictEqual(result.structuredContent, { result: "hi" })
      const noEcho = yield* mcpSessionWith(port, { authorization: `Bearer ${yield* as.sign({ sub: "bob", scope: "mcp" }, { aud: resource })}` })
      const denied = yield* Effect.promise(() => noEcho.callTool({ name: "echo", arguments: { text: "hi" } }).then(() => "called", (e: Error) => e.message))
      assert.include(denied, "calling this tool needs the scope echo:call", denied)
      // Rotation: the server publishes a new key and signs with it; the resource fetches the keys again.
      const fetches = as.state.jwksFetches
      const rotated = yield* Effect.promise(() => as.newKey("k2"))
      as.state.keys = [rotated]
      const fresh = yield* as.sign({ sub: "carol", scope: "mcp echo:call" }, { aud: resource, key: rotated })
      const after = yield* post(port, fresh, initialize)
      assert.strictEqual(after.status, 200)
      assert.isAbove(as.state.jwksFetches, fetches)
    }), 60_000)
})
