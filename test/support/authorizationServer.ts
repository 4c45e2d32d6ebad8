/**
 * A small OAuth 2.1 authorization server on 127.0.0.1 for the OAuth suites, over real HTTP: its metadata (RFC
 * 8414), its keys (a JWKS it can rotate), dynamic client registration (RFC 7591), an authorization endpoint that
 * consents at once (redirecting to the client's `redirect_uri` with a code, PKCE's S256 challenge required), and a
 * token endpoint (`authorization_code` with the verifier checked, `refresh_token`) issuing JWTs signed with its
 * current key, for the resource the client named (RFC 8707) and the scopes it asked. Keys and tokens made with jose.
 * And a client application's side of the flow, for the official SDK client.
 */
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import { Effect } from "effect"
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose"
import { createHash, randomUUID } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** A signing key: its id, its private half, and its public half as the JWKS gives it. */
export interface SigningKey {
  readonly kid: string
  readonly privateKey: Parameters<SignJWT["sign"]>[0]
  readonly jwk: JWK
}

/** A new ES256 key named `kid`. */
export const newKey = async (kid: string): Promise<SigningKey> => {
  const { privateKey, publicKey } = await generateKeyPair("ES256", { extractable: true })
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } }
}

/** What the server holds and saw: its keys (the first signs), clients, codes, refresh tokens, requests. */
interface State {
  keys: Array<SigningKey>
  jwksFetches: number
  readonly clients: Map<string, { readonly redirectUris: ReadonlyArray<string> }>
  readonly codes: Map<string, Grant & { readonly redirectUri: string; readonly challenge: string }>
  readonly refreshTokens: Map<string, Grant>
  /** Each token endpoint request's form, as sent. */
  readonly tokenRequests: Array<Record<string, string>>
}

/** What a code or a refresh token stands for. */
interface Grant {
  readonly clientId: string
  readonly scope: string
  readonly resource: string
}

const json = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
  response.end(JSON.stringify(body))
}

const oauthError = (response: ServerResponse, error: string, description: string) =>
  json(response, 400, { error, error_description: description })

const readBody = (request: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let text = ""
    request.setEncoding("utf8")
    request.on("data", (chunk: string) => text += chunk)
    request.on("end", () => resolve(text))
    request.on("error", reject)
  })

/** The metadata of the server at `issuer` (RFC 8414). */
const serverMetadata = (issuer: string) => ({
  issuer,
  authorization_endpoint: `${issuer}/authorize`,
  token_endpoint: `${issuer}/token`,
  registration_endpoint: `${issuer}/register`,
  jwks_uri: `${issuer}/jwks.json`,
  response_types_supported: ["code"],
  grant_types_supported: ["authorization_code", "refresh_token"],
  code_challenge_methods_supported: ["S256"],
  token_endpoint_auth_methods_supported: ["none"]
})

/** RFC 7591: a public client, its redirect URIs kept. */
const register = async (state: State, request: IncomingMessage, response: ServerResponse) => {
  const metadata = JSON.parse(await readBody(request)) as Record<string, unknown>
  const redirectUris = metadata.redirect_uris
  if (!Array.isArray(redirectUris) || redirectUris.length === 0 || !redirectUris.every((uri) => typeof uri === "string")) {
    return oauthError(response, "invalid_redirect_uri", "redirect_uris: give at least one")
  }
  const clientId = randomUUID()
  state.clients.set(clientId, { redirectUris })
  json(response, 201, { ...metadata, client_id: clientId, client_id_issued_at: Math.floor(Date.now() / 1000), token_endpoint_auth_method: "none" })
}

/** The authorization endpoint: the request checked, consent given at once, the code sent to the redirect URI. */
const authorize = (state: State, url: URL, response: ServerResponse) => {
  const query = Object.fromEntries(url.searchParams)
  const client = state.clients.get(query.client_id ?? "")
  if (client === undefined) return oauthError(response, "invalid_client", "client_id: not registered")
  if (query.redirect_uri === undefined || !client.redirectUris.includes(query.redirect_uri)) {
    return oauthError(response, "invalid_request", "redirect_uri: not one the client registered")
  }
  if (query.response_type !== "code") return oauthError(response, "unsupported_response_type", "response_type: code")
  if (query.code_challenge === undefined || query.code_challenge_method !== "S256") {
    return oauthError(response, "invalid_request", "PKCE: a code_challenge with code_challenge_method S256 is required")
  }
  if (query.resource === undefined) return oauthError(response, "invalid_target", "resource: name the resource (RFC 8707)")
  const code = randomUUID()
  state.codes.set(code, {
    clientId: query.client_id!,
    redirectUri: query.redirect_uri,
    challenge: query.code_challenge,
    scope: query.scope ?? "",
    resource: query.resource
  })
  const location = new URL(query.redirect_uri)
  location.searchParams.set("code", code)
  if (query.state !== undefined) location.searchParams.set("state", query.state)
  response.writeHead(302, { location: location.href })
  response.end()
}

/** The grant a token request's form stands for, or why it is refused. */
const tokenGrant = (state: State, form: Record<string, string>): Grant | string => {
  if (form.grant_type === "authorization_code") {
    const code = state.codes.get(form.code ?? "")
    if (code === undefined) return "code: unknown or used"
    state.codes.delete(form.code!)
    if (code.clientId !== form.client_id || code.redirectUri !== form.redirect_uri) return "client_id or redirect_uri: not the code's"
    const challenge = createHash("sha256").update(form.code_verifier ?? "").digest("base64url")
    if (challenge !== code.challenge) return "code_verifier: does not match the code_challenge"
    if (form.resource !== undefined && form.resource !== code.resource) return "resource: not the one authorized"
    return code
  }
  if (form.grant_type === "refresh_token") {
    const grant = state.refreshTokens.get(form.refresh_token ?? "")
    if (grant === undefined || grant.clientId !== form.client_id) return "refresh_token: unknown, or another client's"
    return grant
  }
  return `grant_type: ${form.grant_type} is not supported`
}

/** The token endpoint: an access token for the grant's resource and scopes, signed with the current key. */
const token = async (state: State, issuer: string, request: IncomingMessage, response: ServerResponse) => {
  const form = Object.fromEntries(new URLSearchParams(await readBody(request)))
  state.tokenRequests.push(form)
  const grant = tokenGrant(state, form)
  if (typeof grant === "string") return oauthError(response, "invalid_grant", grant)
  const key = state.keys[0]!
  const accessToken = await new SignJWT({ scope: grant.scope, client_id: grant.clientId })
    .setProtectedHeader({ alg: "ES256", kid: key.kid }).setIssuer(issuer).setSubject(`user-of-${grant.clientId}`)
    .setAudience(grant.resource).setIssuedAt().setExpirationTime("5 minutes").sign(key.privateKey)
  const refreshToken = randomUUID()
  state.refreshTokens.set(refreshToken, grant)
  json(response, 200, { access_token: accessToken, token_type: "Bearer", expires_in: 300, scope: grant.scope, refresh_token: refreshToken })
}

/** The server, closed with the scope: its issuer URL, its state, and tokens signed as the tests want them. */
export const authorizationServer = Effect.gen(function*() {
  const state: State = {
    keys: [yield* Effect.promise(() => newKey("k1"))],
    jwksFetches: 0,
    clients: new Map(),
    codes: new Map(),
    refreshTokens: new Map(),
    tokenRequests: []
  }
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? "/", issuer)
    const route = `${request.method} ${url.pathname}`
    const handled = route === "GET /.well-known/oauth-authorization-server"
      ? json(response, 200, serverMetadata(issuer))
      : route === "GET /jwks.json"
      ? (state.jwksFetches++, json(response, 200, { keys: state.keys.map((k) => k.jwk) }))
      : route === "POST /register"
      ? register(state, request, response)
      : route === "GET /authorize"
      ? authorize(state, url, response)
      : route === "POST /token"
      ? token(state, issuer, request, response)
      : json(response, 404, { error: "not_found" })
    void Promise.resolve(handled).catch((error: unknown) => oauthError(response, "invalid_request", String(error)))
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
    () => Effect.sync(() => server.close())
  )
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  /** A token of `claims`, signed with `key` (the current one by default), for `aud`, from `iss` (this server). */
  const sign = (
    claims: Record<string, unknown>,
    options?: { readonly key?: SigningKey; readonly expiresIn?: string; readonly iss?: string; readonly aud?: string }
  ) => {
    const key = options?.key ?? state.keys[0]!
    return Effect.promise(() =>
      new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: key.kid }).setIssuer(options?.iss ?? issuer)
        .setAudience(options?.aud ?? "").setIssuedAt().setExpirationTime(options?.expiresIn ?? "5 minutes").sign(key.privateKey)
    )
  }
  return { issuer, state, newKey, sign }
})

/**
 * A client application's side of the flow: what it registered and was given, kept in memory; its "browser"
 * follows the authorization URL with fetch and keeps the code the redirect carries.
 */
export class TestProvider implements OAuthClientProvider {
  readonly redirectUrl = "http://127.0.0.1/callback"
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: "oauth-flow-test",
    redirect_uris: [this.redirectUrl],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none"
  }
  information: OAuthClientInformationMixed | undefined
  saved: OAuthTokens | undefined
  verifier = ""
  code: string | undefined
  clientInformation() {
    return this.information
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.information = information
  }
  tokens() {
    return this.saved
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
  async redirectToAuthorization(url: URL) {
    const response = await fetch(url, { redirect: "manual" })
    const location = response.headers.get("location")
    if (response.status !== 302 || location === null) throw new Error(`authorize: ${response.status} ${await response.text()}`)
    if (!location.startsWith(`${this.redirectUrl}?`)) throw new Error(`authorize: redirected to ${location}`)
    this.code = new URL(location).searchParams.get("code") ?? undefined
  }
}

/** The official client with `provider`, on `url`: connected, or the error connecting failed with; closed with the scope. */
export const connectWithOAuth = (url: string, provider: OAuthClientProvider) =>
  Effect.gen(function*() {
    const client = new Client({ name: "oauth-flow-test", version: "1.0.0" })
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider })
    const failure = yield* Effect.promise(() => client.connect(transport).then(() => undefined, (error: unknown) => error))
    yield* Effect.addFinalizer(() => Effect.promise(() => client.close()))
    return { client, transport, failure }
  })
