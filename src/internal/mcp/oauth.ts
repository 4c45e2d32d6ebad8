/**
 * `mcp --http` as an OAuth 2.1 resource server (MCP's authorization spec, 2025-06-18 and later): its Protected
 * Resource Metadata (RFC 9728), and access tokens checked as JWTs against the authorization server's JWKS (fetched
 * on first use, cached, fetched again for a key id it does not hold: a rotation is picked up) for signature (an
 * asymmetric algorithm: `alg: none` and shared-secret tokens are refused), issuer, audience (this server's
 * canonical URL: a token for another resource is refused) and expiry; scopes mapped to tools. `jose` (an optional
 * peer dependency) is loaded on first use. Tokens are never passed on to anything.
 */
import type { JWTVerifyGetKey } from "jose"
import { loadPeer } from "../util/optionalPeer.js"
import { Effect } from "effect"

/** How `mcp --http` checks OAuth access tokens. */
export interface OAuthOptions {
  /** The authorization server's issuer URL: tokens must carry it as `iss`; named in the metadata. */
  readonly issuer: string
  /** This server's canonical URL (`https://mcp.example.com/mcp`): tokens must carry it in `aud`. */
  readonly resource: string
  /**
   * Where the authorization server's keys are. Default: the `jwks_uri` of its metadata
   * (`<issuer>/.well-known/oauth-authorization-server`, else `openid-configuration`).
   */
  readonly jwksUri?: string | undefined
  /** The scope each request needs, whatever it asks. Default none. */
  readonly scopes?: ReadonlyArray<string> | undefined
  /** Per tool name, the scope a `tools/call` of it needs (403 `insufficient_scope` without). */
  readonly toolScopes?: Readonly<Record<string, string>> | undefined
  /** The keys are fetched again at most this often for an unknown key id (jose's cooldown). Default 30 s. */
  readonly jwksCooldownMillis?: number | undefined
  /** The keys are kept this long before they are fetched again. Default 10 minutes. */
  readonly jwksMaxAgeMillis?: number | undefined
  /** Seconds of clock difference allowed on `exp` and `nbf`. Default 30. */
  readonly clockToleranceSeconds?: number | undefined
}

/** What a valid token says: who (`iss` and `sub`) and what it may do. */
export interface Principal {
  readonly name: string
  readonly scopes: ReadonlySet<string>
}

/** A token refused, in RFC 6750's words: `invalid_token` (401) or `insufficient_scope` (403). */
export interface Refusal {
  readonly status: 401 | 403
  readonly error: "invalid_token" | "insufficient_scope" | undefined
  readonly description: string
  readonly scope?: string | undefined
}

/** The metadata document's path for a resource (RFC 9728 section 3.1: the well-known name before the resource's path). */
export const metadataPaths = (resource: string): ReadonlyArray<string> => {
  const path = new URL(resource).pathname.replace(/\/$/, "")
  const base = "/.well-known/oauth-protected-resource"
  return path === "" ? [base] : [base, `${base}${path}`]
}

/** The metadata document's URL, as the 401's `resource_metadata` gives it. */
export const metadataUrl = (resource: string): string => new URL(metadataPaths(resource).at(-1)!, resource).href

/** The Protected Resource Metadata (RFC 9728): the resource, its authorization server, the scopes it knows. */
export const metadata = (options: OAuthOptions) => {
  const scopes = [...new Set([...(options.scopes ?? []), ...Object.values(options.toolScopes ?? {})])]
  return {
    resource: options.resource,
    authorization_servers: [options.issuer],
    bearer_methods_supported: ["header"],
    ...(scopes.length === 0 ? {} : { scopes_supported: scopes })
  }
}

/** The `WWW-Authenticate` of a refusal: the metadata's URL always, the error and scope when there are. */
export const challenge = (options: OAuthOptions, refusal: Refusal | undefined): string => {
  const parts = [`resource_metadata="${metadataUrl(options.resource)}"`]
  if (refusal?.error !== undefined) {
    parts.push(`error="${refusal.error}"`, `error_description="${refusal.description.replace(/["\\]/g, "'")}"`)
  }
  if (refusal?.scope !== undefined) parts.push(`scope="${refusal.scope}"`)
  return `Bearer ${parts.join(", ")}`
}

const asymmetric = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]

/** The JWKS URL: given, or read from the authorization server's metadata. */
const discoverJwks = async (issuer: string): Promise<string> => {
  const base = issuer.replace(/\/$/, "")
  for (const name of ["oauth-authorization-server", "openid-configuration"]) {
    const response = await fetch(`${base}/.well-known/${name}`, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined)
    if (response?.ok !== true) continue
    const body = (await response.json().catch(() => undefined)) as { readonly jwks_uri?: unknown } | undefined
    if (typeof body?.jwks_uri === "string") return body.jwks_uri
  }
  throw new Error(`the authorization server ${issuer} publishes no jwks_uri in its metadata; give jwksUri`)
}

/**
 * The token checker of `options`: a token's principal, or why it is refused (the text names the claim that failed,
 * never the token). The keys are fetched on first use; a key set that cannot be had is a 401 saying so.
 */
export const makeVerifier = (options: OAuthOptions) => {
  let keys: Promise<{ readonly jose: typeof import("jose"); readonly keySet: JWTVerifyGetKey }> | undefined
  const keySet = () =>
    keys ??= Effect.runPromise(loadPeer(() => import("jose"), ["jose"], "OAuth for mcp --http")).then(async (jose) => ({
      jose,
      keySet: jose.createRemoteJWKSet(new URL(options.jwksUri ?? await discoverJwks(options.issuer)), {
        cooldownDuration: options.jwksCooldownMillis ?? 30_000,
        cacheMaxAge: options.jwksMaxAgeMillis ?? 600_000
      })
    })).catch((error: unknown) => {
      // Tried again by the next request: the authorization server may be back.
      keys = undefined
      throw error
    })
  return async (token: string): Promise<Principal | Refusal> => {
    try {
      const { jose, keySet: getKey } = await keySet()
      const { payload } = await jose.jwtVerify(token, getKey, {
        issuer: options.issuer,
        audience: options.resource,
        algorithms: asymmetric,
        clockTolerance: options.clockToleranceSeconds ?? 30,
        requiredClaims: ["exp", "sub"]
      })
      const scope = typeof payload.scope === "string" ? payload.scope : ""
      const scopes = new Set(scope.split(" ").filter((s) => s !== ""))
      const missing = (options.scopes ?? []).find((s) => !scopes.has(s))
      if (missing !== undefined) {
        return { status: 403, error: "insufficient_scope", description: `the token lacks the scope ${missing}`, scope: missing }
      }
      return { name: `${payload.iss}#${payload.sub}`, scopes }
    } catch (error) {
      const code = (error as { readonly code?: unknown }).code
      const claim = (error as { readonly claim?: unknown }).claim
      const description = code === "ERR_JWT_EXPIRED"
        ? "the token has expired"
        : code === "ERR_JWT_CLAIM_VALIDATION_FAILED"
        ? `the token's ${String(claim)} claim is not accepted here`
        : code === "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" || code === "ERR_JWKS_NO_MATCHING_KEY"
        ? "the token is not signed by a key of the authorization server"
        : code === "ERR_JOSE_ALG_NOT_ALLOWED"
        ? "the token's signing algorithm is not accepted (an asymmetric one is needed)"
        : typeof code === "string"
        ? "the token is not a valid JWT"
        : `the token could not be checked: ${error instanceof Error ? error.message : String(error)}`
      return { status: 401, error: "invalid_token", description }
    }
  }
}

/**
 * The 403 of a `tools/call` whose tool needs `scope`: its `scope` is the server's scopes and the tool's, all a token
 * must hold for the call (MCP's scope challenge), so that a client authorizing again with it can make the call.
 */
export const toolScopeRefusal = (options: OAuthOptions, scope: string): Refusal => ({
  status: 403,
  error: "insufficient_scope",
  description: `calling this tool needs the scope ${scope}`,
  scope: [...new Set([...(options.scopes ?? []), scope])].join(" ")
})

/** What to warn of at start when `toolScopes` names a tool `tools` lacks: a misspelt name leaves the tool meant open. */
export const unknownToolScopes = (options: OAuthOptions | undefined, tools: ReadonlyArray<string>): string | undefined => {
  const unknown = Object.keys(options?.toolScopes ?? {}).filter((name) => !tools.includes(name))
  return unknown.length === 0
    ? undefined
    : `MCP over HTTP: oauth.toolScopes names ${unknown.join(", ")}, which the toolkit does not have; its tools are ${tools.join(", ")}`
}

/** The scope a `tools/call` in `body` (one message or a batch) needs and `principal` lacks, if any. */
export const missingToolScope = (options: OAuthOptions, principal: Principal, body: unknown): string | undefined => {
  if (options.toolScopes === undefined) return undefined
  for (const message of Array.isArray(body) ? body : [body]) {
    const { method, params } = (message ?? {}) as { readonly method?: unknown; readonly params?: { readonly name?: unknown } }
    if (method !== "tools/call" || typeof params?.name !== "string") continue
    const scope = Object.hasOwn(options.toolScopes, params.name) ? options.toolScopes[params.name] : undefined
    if (scope !== undefined && !principal.scopes.has(scope)) return scope
  }
  return undefined
}
