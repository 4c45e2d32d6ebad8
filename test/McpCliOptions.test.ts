/**
 * `mcp --http`'s own settings: the tasks' file (`--journal`, `MCP_JOURNAL`) and OAuth (`--oauth-*` as @effect/cli
 * parses them, and `MCP_OAUTH_*`, read through Config; a flag wins over its variable).
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Options from "@effect/cli/Options"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option } from "effect"
import {
  chooseMcpJournal,
  chooseMcpOAuth,
  type McpOAuthFlags,
  mcpOAuthOptions,
  refuseMcpOAuthFlags
} from "../src/internal/cli/mcpOptions.js"

/** The `--oauth-*` flags of a command line, as the mcp command parses them. */
const parseFlags = (args: ReadonlyArray<string>) =>
  Options.processCommandLine(args, CliConfig.defaultConfig)(Options.all(mcpOAuthOptions)).pipe(
    Effect.map(([, leftover, flags]): McpOAuthFlags => {
      assert.deepStrictEqual(leftover, [])
      return flags
    }),
    Effect.provide(NodeContext.layer)
  )

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("mcp's settings", () => {
  it.effect("the journal: the option over MCP_JOURNAL; neither, no tasks", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* chooseMcpJournal(Option.some("a.sqlite")).pipe(withEnv({ MCP_JOURNAL: "b.sqlite" })), "a.sqlite")
      assert.strictEqual(yield* chooseMcpJournal(Option.none()).pipe(withEnv({ MCP_JOURNAL: "b.sqlite" })), "b.sqlite")
      assert.isUndefined(yield* chooseMcpJournal(Option.none()).pipe(withEnv({})))
    }))

  it.effect("OAuth from MCP_OAUTH_*, and each malformed setting refused by name", () =>
    Effect.gen(function*() {
      const env = {
        MCP_OAUTH_ISSUER: "https://auth.example.com",
        MCP_OAUTH_RESOURCE: "https://mcp.example.com/mcp",
        MCP_OAUTH_SCOPES: "mcp, mcp.read",
        MCP_OAUTH_TOOL_SCOPES: "search:docs.read,refund:billing"
      }
      assert.deepStrictEqual(yield* chooseMcpOAuth(false).pipe(withEnv(env)), {
        issuer: "https://auth.example.com",
        resource: "https://mcp.example.com/mcp",
        scopes: ["mcp", "mcp.read"],
        toolScopes: { search: "docs.read", refund: "billing" }
      })
      assert.isUndefined(yield* chooseMcpOAuth(false).pipe(withEnv({})))
      const refused = (settings: Record<string, string>, tokens = false) =>
        Effect.flip(chooseMcpOAuth(tokens).pipe(withEnv(settings))).pipe(Effect.map((e) => e.message))
      assert.include(yield* refused({ MCP_OAUTH_ISSUER: env.MCP_OAUTH_ISSUER }), "MCP_OAUTH_ISSUER and --oauth-resource (or MCP_OAUTH_RESOURCE) go together")
      assert.include(yield* refused(env, true), "MCP_TOKENS and MCP_OAUTH_ISSUER")
      assert.include(yield* refused({ ...env, MCP_OAUTH_RESOURCE: "mcp" }), "MCP_OAUTH_RESOURCE is not an http(s) URL")
      assert.include(yield* refused({ ...env, MCP_OAUTH_JWKS_URI: "/jwks.json" }), "MCP_OAUTH_JWKS_URI is not an http(s) URL")
      assert.include(yield* refused({ ...env, MCP_OAUTH_TOOL_SCOPES: "search" }), `MCP_OAUTH_TOOL_SCOPES: "search" is not a tool:scope pair`)
    }))

  it.effect("OAuth from the --oauth-* flags, each over its variable, and refused by the flag's name", () =>
    Effect.gen(function*() {
      const flags = yield* parseFlags([
        "--oauth-issuer", "https://auth.example.com",
        "--oauth-resource", "https://mcp.example.com/mcp",
        "--oauth-jwks-uri", "https://auth.example.com/keys",
        "--oauth-scopes", "mcp mcp.read",
        "--oauth-tool-scopes", "search:docs.read,refund:billing"
      ])
      const env = {
        MCP_OAUTH_ISSUER: "https://other.example.com",
        MCP_OAUTH_RESOURCE: "https://other.example.com/mcp",
        MCP_OAUTH_JWKS_URI: "https://other.example.com/jwks",
        MCP_OAUTH_SCOPES: "other",
        MCP_OAUTH_TOOL_SCOPES: "search:other"
      }
      const fromFlags = {
        issuer: "https://auth.example.com",
        resource: "https://mcp.example.com/mcp",
        jwksUri: "https://auth.example.com/keys",
        scopes: ["mcp", "mcp.read"],
        toolScopes: { search: "docs.read", refund: "billing" }
      }
      assert.deepStrictEqual(yield* chooseMcpOAuth(false, flags).pipe(withEnv({})), fromFlags)
      assert.deepStrictEqual(yield* chooseMcpOAuth(false, flags).pipe(withEnv(env)), fromFlags)
      // A flag and the other half from a variable: the flag's value, the variable's value.
      const issuerOnly = yield* parseFlags(["--oauth-issuer", "https://auth.example.com"])
      assert.deepStrictEqual(yield* chooseMcpOAuth(false, issuerOnly).pipe(withEnv({ MCP_OAUTH_RESOURCE: "https://mcp.example.com/mcp" })), {
        issuer: "https://auth.example.com",
        resource: "https://mcp.example.com/mcp"
      })
      const refused = (args: ReadonlyArray<string>, settings: Record<string, string> = {}, tokens = false) =>
        Effect.flatMap(parseFlags(args), (parsed) => Effect.flip(chooseMcpOAuth(tokens, parsed).pipe(withEnv(settings)))).pipe(
          Effect.map((e) => e.message)
        )
      assert.strictEqual(
        yield* refused(["--oauth-issuer", "https://auth.example.com"]),
        "--oauth-issuer and --oauth-resource (or MCP_OAUTH_RESOURCE) go together: set both (the authorization server's " +
          "issuer URL, and this server's canonical URL, as https://mcp.example.com/mcp), or neither"
      )
      assert.include(yield* refused(["--oauth-resource", "https://mcp.example.com/mcp"]), "--oauth-resource and --oauth-issuer (or MCP_OAUTH_ISSUER) go together")
      const both = ["--oauth-issuer", "https://auth.example.com", "--oauth-resource", "https://mcp.example.com/mcp"]
      assert.strictEqual(yield* refused(both, {}, true), "MCP_TOKENS and --oauth-issuer are two ways to authenticate: set one")
      assert.strictEqual(
        yield* refused([...both, "--oauth-jwks-uri", "keys.json"]),
        "--oauth-jwks-uri is not an http(s) URL: give an absolute URL (https://...)"
      )
      assert.include(yield* refused(["--oauth-issuer", "ftp://auth.example.com", "--oauth-resource", "https://mcp.example.com/mcp"]), "--oauth-issuer is not an http(s) URL")
      assert.strictEqual(
        yield* refused([...both, "--oauth-tool-scopes", "search:docs.read,refund"], { MCP_OAUTH_TOOL_SCOPES: "search:docs.read" }),
        `--oauth-tool-scopes: "refund" is not a tool:scope pair (as search:docs.read)`
      )
      // A tool scope of a tool not served (misspelt, say) would leave that tool open: refused, listing the tools.
      const served = yield* parseFlags([...both, "--oauth-tool-scopes", "serch:docs.read"])
      assert.strictEqual(
        (yield* Effect.flip(chooseMcpOAuth(false, served, ["search", "refund"]).pipe(withEnv({})))).message,
        "--oauth-tool-scopes: serch is no tool served here; the tools are search, refund"
      )
      assert.deepStrictEqual(
        (yield* chooseMcpOAuth(false, yield* parseFlags([...both, "--oauth-tool-scopes", "search:docs.read"]), ["search"]).pipe(withEnv({})))?.toolScopes,
        { search: "docs.read" }
      )
    }))

  it.effect("the --oauth-* flags over stdio are refused, naming the flag; none given, nothing refused", () =>
    Effect.gen(function*() {
      const refusal = yield* Effect.flip(refuseMcpOAuthFlags(yield* parseFlags(["--oauth-scopes", "mcp"])))
      assert.strictEqual(refusal.message, "mcp: --oauth-scopes is the HTTP server's: add --http, or leave it out to serve over stdio")
      yield* refuseMcpOAuthFlags(yield* parseFlags([]))
    }))
})
