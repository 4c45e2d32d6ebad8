/**
 * One POST of a provider (design: The model side): the request, its key written in only there; its
 * answer read as server-sent events or one JSON body, within its timeouts and byte limits; its span's
 * attributes, a secret header shown as `<redacted>`; and the mapping of HTTP failures to the typed model
 * failures: 429/5xx/529/resets transient, 401/403 auth, other 4xx rejected with the provider's message.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Clock, type Duration, Effect, Redacted, Stream } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import { formatDuration } from "../internal/util/duration.js"
import { parseBody } from "./httpBody.js"
import { boundedLines, counted, type Limits, type SseEvent, sseEvents, wholeBody } from "./httpStream.js"

/** One POST of a provider. */
export interface Post {
  readonly provider: string
  readonly url: string
  readonly headers: Record<string, string>
  /** Headers that carry a secret (the API key): unwrapped only into the request. */
  readonly secretHeaders: Record<string, Redacted.Redacted<string>>
  readonly body: unknown
  /** The response's headers, then each piece of its body, must come within this of the one before. */
  readonly idleTimeout: Duration.Duration
  /** The response's size and its longest line (`Limits`). */
  readonly limits: Limits
  /** Told every response's headers, whatever its status (the rate limits read theirs: `RateLimit`). */
  readonly onHeaders?: ((headers: Readonly<Record<string, string>>) => Effect.Effect<void>) | undefined
}

/**
 * POSTs `body` as JSON and gives the 2xx response; anything else is a `ModelFailure`. The response's
 * headers must come within `post.idleTimeout`.
 */
const send = (
  client: HttpClient.HttpClient,
  post: Post
): Effect.Effect<HttpClientResponse.HttpClientResponse, LanguageModel.ModelFailure> =>
  HttpClientRequest.post(post.url).pipe(
    HttpClientRequest.setHeaders(post.headers),
    HttpClientRequest.setHeaders(
      Object.fromEntries(Object.entries(post.secretHeaders).map(([name, value]) => [name, Redacted.value(value)]))
    ),
    HttpClientRequest.bodyUnsafeJson(post.body),
    HttpClient.withTracerDisabledWhen(client, () => true).execute,
    Effect.tap((response) => Effect.annotateCurrentSpan("http.response.status_code", response.status)),
    Effect.tap((response) => post.onHeaders === undefined ? Effect.void : post.onHeaders(response.headers)),
    Effect.flatMap((response): Effect.Effect<HttpClientResponse.HttpClientResponse, LanguageModel.ModelFailure> =>
      response.status >= 200 && response.status < 300
        ? Effect.succeed(response)
        : Effect.flatMap(failureOf(post.provider, response), Effect.fail)
    ),
    Effect.catchTag("RequestError", (error) =>
      Effect.fail(
        new LanguageModel.ModelError({
          // The transport's own words (ECONNRESET, ECONNREFUSED...), never the request's headers.
          message: `${post.provider}: the request failed (${transportReason(error.cause)})`,
          transient: error.reason === "Transport"
        })
      )),
    Effect.catchTag("ResponseError", (error) => Effect.fail(bodyFailed(post.provider, error))),
    Effect.timeoutFail({ duration: post.idleTimeout, onTimeout: () => noResponse(post) })
  )

const noResponse = (post: Post) =>
  new LanguageModel.ModelError({
    message: `${post.provider}: no response within ${formatDuration(post.idleTimeout)} (idleTimeout)`,
    transient: true
  })

/** The whole response took longer than `timeout`: however it trickled, the request ends. */
export const tooSlow = (post: Post) =>
  new LanguageModel.ModelError({
    message: `${post.provider}: the response did not end within ${formatDuration(post.limits.timeout)} (timeout)`,
    transient: true
  })

/** A response or a line over its bound: refused, not retried (the same request would get the same answer). */
const tooLarge = (post: Post, what: "response" | "line", limit: number) =>
  new LanguageModel.ModelError({
    message: `${post.provider}: a ${what} of the response passed ${limit} bytes (${
      what === "response" ? "maxResponseBytes" : "maxLineBytes"
    }); refused unread`.replace("a response of the response", "the response"),
    transient: false
  })

/** A body cut off mid-way (the connection closed): the transport's words, not just "Decode". */
const bodyFailed = (provider: string, error: HttpClientError.ResponseError) =>
  new LanguageModel.ModelError({
    message: `${provider}: HTTP ${error.response.status}: reading the body failed (${transportReason(error.cause)})`,
    transient: true,
    status: error.response.status
  })

/**
 * POSTs `body` (which asks for a stream) and reads the answer as server-sent events; a 2xx JSON
 * answer is read whole. The headers must come within `post.idleTimeout`, and then each piece of the body
 * within `post.idleTimeout` of the one before; a body cut off is a transient `ModelError`. The body's
 * bytes are counted as they come (`maxResponseBytes`), and no line grows past `maxLineBytes`.
 */
export const postStream = (
  client: HttpClient.HttpClient,
  post: Post
): Effect.Effect<Stream.Stream<SseEvent, LanguageModel.ModelError>, LanguageModel.ModelFailure> =>
  Effect.map(send(client, post), (response) => {
    const type = response.headers["content-type"] ?? ""
    const { maxLineBytes, maxResponseBytes } = post.limits
    const bytes = response.stream.pipe(
      Stream.catchTag("ResponseError", (error) => Stream.fail(bodyFailed(post.provider, error))),
      Stream.timeoutFail(
        () =>
          new LanguageModel.ModelError({
            message: `${post.provider}: the stream sent nothing for ${formatDuration(post.idleTimeout)} (idleTimeout)`,
            transient: true
          }),
        post.idleTimeout
      ),
      counted(maxResponseBytes, () => tooLarge(post, "response", maxResponseBytes))
    )
    if (!type.includes("text/event-stream")) {
      // A whole body is one line: it may be as long as a line may.
      const limit = Math.min(maxLineBytes, maxResponseBytes)
      return Stream.fromEffect(
        bytes.pipe(
          counted(limit, () => tooLarge(post, limit === maxLineBytes ? "line" : "response", limit)),
          Stream.decodeText(),
          Stream.mkString,
          Effect.flatMap((text) => parseBody(post.provider, response.status, text)),
          Effect.map((body): SseEvent => ({ event: wholeBody, data: "", body }))
        )
      )
    }
    return bytes.pipe(
      Stream.decodeText(),
      boundedLines(maxLineBytes, () => tooLarge(post, "line", maxLineBytes)),
      sseEvents
    )
  })

/** The POST's span attributes (OpenTelemetry's names); secret headers show as `<redacted>`. */
export const spanAttributes = (post: Post): Record<string, unknown> => {
  const url = new URL(post.url)
  const attributes: Record<string, unknown> = {
    "http.request.method": "POST",
    "server.address": url.hostname,
    "url.full": post.url,
    "gen_ai.provider.name": post.provider
  }
  if (url.port !== "") attributes["server.port"] = Number(url.port)
  for (const name of Object.keys(post.headers)) attributes[`http.request.header.${name}`] = post.headers[name]
  for (const name of Object.keys(post.secretHeaders)) attributes[`http.request.header.${name}`] = "<redacted>"
  return attributes
}

const transportReason = (cause: unknown): string => {
  if (typeof cause === "object" && cause !== null) {
    const code = (cause as { code?: unknown }).code
    if (typeof code === "string") return code
    const message = (cause as { message?: unknown }).message
    if (typeof message === "string") return message
  }
  return "no connection"
}

/** The typed failure for a non-2xx response, with the provider's own message when it sent one. */
const failureOf = (
  provider: string,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<LanguageModel.ModelFailure> =>
  Effect.zipWith(
    Effect.orElseSucceed(response.text, () => ""),
    Clock.currentTimeMillis,
    (text, now) => failureFromStatus(provider, response.status, response.headers, text, now)
  )

/**
 * The typed failure for a non-2xx status, its body `text` and its headers (at `now`): 401/403 an auth
 * failure; 408, 409, 429 and 5xx transient, after the `retry-after` the provider gave; any other a
 * rejected request. The text says the provider's own message when it sent one. One rule for every
 * provider, ours and those through `@effect/ai`.
 */
export const failureFromStatus = (
  provider: string,
  status: number,
  headers: Readonly<Record<string, string>>,
  text: string,
  now: number
): LanguageModel.ModelFailure => {
  const said = providerMessage(text)
  const message = `${provider}: HTTP ${status}${said === "" ? "" : `: ${said}`}`
  if (status === 401 || status === 403) return new LanguageModel.ModelAuthError({ message, status })
  if (status === 408 || status === 409 || status === 429 || status >= 500) {
    const retryAfterMillis = retryAfter(headers, now)
    return new LanguageModel.ModelError({
      message,
      transient: true,
      status,
      ...(retryAfterMillis === undefined ? {} : { retryAfterMillis })
    })
  }
  return new LanguageModel.ModelRequestRejected({ message, status })
}

/** `{ error: { message } }` (both APIs), an HTML page's title (a proxy's error page), else the body's start. */
const providerMessage = (text: string): string => {
  if (/^\s*<(!doctype|html|head|body|\?xml)/i.test(text)) {
    const title = /<title[^>]*>([^<]*)<\/title>/i.exec(text)?.[1]
    const words = (title ?? text.replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, " ").replace(/<[^>]*>/g, " "))
      .replace(/\s+/g, " ").trim().slice(0, 200)
    return words === "" ? "(an HTML page)" : `${words} (an HTML page)`
  }
  try {
    const body = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown }
    if (typeof body.error === "object" && typeof body.error?.message === "string") return body.error.message
    if (typeof body.error === "string") return body.error
    if (typeof body.message === "string") return body.message
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 500)
}

/** Milliseconds to wait from `retry-after-ms`, or `retry-after` (seconds or an HTTP date). */
const retryAfter = (headers: Readonly<Record<string, string>>, now: number): number | undefined => {
  const millis = Number(headers["retry-after-ms"])
  if (headers["retry-after-ms"] !== undefined && Number.isFinite(millis) && millis >= 0) return millis
  const value = headers["retry-after"]
  if (value === undefined) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}
