/**
 * The environment the CLI (`src/main.ts`) reads before anything starts: the log level (`LOG_LEVEL`,
 * `DEBUG=true`), and the settings that must have a form, checked at once (`settingsUsable`). Imports
 * Effect module by module, as main.ts does (start-up time).
 */
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import { BadOptions } from "./options.js"

/**
 * The log level `LOG_LEVEL` names (undefined for a name of none).
 * DEBUG=true is LOG_LEVEL=debug: registration and heartbeat lines, a fatal error's full cause.
 */
export const logLevel = process.env.DEBUG === "true"
  ? LogLevel.Debug
  : LogLevel.allLevels.find((level) => level.label.toLowerCase() === (process.env.LOG_LEVEL ?? "info").toLowerCase())

/** A URL of one of `schemes` (`ws:`, `https:`...), as `new URL` reads it. */
const isUrl = (schemes: ReadonlyArray<string>) => (text: string): boolean => {
  try {
    return schemes.includes(new URL(text).protocol)
  } catch {
    return false
  }
}

/**
 * The environment variables the commands read that must have a form, each with the form it needs (docs/configuration.md):
 * one that is set but cannot be used refuses the start, naming it and the form, never echoing its value (it may hold
 * a secret). The tokens' lists and the OpenTelemetry variables are checked where they are read, with their entries.
 * (`DEBUG` is other programs' too, `DEBUG=express:*`: only `true` means anything here, and nothing else is refused.)
 */
export const settingForms: ReadonlyArray<readonly [string, (text: string) => boolean, string]> = [
  ["LOG_LEVEL", (text) => logLevel !== undefined || process.env.DEBUG === "true" || text === "", `one of ${
    LogLevel.allLevels.map((level) => level.label.toLowerCase()).join(", ")
  }`],
  [
    "PLATFORM_URL",
    (text) => text.split(",").map((u) => u.trim()).filter((u) => u !== "").every(isUrl(["ws:", "wss:"])),
    "ws://host:port/rpc (or wss://), or a comma-separated list of them"
  ],
  ["PLATFORM_DATABASE", isUrl(["postgres:", "postgresql:"]), "postgres://user:password@host:port/db"],
  ...["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_BASE_URL", "OPENROUTER_BASE_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"].map(
    (name) => [name, isUrl(["http:", "https:"]), "an http:// or https:// URL"] as const
  )
]

/** Every setting of `settingForms` that is set but cannot be used refuses the start (one line, exit 1). */
export const settingsUsable: Effect.Effect<void, BadOptions> = Effect.suspend(() => {
  for (const [name, usable, form] of settingForms) {
    const text = (process.env[name] ?? "").trim()
    if (text !== "" && !usable(text)) return Effect.fail(new BadOptions({ message: `${name} is malformed: ${form}` }))
  }
  return Effect.void
})
