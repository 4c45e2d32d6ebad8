/**
 * The operator API (`/api/v1` of the platform, docs: operations) as the operating commands reach it: its base
 * URL made from the platform's (`--url`, else `PLATFORM_URL`: `ws://host:port/rpc` gives
 * `http://host:port/api/v1`, `wss:` gives `https:`), an operator token (`--operator-token`, else
 * `PLATFORM_OPERATOR_TOKEN`) sent as `Authorization: Bearer`, JSON in and out over `@effect/platform`'s fetch
 * client. An answer the API refuses is an `OperatorApiError` with its status, `_tag` and reason.
 * Imports Effect module by module, as main.ts does (start-up time); the HTTP client when a command runs.
 */
import * as Options from "@effect/cli/Options"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { load } from "./load.js"
import { BadOptions } from "./options.js"
import { operatorToken, platformUrl } from "./settings.js"

/** What the API answered when it refused: its status, and the `_tag` and `reason` of its body. */
export class OperatorApiError extends Data.TaggedError("OperatorApiError")<{
  readonly status: number
  readonly tag: string
  readonly reason: string
}> {
  override get message(): string {
    return `${this.status} ${this.tag}: ${this.reason}`
  }
}

/** The platform could not be reached over HTTP at all. */
export class OperatorApiUnreachable extends Data.TaggedError("OperatorApiUnreachable")<{ readonly message: string }> {}

/** How the commands reach the API: its base URL (`.../api/v1`) and the token. */
export interface Access {
  readonly base: string
  readonly token: Redacted.Redacted<string>
}

/** `--url` and `--operator-token`, each over its setting. */
export const accessOptions = {
  url: Options.text("url").pipe(
    Options.withDescription(
      "the platform's URL, ws://host:port/rpc or http://host:port (default: PLATFORM_URL; its API is /api/v1 there)"
    ),
    Options.optional
  ),
  operatorToken: Options.text("operator-token").pipe(
    Options.withDescription(
      "an operator token (default: PLATFORM_OPERATOR_TOKEN; prefer it: every local user sees a command line)"
    ),
    Options.optional
  )
}

/** The API's base URL for a platform URL (the first of a list): http(s) for ws(s), the path `/api/v1`. */
export const apiBase = (platformUrl: string): string | undefined => {
  const first = platformUrl.split(",").map((u) => u.trim()).find((u) => u !== "")
  if (first === undefined) return undefined
  try {
    const url = new URL(first)
    const scheme = ({ "ws:": "http:", "wss:": "https:", "http:": "http:", "https:": "https:" } as Record<string, string>)[url.protocol]
    if (scheme === undefined) return undefined
    return `${scheme}//${url.host}/api/v1`
  } catch {
    return undefined
  }
}

/** The access the options and the settings give; every missing one named at once, before any request. */
export const access = (options: {
  readonly url: Option.Option<string>
  readonly operatorToken: Option.Option<string>
}): Effect.Effect<Access, BadOptions> =>
  Effect.gen(function*() {
    const url = Option.isSome(options.url) ? options.url.value : yield* Effect.orElseSucceed(platformUrl, () => "")
    const token = Option.isSome(options.operatorToken)
      ? options.operatorToken.value
      : Redacted.value(yield* Effect.orElseSucceed(operatorToken, () => Redacted.make("")))
    if (Option.isSome(options.operatorToken)) {
      yield* Effect.logWarning("--operator-token puts a secret on the command line, where every local user can read it; " +
        "prefer PLATFORM_OPERATOR_TOKEN")
    }
    const missing = [url === "" ? "PLATFORM_URL (or --url)" : [], token === "" ? "PLATFORM_OPERATOR_TOKEN (or --operator-token)" : []].flat()
    if (missing.length > 0) return yield* new BadOptions({ message: `${missing.join(", ")} ${missing.length > 1 ? "are" : "is"} not set` })
    const base = apiBase(url)
    if (base === undefined) {
      return yield* new BadOptions({ message: "the platform's URL is malformed: ws://host:port/rpc (or wss://, http://, https://)" })
    }
    return { base, token: Redacted.make(token) }
  })

/** The reason of a refusal's body (`{ _tag, reason }`), or its text. */
const refusal = (status: number, text: string): OperatorApiError => {
  try {
    const body = JSON.parse(text) as { _tag?: unknown; reason?: unknown; message?: unknown }
    return new OperatorApiError({
      status,
      tag: typeof body._tag === "string" ? body._tag : "Error",
      reason: typeof body.reason === "string" ? body.reason : typeof body.message === "string" ? body.message : text
    })
  } catch {
    return new OperatorApiError({ status, tag: "Error", reason: text === "" ? "(no body)" : text })
  }
}

/**
 * A request to the API: `method` on `path` (under the base, its parts encoded by the caller), with `body` as JSON
 * when given; the answer's JSON (undefined for none), or what refused it.
 */
export const request = (
  to: Access,
  method: "GET" | "POST",
  path: string,
  body?: unknown
): Effect.Effect<unknown, OperatorApiError | OperatorApiUnreachable> =>
  Effect.gen(function*() {
    const [FetchHttpClient, HttpClient, HttpClientRequest] = yield* load(
      () => import("@effect/platform/FetchHttpClient"),
      () => import("@effect/platform/HttpClient"),
      () => import("@effect/platform/HttpClientRequest")
    )
    const url = `${to.base}${path}`
    const base = (method === "GET" ? HttpClientRequest.get(url) : HttpClientRequest.post(url)).pipe(
      HttpClientRequest.bearerToken(Redacted.value(to.token)),
      HttpClientRequest.acceptJson
    )
    const req = body === undefined ? base : HttpClientRequest.bodyUnsafeJson(base, body)
    const answered = yield* HttpClient.execute(req).pipe(
      Effect.flatMap((response) => Effect.map(response.text, (text) => ({ status: response.status, text }))),
      Effect.scoped,
      Effect.provide(FetchHttpClient.layer),
      Effect.mapError((error) =>
        new OperatorApiUnreachable({ message: `the platform's API at ${to.base} cannot be reached: ${error.message}` })
      )
    )
    if (answered.status >= 400) return yield* refusal(answered.status, answered.text)
    if (answered.text === "") return undefined
    return yield* Effect.try({
      try: () => JSON.parse(answered.text) as unknown,
      catch: () => new OperatorApiError({ status: answered.status, tag: "NotJson", reason: "the answer is not JSON" })
    })
  })
