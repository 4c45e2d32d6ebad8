/**
 * Durations as people write them, in every text a user reads (errors, logs): `419 ms`, `1.2 s`, `2 min 30 s`,
 * `3 h 5 min`, `11574 d 1 h`. One rule, so that no text says `419ms 345215ns`.
 */
import * as Duration from "effect/Duration"

/** `duration` (or milliseconds) in at most two units, the smaller rounded. */
export const formatDuration = (duration: Duration.DurationInput | number): string => {
  const millis = typeof duration === "number" ? duration : Duration.toMillis(Duration.decode(duration))
  if (!Number.isFinite(millis)) return "forever"
  if (millis < 1000) return `${Math.round(millis)} ms`
  if (millis < 60_000) {
    const seconds = Math.round(millis / 100) / 10
    if (seconds < 60) return `${seconds} s`
  }
  // Rounded to the smaller unit; a value that rounds up to the next unit is said in that one (59 min 59.8 s: 1 h).
  for (let i = steps.length - 1; i >= 0; i--) {
    const [bigMillis, big, smallMillis, small] = steps[i]!
    const rounded = Math.round(Math.max(millis, bigMillis) / smallMillis) * smallMillis
    if (i > 0 && rounded >= steps[i - 1]![0]) continue
    const whole = Math.floor(rounded / bigMillis)
    const rest = Math.round((rounded % bigMillis) / smallMillis)
    return rest === 0 ? `${whole} ${big}` : `${whole} ${big} ${rest} ${small}`
  }
  return "forever"
}

/** Each unit and the one below it. */
const steps: ReadonlyArray<readonly [number, string, number, string]> = [
  [86_400_000, "d", 3_600_000, "h"],
  [3_600_000, "h", 60_000, "min"],
  [60_000, "min", 1000, "s"]
]
