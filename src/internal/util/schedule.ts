/**
 * One way to step a Schedule by hand, for the loops that must judge each delay before waiting on
 * it: tool retries against the call's deadline (design: Retries), the check that they fit, and
 * model retries against a provider's retry-after.
 */
import * as Effect from "effect/Effect"
import type * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as ScheduleIntervals from "effect/ScheduleIntervals"

/** A schedule being stepped: `next(now, input)` is when its next recurrence may start, or undefined once it is done. */
export interface Stepper {
  readonly next: (now: number, input: unknown) => Effect.Effect<number | undefined>
}

/** Starts stepping `schedule` from its initial state; each `next` that is not the end moves it on. */
export const stepper = (schedule: Schedule.Schedule<unknown, unknown>): Stepper => {
  let state = schedule.initial
  return {
    next: (now, input) =>
      Effect.map(schedule.step(now, input, state), ([next, , decision]) => {
        if (ScheduleDecision.isDone(decision)) return undefined
        state = next
        return ScheduleIntervals.start(decision.intervals)
      })
  }
}
