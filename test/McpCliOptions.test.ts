/** `mcp --http`'s own settings: the tasks' file (`--journal`, `MCP_JOURNAL`) and OAuth (`MCP_OAUTH_*`), read through Config. */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option } from "effect"
import { chooseMcpJournal, chooseMcpOAuth } from "../src/internal/cli/mcpOptions.js"

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
      assert.include(yield* refused({ MCP_OAUTH_ISSUER: env.MCP_OAUTH_ISSUER }), "MCP_OAUTH_ISSUER and MCP_OAUTH_RESOURCE go together")
      assert.include(yield* refused(env, true), "MCP_TOKENS and MCP_OAUTH_ISSUER")
      assert.include(yield* refused({ ...env, MCP_OAUTH_RESOURCE: "mcp" }), "MCP_OAUTH_RESOURCE is not a URL")
      assert.include(yield* refused({ ...env, MCP_OAUTH_TOOL_SCOPES: "search" }), `MCP_OAUTH_TOOL_SCOPES: "search" is not a tool:scope pair`)
    }))
})
