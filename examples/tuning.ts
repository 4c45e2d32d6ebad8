/** Other limits for the pipeline, and other timing rules: both are layers over built-in defaults. */
import { Schedule } from "effect"
import { Invocation, Timing } from "../src/index.js"

// #region tuning
export const limits = Invocation.layer({
  maxPayloadBytes: 64 * 1024,
  maxErrorLength: 1000,
  expiringThreshold: "2 seconds"
})
export const timing = Timing.layer({
  toolRetry: Schedule.exponential("50 millis"),  // default: 200 ms doubling, jittered
  modelRetry: Schedule.exponential("1 second").pipe(Schedule.intersect(Schedule.recurs(2)))
})
// program.pipe(Effect.provide(Layer.merge(limits, timing))): what is not given keeps its default
// #endregion
