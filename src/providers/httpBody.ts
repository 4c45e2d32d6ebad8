/**
 * A provider's answer read as JSON and decoded: a 2xx body (`parseBody`), a whole body or a stream
 * event against the API's Schema (`turnFromBody`, `eventDecoder`); what is not JSON, not the API's
 * shape, or nested too deep is a non-transient `ModelError` saying what is wrong.
 */
import { Effect, ParseResult, Schema } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import * as Json from "../internal/util/json.js"

/** The JSON of a 2xx answer; an empty body or one that is not JSON is a non-transient `ModelError` saying which. */
export const parseBody = (
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
 * A provider's answer nested deeper than the pipeline takes any value (`Json.defaultLimits`), refused
 * from its text before it is parsed or decoded (deep values overflow the stack of both), not retried.
 */
const tooDeep = (provider: string, what: string, status?: number): LanguageModel.ModelError =>
  new LanguageModel.ModelError({
    message: `${provider}: a ${what} nested deeper than ${Json.defaultLimits.maxDepth} levels, refused unread`,
    transient: false,
    ...(status === undefined ? {} : { status })
  })

/**
 * A provider's stream event decoder: the event's JSON decoded against `schema`; data that is not
 * JSON, or not the API's shape, is a non-transient `ModelError` saying what is wrong.
 */
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

/** Our usage from an OpenAI API's counts; the cached input tokens (part of the input's) when it said. */
export const usageFrom = (input: number | undefined, output: number | undefined, cached: number | null | undefined): LanguageModel.Usage => {
  const counts = { inputTokens: input ?? 0, outputTokens: output ?? 0 }
  return cached == null ? counts : { ...counts, cacheReadTokens: cached }
}
