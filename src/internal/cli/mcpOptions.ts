/**
 * The `mcp` command's own options beyond `--http`, `--port` and `--tools`: where `mcp --http` keeps its tasks
 * (`--journal`, `MCP_JOURNAL`), and how it checks OAuth access tokens (`MCP_OAUTH_*`). Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { isPostgresUrl, optionalString } from "../util/settings.js"
import { BadOptions } from "./options.js"

/** `--journal`: the SQLite file, or the PostgreSQL URL, of the MCP tasks (with `--http`). */
export const mcpJournalOption = Options.text("journal").pipe(
  Options.withDescription(
    "with --http: a SQLite file, or a postgres:// URL, keeping the MCP tasks (task-augmented tools/call), so that a " +
      "restarted server answers for them and takes back those left running (default: MCP_JOURNAL, where a URL's " +
      "password belongs; unset: no tasks)"
  ),
  Options.optional
)

/** The MCP tasks' file or PostgreSQL URL: `--journal`, else `MCP_JOURNAL`, else none (tasks are not offered). */
export const chooseMcpJournal = (option: Option.Option<string>): Effect.Effect<string | undefined> =>
  Option.isSome(option)
    ? Effect.as(
      isPostgresUrl(option.value) && /^[^:]+:\/\/[^/@]*:[^/@]*@/.test(option.value)
        ? Effect.logWarning("--journal puts the database's password on the command line, where every local user " +
          "can read it; prefer MCP_JOURNAL")
        : Effect.void,
      option.value
    )
    : Effect.map(optionalString("MCP_JOURNAL"), Option.getOrUndefined)

/** How `mcp --http` checks OAuth access tokens, as the settings give it (the shape of `Mcp.OAuthOptions`). */
export interface McpOAuthSettings {
  readonly issuer: string
  readonly resource: string
  readonly jwksUri?: string | undefined
  readonly scopes?: ReadonlyArray<string> | undefined
  readonly toolScopes?: Readonly<Record<string, string>> | undefined
}

const listOf = (text: string) => text.split(/[\s,]+/).filter((part) => part !== "")

/**
 * OAuth for `mcp --http` from `MCP_OAUTH_ISSUER` and `MCP_OAUTH_RESOURCE` (both, or neither: no OAuth), with
 * `MCP_OAUTH_JWKS_URI`, `MCP_OAUTH_SCOPES` (space- or comma-separated) and `MCP_OAUTH_TOOL_SCOPES` (`tool:scope`
 * pairs). Refused beside `MCP_TOKENS` (one way to authenticate), and where a value is malformed, naming it.
 */
export const chooseMcpOAuth = (tokensSet: boolean): Effect.Effect<McpOAuthSettings | undefined, BadOptions> =>
  Effect.gen(function*() {
    const issuer = Option.getOrUndefined(yield* optionalString("MCP_OAUTH_ISSUER"))
    const resource = Option.getOrUndefined(yield* optionalString("MCP_OAUTH_RESOURCE"))
    if (issuer === undefined && resource === undefined) return undefined
    if (issuer === undefined || resource === undefined) {
      return yield* new BadOptions({
        message: "MCP_OAUTH_ISSUER and MCP_OAUTH_RESOURCE go together: set both (the authorization server's issuer URL, " +
          "and this server's canonical URL, as https://mcp.example.com/mcp), or neither"
      })
    }
    if (tokensSet) {
      return yield* new BadOptions({ message: "MCP_TOKENS and MCP_OAUTH_ISSUER are two ways to authenticate: set one" })
    }
    for (const [name, value] of [["MCP_OAUTH_ISSUER", issuer], ["MCP_OAUTH_RESOURCE", resource]] as const) {
      if (!URL.canParse(value)) return yield* new BadOptions({ message: `${name} is not a URL: give an absolute URL (https://...)` })
    }
    const jwksUri = Option.getOrUndefined(yield* optionalString("MCP_OAUTH_JWKS_URI"))
    const scopes = Option.map(yield* optionalString("MCP_OAUTH_SCOPES"), listOf)
    const toolScopes: Record<string, string> = {}
    for (const pair of listOf(Option.getOrElse(yield* optionalString("MCP_OAUTH_TOOL_SCOPES"), () => ""))) {
      const colon = pair.indexOf(":")
      if (colon <= 0 || colon === pair.length - 1) {
        return yield* new BadOptions({ message: `MCP_OAUTH_TOOL_SCOPES: ${JSON.stringify(pair)} is not a tool:scope pair (as search:docs.read)` })
      }
      toolScopes[pair.slice(0, colon)] = pair.slice(colon + 1)
    }
    return {
      issuer,
      resource,
      ...(jwksUri === undefined ? {} : { jwksUri }),
      ...(Option.isSome(scopes) ? { scopes: scopes.value } : {}),
      ...(Object.keys(toolScopes).length === 0 ? {} : { toolScopes })
    }
  })
