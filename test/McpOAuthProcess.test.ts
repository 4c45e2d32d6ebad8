/**
 * `agent-tools mcp --http` configured for OAuth by its flags (`--oauth-issuer`, `--oauth-resource`, `--oauth-scopes`,
 * `--oauth-tool-scopes`), spawned as a real process, and the official SDK client's OAuth flow against it: 401, discovery,
 * registration, PKCE, a token for its resource, the tool called. The `MCP_OAUTH_*` variables set to something else
 * show the flags win. In the slow project (a real process); the wait for start-up is a generous bound.
 */
import { assert, describe, it } from "@effect/vitest"
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { Effect } from "effect"
import { decodeJwt } from "jose"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { authorizationServer, connectWithOAuth, TestProvider } from "./support/authorizationServer.js"
import { freePort } from "./support/postgres.js"

const root = fileURLToPath(new URL("..", import.meta.url))

/** `src/main.ts mcp --http` with `args`, killed with the scope; what it printed once it says it listens (120 s at most). */
const startServer = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const { MCP_TOKENS: _tokens, MCP_JOURNAL: _journal, ...inherited } = process.env
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "mcp", "--http", ...args], {
        cwd: root,
        env: { ...inherited, ...env, LOG_LEVEL: "info", ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "" },
        stdio: "pipe"
      })
      return child
    }),
    (child) => Effect.sync(() => child.kill("SIGKILL"))
  ).pipe(Effect.flatMap((child) =>
    Effect.async<string>((resume) => {
      let output = ""
      const timer = setTimeout(() => resume(Effect.die(new Error(`not listening within 120 s:\n${output}`))), 120_000)
      const onData = (chunk: unknown) => {
        output += String(chunk)
        if (/127\.0\.0\.1:\d+\/mcp/.test(output)) {
          clearTimeout(timer)
          resume(Effect.succeed(output))
        }
      }
      child.stdout.on("data", onData)
      child.stderr.on("data", onData)
      child.on("exit", () => resume(Effect.die(new Error(`the server exited:\n${output}`))))
    })
  ))

describe("agent-tools mcp --http with the --oauth-* flags", () => {
  it.scopedLive("the official client's OAuth flow reaches a tool of the spawned server", () =>
    Effect.gen(function*() {
      const as = yield* authorizationServer
      const port = yield* Effect.promise(freePort)
      const resource = `http://127.0.0.1:${port}/mcp`
      const output = yield* startServer([
        "--port", String(port),
        "--tools", "test/fixtures/cliTools.ts",
        "--oauth-issuer", as.issuer,
        "--oauth-resource", resource,
        "--oauth-scopes", "mcp",
        "--oauth-tool-scopes", "greet:people.greet"
      ], { MCP_OAUTH_ISSUER: "https://elsewhere.example.com", MCP_OAUTH_RESOURCE: "https://elsewhere.example.com/mcp" })
      assert.include(output, `OAuth access tokens of ${as.issuer} for ${resource}`)
      // Its metadata, from the flags.
      const metadata = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`).then((r) => r.json()))
      assert.deepStrictEqual(metadata, {
        resource,
        authorization_servers: [as.issuer],
        bearer_methods_supported: ["header"],
        scopes_supported: ["mcp", "people.greet"]
      })
      // No token: the flow, then the tool.
      const provider = new TestProvider()
      const first = yield* connectWithOAuth(resource, provider)
      assert.instanceOf(first.failure, UnauthorizedError)
      yield* Effect.promise(() => first.transport.finishAuth(provider.code!))
      assert.strictEqual(decodeJwt(provider.saved!.access_token).aud, resource)
      const second = yield* connectWithOAuth(resource, provider)
      assert.isUndefined(second.failure)
      const result = yield* Effect.promise(() => second.client.callTool({ name: "greet", arguments: { name: "Ada" } }))
      assert.deepStrictEqual(result.structuredContent, { result: "hello, Ada (from the tools module)" })
    }), 180_000)
})
