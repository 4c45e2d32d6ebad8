/**
 * Every timing rule in one place: the named Schedules of tool and model retries, heartbeats,
 * redelivery, reconnection and the stores' sweeps. Defaults apply when nothing is provided;
 * `Timing.layer({...})` overrides some of them in main.ts or a test.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { stepper } from "./internal/util/schedule.js"

/** The named Schedules. Each one's output is ignored; only its delays and its end matter. */
export interface Schedules {
  /** Backoff between re-runs of a failed tool handler (design: Retries), bounded by the call's deadline. */
  readonly toolRetry: Schedule.Schedule<unknown, unknown>
  /** Backoff between re-tries of a model request that failed transiently (429, 5xx, reset), and how many. */
  readonly modelRetry: Schedule.Schedule<unknown, unknown>
  /**
   * When a serving process heartbeats when the platform does not say its interval (design: Serving):
   * every 60 s, jittered. The platform's interval wins (`heartbeatFor`); one set here beats sooner, never later.
   */
  readonly heartbeat: Schedule.Schedule<unknown, unknown>
  /** When the platform delivers an unanswered tool call again (design: The platform). */
  readonly redelivery: Schedule.Schedule<unknown, unknown>
  /** How a serving process retries a platform call while the connection is away. */
  readonly reconnect: Schedule.Schedule<unknown, unknown>
  /** How often the delivery-dedupe store drops entries past their tool's timeout (design: Delivery dedupe). */
  readonly dedupeSweep: Schedule.Schedule<unknown, unknown>
  /** How often the platform forgets ended tasks (memory and journal) and silent processes (design: Hostile clients). */
  readonly platformSweep: Schedule.Schedule<unknown, unknown>
  /**
   * The longest wait a provider's `retry-after` may ask for before a model request is tried again: one that
   * asks for more fails the turn at once, saying the status and the wait (docs/limits.md). Default 60 s.
   */
  readonly maxRetryAfter: Duration.Duration
}

/** Exponential from 200 ms, doubling, each delay jittered to 80-120 %. */
export const defaultToolRetry: Schedule.Schedule<unknown, unknown> = Schedule.exponential("200 millis", 2).pipe(
  Schedule.jittered
)

/** Exponential from 500 ms, doubling, jittered; at most 4 retries. */
export const defaultModelRetry: Schedule.Schedule<unknown, unknown> = Schedule.exponential("500 millis", 2).pipe(
  Schedule.jittered,
  Schedule.intersect(Schedule.recurs(4))
)

/** The heartbeat interval the platform expects; silence for 3 of them hides an agent's tools. */
export const heartbeatInterval = Duration.seconds(60)

/**
 * How long the calls still running may go on when a serving process stops, before they are
 * interrupted (`Serve.MakeOptions.shutdownGrace`, `serve --grace`).
 */
export const shutdownGrace = Duration.seconds(30)

/** The defaults, used when no layer provides other schedules. */
export const defaults: Schedules = {
  toolRetry: defaultToolRetry,
  modelRetry: defaultModelRetry,
  heartbeat: Schedule.spaced(heartbeatInterval).pipe(Schedule.jittered),
  redelivery: Schedule.spaced("10 seconds"),
  reconnect: Schedule.exponential("200 millis", 2).pipe(
    Schedule.jittered,
    Schedule.union(Schedule.spaced("5 seconds")),
    Schedule.upTo("2 minutes")
  ),
  dedupeSweep: Schedule.spaced("1 second"),
  platformSweep: Schedule.spaced("1 minute"),
  maxRetryAfter: Duration.seconds(60)
}

/** The schedules in force: a `Context.Reference`, so code that provides nothing gets `defaults`. */
export class Timing extends Context.Reference<Timing>()("agent-tools/Timing", {
  defaultValue: (): Schedules => defaults
}) {}

/**
 * The schedule a serving process heartbeats on (design: Serving). The platform owns the interval: it
 * judges a process silent by it and says it at registration (`platformMillis`); the process beats on
 * it, jittered to 80-100 % of it so never later. `local` (`Timing`'s `heartbeat`) alone when the
 * platform said none (an older platform); a `local` set by a layer beats sooner where it is sooner.
 */
export const heartbeatFor = (
  local: Schedule.Schedule<unknown, unknown>,
  platformMillis: number | undefined
): Schedule.Schedule<unknown, unknown> => {
  if (!saysInterval(platformMillis)) return local
  const platform = Schedule.spaced(Duration.millis(platformMillis))
  return local === defaults.heartbeat
    ? Schedule.jitteredWith(platform, { min: 0.8, max: 1 })
    : Schedule.union(local, platform)
}

/** Whether a registration's answer said a usable interval: else `heartbeatFor` keeps `local`. */
const saysInterval = (platformMillis: number | undefined): platformMillis is number =>
  platformMillis !== undefined && Number.isFinite(platformMillis) && platformMillis > 0

/** What `heartbeatFor` keeps, in words, for the registration's log line: `every 60 s (the platform's interval)`. */
export const heartbeatText = (
  local: Schedule.Schedule<unknown, unknown>,
  platformMillis: number | undefined
): string => {
  if (!saysInterval(platformMillis)) {
    return local === defaults.heartbeat
      ? `every ${Duration.toSeconds(heartbeatInterval)} s, jittered (the platform said no interval: Timing's default)`
      : "on Timing's heartbeat schedule (the platform said no interval)"
  }
  const every = `every ${platformMillis / 1000} s`
  return local === defaults.heartbeat
    ? `${every} (the platform's interval, jittered to 80-100 % of it)`
    : `${every} (the platform's interval), or sooner on Timing's heartbeat schedule`
}

/** Overrides some schedules; the rest keep their defaults. Provides `Timing` (a `Context.Reference`: nothing requires it). */
export const layer = (schedules: Partial<Schedules>): Layer.Layer<Timing> =>
  Layer.succeed(Timing, { ...defaults, ...schedules })

/**
 * Re-runs `effect`, which just failed with `first`, on `schedule` while `retryable(error)` holds;
 * each wait is at least `minDelayMillis(error)` (a provider's retry-after). The schedule is stepped
 * by hand so that the wait can honour both. Fails with the last error once the schedule ends, and at
 * once with `tooLong(error, millis)` when the error asks for a wait over `maxDelayMillis`.
 */
export const retryAfterFailure = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  first: E,
  schedule: Schedule.Schedule<unknown, unknown>,
  options: {
    readonly retryable: (error: E) => boolean
    readonly minDelayMillis?: ((error: E) => number | undefined) | undefined
    readonly onRetry?: ((error: E, delay: Duration.Duration) => Effect.Effect<void>) | undefined
    readonly maxDelayMillis?: number | undefined
    readonly tooLong?: ((error: E, millis: number) => E) | undefined
  }
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const steps = stepper(schedule)
    let error = first
    while (true) {
      const now = yield* Clock.currentTimeMillis
      const retryAt = yield* steps.next(now, error)
      if (retryAt === undefined) return yield* Effect.fail(error)
      const asked = options.minDelayMillis?.(error) ?? 0
      if (options.maxDelayMillis !== undefined && asked > options.maxDelayMillis) {
        return yield* Effect.fail(options.tooLong === undefined ? error : options.tooLong(error, asked))
      }
      const delay = Duration.millis(Math.max(retryAt - now, asked))
      if (options.onRetry !== undefined) yield* options.onRetry(error, delay)
      yield* Effect.sleep(delay)
      const exit = yield* Effect.either(effect)
      if (exit._tag === "Right") return exit.right
      error = exit.left
      if (!options.retryable(error)) return yield* Effect.fail(error)
    }
  })
