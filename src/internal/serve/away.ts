/**
 * Retrying while the platform is away (design: Serving): an attempt that failed because the platform
 * could not be reached is tried again on `Timing.reconnect`, from the state it reached.
 */
import { Effect, Schedule } from "effect"
import type { ServeError } from "./errors.js"

// --- Retrying while the platform is away ---

/** A failed attempt, and how far it got: the next attempt goes on from there. */
export interface Failed<S> {
  readonly error: ServeError
  readonly reached: S
}

export const isAway = (failed: Failed<unknown>): boolean => failed.error._tag === "PlatformUnavailable"

/**
 * `attempt` from `state`; while the platform is away, again on `Timing.reconnect` from the state the
 * failed attempt reached. The schedule is set up only then, the failed attempt counting as its first
 * (the same delays as retrying from the start). Nothing to stop at shutdown: it lives in its caller.
 */
export const retryWhileAway = <S, A>(
  reconnect: Schedule.Schedule<unknown, unknown>,
  attempt: (state: S) => Effect.Effect<A, Failed<S>>,
  state: S
): Effect.Effect<A, Failed<S>> =>
  Effect.catchIf(attempt(state), isAway, (first) =>
    Effect.flatMap(Schedule.driver(reconnect), (driver) => {
      const again = (failed: Failed<S>): Effect.Effect<A, Failed<S>> =>
        isAway(failed)
          ? Effect.matchEffect(driver.next(failed.error), {
            onFailure: () => Effect.fail(failed),
            onSuccess: () => Effect.catchAll(attempt(failed.reached), again)
          })
          : Effect.fail(failed)
      return again(first)
    }))

/** `effect` retried on `Timing.reconnect` while the platform is away (`retryWhileAway` with no state). */
export const awayRetried = <A, E extends ServeError>(
  reconnect: Schedule.Schedule<unknown, unknown>,
  effect: Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.mapError(
    retryWhileAway(
      reconnect,
      () => Effect.mapError(effect, (error): Failed<void> => ({ error, reached: undefined })),
      undefined
    ),
    (failed) => failed.error as E
  )
