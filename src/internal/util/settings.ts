/**
 * Reading settings (environment variables through Effect's Config): one rule for "unset". Imports Effect
 * module by module: the CLI loads it up front (start-up time).
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/** A setting, `None` when it is unset, unreadable or empty (a secret's empty value too). */
export const optional = <A>(config: Config.Config<A>): Effect.Effect<Option.Option<A>> =>
  Config.option(config).pipe(
    Effect.map(Option.filter((value) =>
      value !== "" && !(Redacted.isRedacted(value) && Redacted.value(value as Redacted.Redacted<string>) === "")
    )),
    Effect.orElseSucceed(() => Option.none<A>())
  )

/** A secret setting (an API key, a token). */
export const optionalSecret = (name: string): Effect.Effect<Option.Option<Redacted.Redacted<string>>> =>
  optional(Config.redacted(name))

/** A plain setting (a URL, an id). */
export const optionalString = (name: string): Effect.Effect<Option.Option<string>> => optional(Config.string(name))

/**
 * A URL fit for a log line: a password, a user name and query values (a token, a database
 * password) replaced by `***`. A comma-separated list (a cluster's URLs) is redacted URL by URL.
 */
export const redactUrl = (text: string): string => {
  if (text === "") return "(unset)"
  return text.split(",").map((part) => redactOne(part.trim())).join(",")
}

const redactOne = (text: string): string => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "(not a URL)"
  }
  if (url.username !== "") url.username = "***"
  if (url.password !== "") url.password = "***"
  for (const key of [...url.searchParams.keys()]) url.searchParams.set(key, "***")
  return url.toString()
}

/** True for a `postgres://` or `postgresql://` URL (what `IDEMPOTENCY_DB` takes for PostgreSQL, besides a SQLite file). */
export const isPostgresUrl = (value: string): boolean => /^postgres(ql)?:\/\//i.test(value)
