/**
 * The `mcp` command's own options beyond `--http`, `--port` and `--tools`: where `mcp --http` keeps its tasks
 * (`--journal`, `MCP_JOURNAL`), and how it checks OAuth access tokens (`--oauth-*`, `MCP_OAUTH_*`). Imports Effect
 * module by module, as main.ts does (start-up time).
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

const oauthFlag = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDescription(`with --http: ${description}`), Options.optional)

/** `--oauth-*`: OAuth for `mcp --http`, each beside its `MCP_OAUTH_*` variable (the flag wins). */
export const mcpOAuthOptions = {
  issuer: oauthFlag(
    "oauth-issuer",
    "OAuth 2.1 access tokens, of this authorization server's issuer URL, in place of MCP_TOKENS; with --oauth-resource " +
      "(default: MCP_OAUTH_ISSUER; unset: no OAuth)"
  ),
  resource: oauthFlag(
    "oauth-resource",
    "this server's canonical URL (https://mcp.example.com/mcp): tokens must carry it as their audience " +
      "(default: MCP_OAUTH_RESOURCE)"
  ),
  jwksUri: oauthFlag(
    "oauth-jwks-uri",
    "where the authorization server's keys are (default: MCP_OAUTH_JWKS_URI; unset: the jwks_uri of its metadata)"
  ),
  scopes: oauthFlag("oauth-scopes", "the scopes every request needs, space- or comma-separated (default: MCP_OAUTH_SCOPES; unset: none)"),
  toolScopes: oauthFlag(
    "oauth-tool-scopes",
    "tool:scope pairs, comma-separated: the scope a tools/call of that tool needs (default: MCP_OAUTH_TOOL_SCOPES; unset: none)"
  )
}

/** The `--oauth-*` flags as parsed. */
export type McpOAuthFlags = { readonly [K in keyof typeof mcpOAuthOptions]: Option.Option<string> }

const flagNames: { readonly [K in keyof McpOAuthFlags]: readonly [flag: string, variable: string] } = {
  issuer: ["--oauth-issuer", "MCP_OAUTH_ISSUER"],
  resource: ["--oauth-resource", "MCP_OAUTH_RESOURCE"],
  jwksUri: ["--oauth-jwks-uri", "MCP_OAUTH_JWKS_URI"],
  scopes: ["--oauth-scopes", "MCP_OAUTH_SCOPES"],
  toolScopes: ["--oauth-tool-scopes", "MCP_OAUTH_TOOL_SCOPES"]
}

const noFlags: McpOAuthFlags = { issuer: Option.none(), resource: Option.none(), jwksUri: Option.none(), scopes: Option.none(), toolScopes: Option.none() }

/** A setting's value and the name it was given by: the flag's, else the variable's; undefined if neither is set. */
const setting = (flags: McpOAuthFlags, key: keyof McpOAuthFlags) => {
  const [flag, variable] = flagNames[key]
  const given = flags[key]
  return Option.isSome(given)
    ? Effect.succeed({ value: given.value, name: flag })
    : Effect.map(optionalString(variable), Option.match({ onNone: () => undefined, onSome: (value) => ({ value, name: variable }) }))
}

const bad = (message: string) => new BadOptions({ message })

/** The `--oauth-*` flags over stdio, where they would be ignored: refused, naming the first. */
export const refuseMcpOAuthFlags = (flags: McpOAuthFlags): Effect.Effect<void, BadOptions> => {
  const given = (Object.keys(flagNames) as Array<keyof McpOAuthFlags>).find((key) => Option.isSome(flags[key]))
  return given === undefined
    ? Effect.void
    : Effect.fail(bad(`mcp: ${flagNames[given][0]} is the HTTP server's: add --http, or leave it out to serve over stdio`))
}

/**
 * OAuth for `mcp --http` from the `--oauth-*` flags and the `MCP_OAUTH_*` variables (a flag wins over its
 * variable): the issuer and the resource (both, or neither: no OAuth), the JWKS URL, the scopes (space- or
 * comma-separated) and the tool scopes (`tool:scope` pairs, each of a tool of `tools` when given: a misspelt name
 * would leave its tool open). Refused beside `MCP_TOKENS` (one way to authenticate), and where a value is malformed,
 * naming the flag or variable it came from.
 */
export const chooseMcpOAuth = (
  tokensSet: boolean,
  flags: McpOAuthFlags = noFlags,
  tools?: ReadonlyArray<string>
): Effect.Effect<McpOAuthSettings | undefined, BadOptions> =>
  Effect.gen(function*() {
    const issuer = yield* setting(flags, "issuer")
    const resource = yield* setting(flags, "resource")
    if (issuer === undefined && resource === undefined) return undefined
    if (issuer === undefined || resource === undefined) {
      const [flag, variable] = flagNames[issuer === undefined ? "issuer" : "resource"]
      return yield* bad(
        `${(issuer ?? resource)!.name} and ${flag} (or ${variable}) go together: set both (the authorization server's ` +
          "issuer URL, and this server's canonical URL, as https://mcp.example.com/mcp), or neither"
      )
    }
    if (tokensSet) return yield* bad(`MCP_TOKENS and ${issuer.name} are two ways to authenticate: set one`)
    const jwksUri = yield* setting(flags, "jwksUri")
    for (const url of [issuer, resource, jwksUri]) {
      if (url !== undefined && !(URL.canParse(url.value) && /^https?:$/.test(new URL(url.value).protocol))) {
        return yield* bad(`${url.name} is not an http(s) URL: give an absolute URL (https://...)`)
      }
    }
    const scopes = yield* setting(flags, "scopes")
    const toolScopes = yield* chooseToolScopes(yield* setting(flags, "toolScopes"), tools)
    return {
      issuer: issuer.value,
      resource: resource.value,
      ...(jwksUri === undefined ? {} : { jwksUri: jwksUri.value }),
      ...(scopes === undefined ? {} : { scopes: listOf(scopes.value) }),
      ...(Object.keys(toolScopes).length === 0 ? {} : { toolScopes })
    }
  })

/** `tool:scope` pairs, comma- or space-separated; one that is not refuses the start, naming it. */
const chooseToolScopes = (given: { readonly value: string; readonly name: string } | undefined, tools: ReadonlyArray<string> | undefined) =>
  Effect.gen(function*() {
    const toolScopes: Record<string, string> = {}
    for (const pair of listOf(given?.value ?? "")) {
      const colon = pair.indexOf(":")
      if (colon <= 0 || colon === pair.length - 1) {
        return yield* bad(`${given!.name}: ${JSON.stringify(pair)} is not a tool:scope pair (as search:docs.read)`)
      }
      const tool = pair.slice(0, colon)
      if (tools !== undefined && !tools.includes(tool)) {
        return yield* bad(`${given!.name}: ${tool} is no tool served here; the tools are ${tools.join(", ")}`)
      }
      toolScopes[tool] = pair.slice(colon + 1)
    }
    return toolScopes
  })
