/**
 * `Mcp.layerHttp` as an OAuth 2.1 resource server, against a test authorization server on 127.0.0.1 (its
 * metadata and JWKS served over real HTTP, its keys and tokens made with jose): the Protected Resource Metadata
 * (RFC 9728's parameters, at its well-known paths); a valid token with the tool's scope calls it through the official client; no token, wrong audience,
 * wrong issuer, expired, unsigned (`alg: none`), another key, a scope short: 401/403 with the right
 * `WWW-Authenticate` (a tool's challenge asking for all the call needs); a rotation of the server's keys is picked
 * up; each subject sees only its own tasks, whatever its token; a tool scope of no tool is a warning. The official
 * client's whole OAuth flow: McpOAuthClient.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Logger, Schema } from "effect"
import { OAuthProtectedResourceMetadataSchema } from "@modelcontextprotocol/sdk/shared/auth.js"
import { UnsecuredJWT } from "jose"
import { Mcp } from "../src/exports/mcp.js"
import { Tool, Toolkit } from "../src/index.js"
import { authorizationServer, newKey } from "./support/authorizationServer.js"
import { echoToolkit, initialize, mcpServer, mcpSessionWith } from "./support/mcpHttp.js"

/** RFC 9728 section 2's metadata parameters (and section 2.2's signed_metadata). */
const rfc9728Parameters = [
  "resource",
  "authorization_servers",
  "jwks_uri",
  "scopes_supported",
  "bearer_methods_supported",
  "resource_signing_alg_values_supported",
  "resource_name",
  "resource_documentation",
  "resource_policy_uri",
  "resource_tos_uri",
  "tls_client_certificate_bound_access_tokens",
  "authorization_details_types_supported",
  "dpop_signing_alg_values_supported",
  "dpop_bound_access_tokens_required",
  "signed_metadata"
]

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
        otherKey: yield* as.sign({ sub: "alice", scope: "mcp echo:call" }, { aud: resource, key: yield* Effect.promise(() => newKey("k1")) })
      }
      // Each: 401, invalid_token, the metadata's URL, and a description naming what failed.
      const why = {
        audience: "the token's aud claim is not accepted here",
        issuer: "the token's iss claim is not accepted here",
        expired: "the token has expired",
        unsigned: "the token's signing algorithm is not accepted (an asymmetric one is needed)",
        otherKey: "the token is not signed by a key of the authorization server"
      }
      for (const [name, token] of Object.entries(refused)) {
        const response = yield* post(port, token, initialize)
        assert.strictEqual(response.status, 401, name)
        assert.strictEqual(
          response.headers.get("www-authenticate"),
          `Bearer resource_metadata="${metadataUrl}", error="invalid_token", error_description="${why[name as keyof typeof why]}"`,
          name
        )
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
      // Its challenge asks for all a token needs for the call: the server's scopes and the tool's.
      const call = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "echo", arguments: { text: "hi" } } }
      const toolShort = yield* post(port, yield* as.sign({ sub: "bob", scope: "mcp" }, { aud: resource }), call)
      assert.strictEqual(toolShort.status, 403)
      assert.strictEqual(
        toolShort.headers.get("www-authenticate"),
        `Bearer resource_metadata="${metadataUrl}", error="insufficient_scope", ` +
          `error_description="calling this tool needs the scope echo:call", scope="mcp echo:call"`
      )
      // Rotation: the server publishes a new key and signs with it; the resource fetches the keys again.
      const fetches = as.state.jwksFetches
      const rotated = yield* Effect.promise(() => newKey("k2"))
      as.state.keys = [rotated]
      const fresh = yield* as.sign({ sub: "carol", scope: "mcp echo:call" }, { aud: resource, key: rotated })
      const after = yield* post(port, fresh, initialize)
      assert.strictEqual(after.status, 200)
      assert.isAbove(as.state.jwksFetches, fetches)
    }), 60_000)

  it.scopedLive("the metadata document: RFC 9728's fields and types, for the resource its well-known URL was made from", () =>
    Effect.gen(function*() {
      const as = yield* authorizationServer
      const resource = "https://mcp.example.test/mcp"
      const oauth: Mcp.OAuthOptions = { issuer: as.issuer, resource, scopes: ["mcp"], toolScopes: { echo: "echo:call" } }
      const port = yield* mcpServer(echoToolkit, undefined, { oauth })
      // Section 3.1: the well-known name inserted before the resource's path; also at the bare name, for older clients.
      for (const path of ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]) {
        const response = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}${path}`))
        assert.strictEqual(response.status, 200, path)
        assert.match(response.headers.get("content-type") ?? "", /^application\/json\b/, path)
        const document = (yield* Effect.promise(() => response.json())) as Record<string, unknown>
        // Section 2: registered parameters only, each of its type (the official SDK's schema of them).
        assert.isTrue(OAuthProtectedResourceMetadataSchema.safeParse(document).success, path)
        for (const key of Object.keys(document)) assert.include(rfc9728Parameters, key, path)
        // Section 3.3: the resource is the identifier the well-known URL was made from.
        assert.strictEqual(document.resource, resource, path)
        // Issuer identifiers (RFC 8414: https or, here, loopback http; no query or fragment), bearer methods of RFC 6750.
        assert.deepStrictEqual(document.authorization_servers, [as.issuer], path)
        assert.deepStrictEqual(document.bearer_methods_supported, ["header"], path)
        assert.deepStrictEqual(document.scopes_supported, ["mcp", "echo:call"], path)
      }
      // Without a scope, scopes_supported is left out (it is optional), not given empty.
      const bare = yield* mcpServer(echoToolkit, undefined, { oauth: { issuer: as.issuer, resource } })
      const document = yield* Effect.promise(() => fetch(`http://127.0.0.1:${bare}/.well-known/oauth-protected-resource/mcp`).then((r) => r.json()))
      assert.deepStrictEqual(document, { resource, authorization_servers: [as.issuer], bearer_methods_supported: ["header"] })
    }), 60_000)

  it.scopedLive("a tool scope for a tool the toolkit does not have is a warning at start, naming it and the tools", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const collect = Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${String(message)}`))
      const oauth: Mcp.OAuthOptions = { issuer: "https://auth.example.test", resource: "https://mcp.example.test/mcp", toolScopes: { ecko: "echo:call" } }
      yield* mcpServer(echoToolkit, undefined, { oauth }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, collect)))
      assert.deepStrictEqual(lines, [
        "WARN MCP over HTTP: oauth.toolScopes names ecko, which the toolkit does not have; its tools are echo"
      ])
    }))

  it.scopedLive("tasks are the subject's: another subject's client sees none of them; the same subject's next token all", () =>
    Effect.gen(function*() {
      const as = yield* authorizationServer
      const release = yield* Deferred.make<void>()
      const slow = Tool.make("slow", {
        description: "Slow.",
        input: { text: Schema.String },
        output: Schema.String,
        timeout: "30 seconds"
      }, ({ text }) => Effect.as(Deferred.await(release), text))
      const resource = "https://mcp.example.test/mcp"
      const port = yield* mcpServer(yield* Toolkit.make(slow), Mcp.Tasks.layerMemory, { oauth: { issuer: as.issuer, resource } })
      const session = (sub: string) =>
        Effect.flatMap(as.sign({ sub }, { aud: resource }), (token) => mcpSessionWith(port, { authorization: `Bearer ${token}` }))
      const alice = yield* session("alice")
      const bob = yield* session("bob")
      const created = yield* Effect.promise(() =>
        alice.request({ method: "tools/call", params: { name: "slow", arguments: { text: "hi" }, task: { ttl: 60_000 } } }, CreateTaskResultSchema)
      )
      const taskId = created.task.taskId
      const refused = (request: () => Promise<unknown>) => Effect.promise(() => request().then(() => false, () => true))
      assert.isTrue(yield* refused(() => bob.experimental.tasks.getTask(taskId)))
      assert.isTrue(yield* refused(() => bob.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)))
      assert.isTrue(yield* refused(() => bob.experimental.tasks.cancelTask(taskId)))
      assert.deepStrictEqual((yield* Effect.promise(() => bob.experimental.tasks.listTasks())).tasks, [])
      // Alice again, with a token of her own issued later: the principal is the issuer and subject, not the token.
      const later = yield* session("alice")
      yield* Deferred.succeed(release, undefined)
      const result = yield* Effect.promise(() => later.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))
      assert.deepStrictEqual(result.structuredContent, { result: "hi" })
      assert.deepStrictEqual((yield* Effect.promise(() => later.experimental.tasks.listTasks())).tasks.map((t) => t.taskId), [taskId])
    }), 30_000)
})
