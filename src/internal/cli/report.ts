/**
 * What the CLI (`src/main.ts`) says in its own words: a command that failed, as one line; a server that
 * could not listen; a count and its noun. Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { errorText } from "../../ToolResult.js"
import { logLevel } from "./settings.js"

/**
 * A command that failed: one line on stderr (`agent-tools: <error>`), exit 1 (at once: an open stdin
 * must not keep the process), the cause in full at debug. Its scopes have closed by then.
 */
export const reportFatal = (cause: Cause.Cause<unknown>): Effect.Effect<void> =>
  Effect.flatMap(logLevel, (logLevel) => Effect.sync(() => {
    const failure = Cause.failureOption(cause)
    const error = Option.isSome(failure) ? failure.value : Cause.squash(cause)
    process.stderr.write(`agent-tools: ${errorText(error)}\n`)
    if (logLevel === LogLevel.Debug || logLevel === LogLevel.Trace || logLevel === LogLevel.All) {
      process.stderr.write(`${Cause.pretty(cause)}\n`)
    }
    process.exit(1)
  }))

/** Why a server could not listen, as the system said it (`listen EADDRINUSE: address already in use 127.0.0.1:8788`). */
export const listenFailure = (cause: unknown): string =>
  cause instanceof Error ? cause.message : typeof cause === "string" ? cause : "it could not listen"

/** `1 tool call`, `2 tool calls`. */
export const plural = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? "" : "s"}`
