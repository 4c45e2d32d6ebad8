/**
 * What the HTTP providers share: one JSON POST asking for a stream, its server-sent events read as a
 * turn's parts (design: The model side) within a per-request timeout, and the mapping of
 * HTTP failures to the typed model failures (design: The loop): 429/5xx/529/resets transient, 401/403 auth,
 * other 4xx rejected with the provider's message. A key stays `Redacted` until it is written into
 * the request itself; the POST's span is made here, showing it as `<redacted>`, and no error, log or
 * span carries the request.
 *
 * This module is the provider's `LanguageModel` on top (`layerModel`); the POST and the failures'
 * mapping are `httpRequest.ts`'s, the response's bounds and its events `httpStream.ts`'s, and the
 * decoding of its JSON `httpBody.ts`'s, re-exported here for the providers.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import { Effect, Either, Layer, type Redacted, Schema, Stream } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import * as RateLimit from "../RateLimit.js"
import { type Post, postStream, spanAttributes, tooSlow } from "./httpRequest.js"
import { type LimitOptions, limitsOf, type SseEvent, wholeBody } from "./httpStream.js"
import * as StrictSchema from "./StrictSchema.js"

export { eventDecoder, turnFromBody, unexpectedBody } from "./httpBody.js"
export { failureFromStatus, type Post, postStream } from "./httpRequest.js"
export { boundedLines, type LimitOptions, type Limits, limitsOf, type SseEvent, sseEvents, wholeBody } from "./httpStream.js"

/** A provider's API key is not configured. */
export class MissingApiKey extends Schema.TaggedError<MissingApiKey>("agent-tools/MissingApiKey")("MissingApiKey", {
  variable: Schema.String,
  provider: Schema.String
}) {
  override get message(): string {
    return `${this.variable} is not set: ${this.provider} models need an API key`
  }
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
      const name = LanguageModel.labelOf({ provider: provider.name, model: provider.model })
      const stream = (request: LanguageModel.ModelRequest): Stream.Stream<LanguageModel.ModelPart, LanguageModel.ModelFailure> => {
        const post: Post = {
          provider: provider.name,
          url: provider.url,
          headers: provider.headers,
          secretHeaders: provider.secretHeaders,
          body: provider.toBody(request),
          idleTimeout: limits.idleTimeout,
          limits,
          onHeaders: (headers) => RateLimit.observe(name, headers)
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
      // Under the process's rate limits, when it has them (`RateLimit`): one wait per request.
      return LanguageModel.LanguageModel.of(RateLimit.limited({
        provider: provider.name,
        model: provider.model,
        stream: streamStrict,
        streams: true,
        ...(provider.strict === undefined ? {} : { strictSchemas: provider.strict }),
        generate: (request) => LanguageModel.collect(streamStrict(request))
      }, name))
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
