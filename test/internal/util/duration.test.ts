import { assert, describe, it } from "@effect/vitest"
import type { Duration } from "effect"
import { formatDuration } from "../../../src/internal/util/duration.js"

describe("durations as people write them", () => {
  it("at most two units, the smaller rounded; never nanoseconds", () => {
    const cases: ReadonlyArray<readonly [Duration.DurationInput, string]> = [
      [419.345215, "419 ms"],
      [0.4, "0 ms"],
      [1000, "1 s"],
      [1234, "1.2 s"],
      [9986, "10 s"],
      [59_990, "1 min"],
      [60_000, "1 min"],
      [150_000, "2 min 30 s"],
      [3_599_800, "1 h"],
      [3_900_000, "1 h 5 min"],
      [1e12, "11574 d 2 h"],
      ["10 minutes", "10 min"],
      [Infinity, "forever"]
    ]
    for (const [input, text] of cases) assert.strictEqual(formatDuration(input), text, String(input))
  })
})
