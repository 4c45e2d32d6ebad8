/**
 * The pipeline's configuration and observer: the limits in force (`InvocationConfig`, a
 * `Context.Reference` whose default is `defaultConfig`), what the pipeline works out of a config once
 * (`derived`, `expiringThresholdMillis`), and the observer of retries (`InvocationObserver`).
 * Declared apart from the stages, re-exported by `pipeline.ts` and, from it, by `Invocation`.
 */
import { Context, Duration, type LogLevel } from "effect"
import type * as Json from "../util/json.js"

/** Limits of the pipeline. */
export interface Config {
  /** Arguments, and outputs, larger than this (UTF-8 bytes of the JSON) are refused. Default 1 MiB. */
  readonly maxPayloadBytes: number
  /** Outputs nested deeper than this (arrays and objects) are refused. Default 128. */
  readonly maxDepth: number
  /** Error texts are cut to this many characters. Default 2,048. */
  readonly maxErrorLength: number
  /** `ToolContext.isExpiring` turns true when this little time is left. Default 1 second. */
  readonly expiringThreshold: Duration.DurationInput
  /**
   * The level of the log line of a handler's raw failure (a throw, a rejection, a defect), written
   * where the handler ran, with its stack; `"None"`: no line. Default `"Error"`. A typed failure
   * (`Effect.fail`) is the tool's answer and is not logged.
   */
  readonly failureLogLevel?: LogLevel.Literal | undefined
  /**
   * A synchronous body on the event loop that holds it longer than this logs a warning naming the
   * tool and the line that moves it to a worker thread. Default 100 ms.
   */
  readonly blockingThreshold?: Duration.DurationInput | undefined
}

/** The defaults of `Config`. */
export const defaultConfig: Config = {
  maxPayloadBytes: 1024 * 1024,
  maxDepth: 128,
  maxErrorLength: 2048,
  expiringThreshold: "1 second",
  failureLogLevel: "Error",
  blockingThreshold: "100 millis"
}

/** The limits in force: a `Context.Reference`, so a bare `Invocation.run` gets `defaultConfig`. */
export class InvocationConfig extends Context.Reference<InvocationConfig>()("agent-tools/InvocationConfig", {
  defaultValue: (): Config => defaultConfig
}) {}

/** A retry about to happen (design: Retries), for progress views and logs. */
export interface RetryEvent {
  readonly tool: string
  readonly toolCallId: string
  /** The attempt that will run next (2, 3, ...). */
  readonly attempt: number
  readonly delayMillis: number
  /** The error text of the failure being retried. */
  readonly error: string
}

/** Observers of the pipeline: a `Context.Reference` whose default observes nothing. */
export class InvocationObserver extends Context.Reference<InvocationObserver>()("agent-tools/InvocationObserver", {
  defaultValue: (): { readonly onRetry: (event: RetryEvent) => void } => ({ onRetry: () => {} })
}) {}

const thresholds = new WeakMap<Config, number>()
/** `config.expiringThreshold` in milliseconds, worked out once per config. */
export const expiringThresholdMillis = (config: Config): number => {
  let millis = thresholds.get(config)
  if (millis === undefined) {
    millis = Duration.toMillis(config.expiringThreshold)
    thresholds.set(config, millis)
  }
  return millis
}

/** What the pipeline reads of a config on every call, worked out once per config. */
export interface Derived {
  readonly limits: Json.Limits
  readonly blockingMillis: number
  readonly failureLogLevel: LogLevel.Literal
}
const derivedCache = new WeakMap<Config, Derived>()
/** The `Derived` of `config`, worked out on its first use. */
export const derived = (config: Config): Derived => {
  let out = derivedCache.get(config)
  if (out === undefined) {
    out = {
      limits: { maxDepth: config.maxDepth ?? defaultConfig.maxDepth, maxBytes: config.maxPayloadBytes },
      blockingMillis: Duration.toMillis(Duration.decode(config.blockingThreshold ?? defaultConfig.blockingThreshold!)),
      failureLogLevel: config.failureLogLevel ?? defaultConfig.failureLogLevel!
    }
    derivedCache.set(config, out)
  }
  return out
}
