import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { stepper } from "../../../src/internal/util/schedule.js"

describe("stepper", () => {
  it.effect("gives each recurrence's start from the time asked at, then undefined once the schedule is done", () =>
    Effect.gen(function*() {
      const steps = stepper(Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(2))))
      const starts = [yield* steps.next(0, 1), yield* steps.next(1_000, 2), yield* steps.next(5_000, 3)]
      assert.deepStrictEqual(starts, [100, 1_200, undefined])
    }))

  it.effect("passes each input to the schedule", () =>
    Effect.gen(function*() {
      const steps = stepper(Schedule.recurWhile((input: unknown) => input === "again"))
      assert.strictEqual(yield* steps.next(0, "again"), 0)
      assert.strictEqual(yield* steps.next(10, "stop"), undefined)
    }))
})
