/**
 * What the HTTP providers share: one JSON POST asking for a stream, its server-sent events read as a
 * turn's parts (design: The model side) within a per-request timeout, and the mapping of
 * HTTP failures to the typed model failures (design: The loop): 429/5xx/529/resets transient, 401/403 auth,
 * other 4xx rejected with the provider's message. A key stays `Redacted` until it is written into
 * the request itself; the POST's span is made here, showing it as `<redacted>`, and no error, log or
 * span carries the request.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Clock, Duration, Effect, Either, Layer, Option, ParseResult, Redacted, Schema, Stream } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import * as Json from "../internal/util/json.js"
import * as StrictSchema from "./StrictSchema.js"
import { formatDuration } from "../internal/util/duration.js"

/** A provider's API key is not configured. */
export class MissingApiKey extends Schema.TaggedError<MissingApiKey>("agent-tools/MissingApiKey")("MissingApiKey", {
  variable: Schema.String,
  provider: Schema.String
}) {
  override get message(): string {
    return `${this.variable} is not set: ${this.provider} models need an API key`
  }
}

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
}

/**
 * What one model request may take (docs/limits.md, "Model requests"): the whole response, from the
 * request to its last byte (`timeout`); the wait for its headers and between two pieces of its body
 * (`idleTimeout`, at most `timeout`); its size in bytes and its longest line (a server-sent event's
 * line, or a whole JSON body), past which it is refused before it is read further.
 */
export interface Limits {
  readonly timeout: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly maxResponseBytes: number
  readonly maxLineBytes: number
}

/** A provider's options for `Limits`: each left out takes its default. */
export interface LimitOptions {
  /** The whole response, from the request to its last byte. Default 10 minutes. */
  readonly timeout?: Duration.DurationInput | undefined
  /** The response's headers, then each piece of its body after the one before. Default 2 minutes (at most `timeout`). */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** The response's size, in bytes. Default 32 MiB. */
  readonly maxResponseBytes?: number | undefined
  /** One line of a stream (or a whole JSON body), in bytes. Default 8 MiB. */
  readonly maxLineBytes?: number | undefined
}

/** The limits of `options`, defaults filled in; a bad one is a defect naming it (a provider's layer is built from code). */
export const limitsOf = (options: LimitOptions): Limits => {
  const timeout = Duration.decode(options.timeout ?? "10 minutes")
  const idle = Duration.decode(options.idleTimeout ?? "2 minutes")
  const count = (name: string, value: number | undefined, fallback: number) => {
    if (value === undefined) return fallback
    if (!Number.isSafeInteger(value) || value <= 0) throw new Error(`${name} must be a positive whole number of bytes, got ${value}`)
    return value
  }
  return {
    timeout,
    idleTimeout: Duration.min(idle, timeout),
    maxResponseBytes: count("maxResponseBytes", options.maxResponseBytes, 32 * 1024 * 1024),
    maxLineBytes: count("maxLineBytes", options.maxLineBytes, 8 * 1024 * 1024)
  }
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
const tooSlow = (post: Post) =>
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

/** One server-sent event: its `event` field (`"message"` when it had none) and its `data` lines, joined. */
export interface SseEvent {
  readonly event: string
  readonly data: string
  /** A whole JSON body's value (`wholeBody`), parsed once. */
  readonly body?: unknown
}

/**
 * The lines of an event stream as its events (the WHATWG rules used here: `event:` and `data:`
 * fields, `:` comments, a blank line ends an event; an event cut off by the end is dropped).
 */
export const sseEvents = <E, R>(lines: Stream.Stream<string, E, R>): Stream.Stream<SseEvent, E, R> =>
  Stream.suspend(() => {
    let event = ""
    let data: Array<string> = []
    return Stream.filterMap(lines, (line) => {
      if (line === "") {
        if (data.length === 0) {
          event = ""
          return Option.none()
        }
        const out = { event: event === "" ? "message" : event, data: data.join("\n") }
        event = ""
        data = []
        return Option.some(out)
      }
      if (line.startsWith(":")) return Option.none()
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? "" : line.slice(line[colon + 1] === " " ? colon + 2 : colon + 1)
      if (field === "event") event = value
      else if (field === "data") data.push(value)
      return Option.none()
    })
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

/** Fails with `tooMany()` once the chunks passing through add up to more than `limit` bytes. */
const counted = (limit: number, tooMany: () => LanguageModel.ModelError) =>
<E, R>(chunks: Stream.Stream<Uint8Array, E, R>): Stream.Stream<Uint8Array, E | LanguageModel.ModelError, R> =>
  Stream.suspend(() => {
    let total = 0
    return Stream.mapEffect(chunks, (chunk) => (total += chunk.byteLength) > limit ? Effect.fail(tooMany()) : Effect.succeed(chunk))
  })

/**
 * Text split into lines (`\n`, `\r\n` or `\r`, as `Stream.splitLines`), failing with `tooLong()` as soon as a
 * line, ended or not, passes `limit` characters (a character is at least a byte: the bound in bytes holds).
 */
export const boundedLines = (limit: number, tooLong: () => LanguageModel.ModelError) =>
<E, R>(text: Stream.Stream<string, E, R>): Stream.Stream<string, E | LanguageModel.ModelError, R> =>
  Stream.suspend(() => {
    let rest = ""
    let cr = false
    return text.pipe(
      Stream.mapConcatEffect((piece) => {
        const lines: Array<string> = []
        let start = 0
        for (let i = 0; i < piece.length; i++) {
          const c = piece.charCodeAt(i)
          if (c === 10 && cr) {
            // The \n of a \r\n whose \r ended the piece before.
            cr = false
            start = i + 1
            continue
          }
          cr = false
          if (c === 10 || c === 13) {
            lines.push(rest + piece.slice(start, i))
            rest = ""
            start = i + 1
            if (c === 13) {
              if (piece.charCodeAt(i + 1) === 10) {
                i++
                start = i + 1
              } else if (i + 1 === piece.length) cr = true
            }
          }
        }
        rest += piece.slice(start)
        return rest.length > limit || lines.some((line) => line.length > limit)
          ? Effect.fail(tooLong())
          : Effect.succeed(lines)
      }),
      Stream.concat(Stream.suspend(() => rest === "" ? Stream.empty : Stream.make(rest)))
    )
  })

/** The event name under which a whole JSON body (a server that did not stream) reaches a provider's reader. */
export const wholeBody = "agent-tools/whole-body"

/** The POST's span attributes (OpenTelemetry's names); secret headers show as `<redacted>`. */
const spanAttributes = (post: Post): Record<string, unknown> => {
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

/** The JSON of a 2xx answer; an empty body or one that is not JSON is a non-transient `ModelError` saying which. */
const parseBody = (
  provider: string,
  status: number,
  text: string
): Effect.Effect<unknown, LanguageModel.ModelError> => {
  if (text.trim() === "") {
    return Effect.fail(
      new LanguageModel.ModelError({ message: `${provider}: HTTP ${status} with an empty body`, transient: false, status })
    )
  }
  if (Json.textDeeperThan(text, Json.defaultLimits.maxDepth)) return Effect.fail(tooDeep(provider, "body", status))
  try {
    return Effect.succeed(JSON.parse(text))
  } catch (error) {
    // The parser's words say where it broke ("Unexpected end of JSON input" for a cut body).
    const reason = error instanceof Error ? error.message : String(error)
    return Effect.fail(
      new LanguageModel.ModelError({
        message: `${provider}: HTTP ${status} with a body that is not JSON (${reason.slice(0, 200)})`,
        transient: false,
        status
      })
    )
  }
}

/**
 * A 2xx body that is JSON but not the API's shape: a non-transient `ModelError` listing what is
 * wrong, field by field (`content: is missing`), instead of the Schema's whole type.
 */
export const unexpectedBody = (
  provider: string,
  body: unknown,
  error: ParseResult.ParseError
): LanguageModel.ModelError => {
  const problems = typeof body !== "object" || body === null || Array.isArray(body)
    ? `expected a JSON object, got ${body === null ? "null" : Array.isArray(body) ? "an array" : typeof body}`
    : ParseResult.ArrayFormatter.formatErrorSync(error)
      .map((issue) => `${issue.path.length === 0 ? "body" : issue.path.join(".")}: ${issue.message}`)
      .join("; ")
  return new LanguageModel.ModelError({
    message: `${provider}: unexpected response body: ${problems.slice(0, 500)}`,
    transient: false
  })
}

/**
 * A provider's response decoder: the body decoded strictly against `schema` (every problem listed
 * by `unexpectedBody`), then made a turn by `toTurn`.
 */
export const turnFromBody = <A, I>(
  provider: string,
  schema: Schema.Schema<A, I>,
  toTurn: (body: A, request: LanguageModel.ModelRequest) => LanguageModel.ModelTurn
): (body: unknown, request: LanguageModel.ModelRequest) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelError> => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (body, request) => {
    const decoded = decode(body)
    return decoded._tag === "Left"
      ? Effect.fail(unexpectedBody(provider, body, decoded.left))
      : Effect.succeed(toTurn(decoded.right, request))
  }
}

/**
 * A provider's stream event decoder: the event's JSON decoded against `schema`; data that is not
 * JSON, or not the API's shape, is a non-transient `ModelError` saying what is wrong.
 */
/**
 * A provider's answer nested deeper than the pipeline takes any value (`Json.defaultLimits`), refused
 * from its text before it is parsed or decoded (deep values overflow the stack of both), not retried.
 */
const tooDeep = (provider: string, what: string, status?: number): LanguageModel.ModelError =>
  new LanguageModel.ModelError({
    message: `${provider}: a ${what} nested deeper than ${Json.defaultLimits.maxDepth} levels, refused unread`,
    transient: false,
    ...(status === undefined ? {} : { status })
  })

export const eventDecoder = <A, I>(
  provider: string,
  schema: Schema.Schema<A, I>
): (data: string) => A | LanguageModel.ModelError => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (data) => {
    if (Json.textDeeperThan(data, Json.defaultLimits.maxDepth)) return tooDeep(provider, "stream event")
    let json: unknown
    try {
      json = JSON.parse(data)
    } catch {
      return new LanguageModel.ModelError({
        message: `${provider}: a stream event that is not JSON (${data.slice(0, 200)})`,
        transient: false
      })
    }
    const decoded = decode(json)
    if (decoded._tag === "Right") return decoded.right
    const error = unexpectedBody(provider, json, decoded.left)
    return new LanguageModel.ModelError({ ...error, message: error.message.replace("response body", "stream event") })
  }
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

/**
 * Reads one streamed turn of a provider: each event gives the parts it completes, or the failure it
 * reports; at the end, a stream that stopped before the provider's last event is a failure.
 */
export interface StreamReader {
  readonly event: (event: SseEvent) => ReadonlyArray<LanguageModel.ModelPart> | LanguageModel.ModelError
  readonly end: () => LanguageModel.ModelError | undefined
}

/**
 * A provider's `LanguageModel`: each request is a JSON POST to `url` asking for a stream (its body
 * from `toBody`), its events read by a `reader`; a server that answers one JSON body instead is read
 * by `fromBody`. `generate` collects the stream. A stream that breaks (a cut connection, silence
 * past the timeout, no last event) fails with a transient `ModelError` saying after how many parts:
 * the loop asks again, the parts that came are discarded (design: The model side).
 */
export const layerModel = (provider: {
  readonly name: string
  /** The model asked for, for the `chat` span. */
  readonly model?: string | undefined
  readonly url: string
  readonly headers: Record<string, string>
  readonly secretHeaders: Record<string, Redacted.Redacted<string>>
  /** Its time and size bounds (`Limits`), as the provider's options give them. */
  readonly limits: LimitOptions
  readonly toBody: (request: LanguageModel.ModelRequest) => unknown
  readonly fromBody: (
    body: unknown,
    request: LanguageModel.ModelRequest
  ) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelError>
  readonly reader: (request: LanguageModel.ModelRequest) => StreamReader
  /**
   * The provider's strict mode: each tool goes out in its strict form (`StrictSchema`), one with none
   * is refused before the request, and each call's arguments come back to the tool's own form.
   */
  readonly strict?: StrictSchema.Provider | undefined
}): Layer.Layer<LanguageModel.LanguageModel, never, HttpClient.HttpClient> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.map(HttpClient.HttpClient, (client) => {
      const limits = limitsOf(provider.limits)
      const stream = (request: LanguageModel.ModelRequest): Stream.Stream<LanguageModel.ModelPart, LanguageModel.ModelFailure> => {
        const post: Post = {
          provider: provider.name,
          url: provider.url,
          headers: provider.headers,
          secretHeaders: provider.secretHeaders,
          body: provider.toBody(request),
          idleTimeout: limits.idleTimeout,
          limits
        }
        const checked = checkedUsage(provider.name)
        return Stream.unwrap(Effect.map(postStream(client, post), (events) =>
          Stream.suspend(() => {
            const reader = provider.reader(request)
            let parts = 0
            let whole = false
            const broke = (error: LanguageModel.ModelError): LanguageModel.ModelError =>
              parts === 0 || !error.transient ? error : new LanguageModel.ModelError({
                ...error,
                message: `${error.message} (the stream broke after ${parts} part(s); they are discarded)`
              })
            return events.pipe(
              Stream.mapEffect((event): Effect.Effect<ReadonlyArray<LanguageModel.ModelPart>, LanguageModel.ModelError> => {
                if (event.event === wholeBody) {
                  whole = true
                  return Effect.flatMap(provider.fromBody(event.body, request), (turn) => checked(LanguageModel.partsOf(turn)))
                }
                const out = reader.event(event)
                return out instanceof LanguageModel.ModelError ? Effect.fail(out) : checked(out)
              }),
              // The provider's last event (its parts end with `Finish`) ends the answer, whether or not the
              // server closes the connection after it.
              Stream.takeUntil((out) => out.length > 0 && out[out.length - 1]!._tag === "Finish"),
              Stream.concat(Stream.suspend(() => {
                const failure = whole ? undefined : reader.end()
                return failure === undefined ? Stream.empty : Stream.fail(failure)
              })),
              Stream.flattenIterables,
              Stream.tap(() => Effect.sync(() => void parts++)),
              Stream.mapError(broke)
            )
          })
        )).pipe(
          // However it trickles (comments, pings, a byte at a time), the whole answer ends within `timeout`.
          Stream.interruptWhen(Effect.zipRight(Effect.sleep(limits.timeout), Effect.fail(tooSlow(post)))),
          // Our span, not the HTTP client's: its exit would hold the request, key in clear (and no traceparent goes out).
          Stream.withSpan("http.client POST", { kind: "client", attributes: spanAttributes(post), captureStackTrace: false })
        )
      }
      const strict = strictTools(provider.strict)
      const streamStrict = strict === undefined ? stream : strict(stream)
      return LanguageModel.LanguageModel.of({
        provider: provider.name,
        model: provider.model,
        stream: streamStrict,
        streams: true,
        ...(provider.strict === undefined ? {} : { strictSchemas: provider.strict }),
        generate: (request) => LanguageModel.collect(streamStrict(request))
      })
    })
  )

/** The providers whose usage was refused once already: each is warned of once a process. */
const warnedUsage = new Set<string>()

/**
 * An event's parts, their usage's counts whole numbers from 0 up as the provider sent them; any other count
 * (negative, `1e999`, fractional) is counted as unknown (`LanguageModel.checkUsage`), warned of once. Parts with no
 * usage (nearly every event) pass as they are.
 */
const checkedUsage = (provider: string) =>
(parts: ReadonlyArray<LanguageModel.ModelPart>): Effect.Effect<ReadonlyArray<LanguageModel.ModelPart>> => {
  const at = parts.findIndex((part) => part._tag === "Usage")
  if (at === -1) return Effect.succeed(parts)
  const { bad, usage } = LanguageModel.checkUsage((parts[at] as Extract<LanguageModel.ModelPart, { _tag: "Usage" }>).usage)
  if (bad.length === 0) return Effect.succeed(parts)
  const out = parts.slice()
  out[at] = LanguageModel.ModelPart.Usage({ usage })
  if (warnedUsage.has(provider)) return Effect.succeed(out)
  warnedUsage.add(provider)
  return Effect.as(
    Effect.logWarning(
      `${provider}: usage counts that are not whole numbers from 0 up (${bad.join(", ")}) are counted as unknown ` +
        "(this is said once a process)"
    ),
    out
  )
}

/** `base` without trailing slashes, then `path`. */
export const endpoint = (base: string, path: string): string => `${base.replace(/\/+$/, "")}${path}`

type Turns = (request: LanguageModel.ModelRequest) => Stream.Stream<LanguageModel.ModelPart, LanguageModel.ModelFailure>

/**
 * A provider's `stream` in its strict mode: the request's tools in their strict form (prepared once
 * per toolkit), a toolkit with a tool that has none refused with `ModelRequestRejected` naming it,
 * and each call's arguments brought back to its tool's own form (`restore`).
 */
const strictTools = (provider: StrictSchema.Provider | undefined): ((stream: Turns) => Turns) | undefined => {
  if (provider === undefined) return undefined
  const prepare = StrictSchema.preparer(provider, true)
  return (stream) => (request) => {
    const prepared = prepare(request.tools)
    if (Either.isLeft(prepared)) {
      return Stream.fail(new LanguageModel.ModelRequestRejected({ message: prepared.left.message, status: 400 }))
    }
    const { restore, tools } = prepared.right
    return stream({ ...request, tools }).pipe(Stream.map((part) =>
      part._tag === "ToolCall"
        ? LanguageModel.ModelPart.ToolCall({ call: { ...part.call, arguments: restore(part.call.name, part.call.arguments) } })
        : part
    ))
  }
}

