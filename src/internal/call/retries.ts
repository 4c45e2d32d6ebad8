/**
 * A failed attempt run again, stage `withRetries` (design: Retries): while the tool's rules call the
 * failure retryable and the next attempt can start before the deadline, on `Timing`'s `toolRetry`.
 */
import { Cause, Context, Duration, Effect, Exit, type Schedule, type Tracer } from "effect"
import { formatDuration } from "../util/duration.js"
import * as Metrics from "../util/metrics.js"
import { stepper } from "../util/schedule.js"
import { Timing } from "../../Timing.js"
import * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import { type Outcome, ReachedDeadline, runAttempt } from "./attempt.js"
import type { CallingFiber } from "./caller.js"
import { InvocationObserver } from "./config.js"
import { handlerFailure } from "./result.js"

/**
 * Stage 5, `withRetries`: re-runs a failed attempt up to `tool.retries` times while the tool's rules call
 * the failure retryable (`mayRetry`), each retry starting before the deadline (design: Retries).
 */
export const withRetries = (
  calling: CallingFiber,
  tool: Tool.Any,
  input: unknown,
  first: ToolCallInfo,
  start: number,
  span: Tracer.Span | undefined,
  progress: { attempt: number } | undefined
): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    const schedule = Context.get(calling.context, Timing).toolRetry
    yield* warnIfRetriesCannotFit(tool, schedule, start, first.deadlineAt)
    const steps = stepper(schedule)
    let info = first
    while (true) {
      span?.attribute("agent_tools.attempt", info.attempt)
      const step = runAttempt(calling, tool, input, info, span)
      const outcome = Exit.isExit(step) ? step : yield* step
      if (outcome === ReachedDeadline || Exit.isSuccess(outcome) || info.attempt > tool.retries) return outcome
      if (Cause.isInterruptedOnly(outcome.cause) || !mayRetry(tool, outcome.cause)) return outcome
      const now = calling.clock.unsafeCurrentTimeMillis()
      const retryAt = yield* steps.next(now, Cause.squash(outcome.cause))
      // A retry that cannot start before the deadline is skipped: the last failure stands.
      if (retryAt === undefined || retryAt >= info.deadlineAt) return outcome
      if (calling.exporting) Metrics.toolRetries.unsafeUpdate(1, Metrics.toolLabels(tool.name))
      Context.get(calling.context, InvocationObserver).onRetry({
        tool: tool.name,
        toolCallId: info.toolCallId,
        attempt: info.attempt + 1,
        delayMillis: retryAt - now,
        error: handlerFailure(tool, outcome.cause).text
      })
      yield* calling.clock.sleep(Duration.millis(retryAt - now))
      info = { ...info, attempt: info.attempt + 1 }
      if (progress !== undefined) progress.attempt = info.attempt
    }
  })

/**
 * The tool's rules for a failed attempt (design: Retries): every failure and defect of the cause must be
 * retryable. A `permanent` `_tag` never is; `retryable` judges failures of the error channel (not
 * defects, which are not of its type) and only `true` retries. Malformed rules retry nothing.
 */
const mayRetry = (tool: Tool.Any, cause: Cause.Cause<unknown>): boolean => {
  const { permanent, retryable } = tool
  // Toolkit.make refuses these; a tool run without one fails closed: its side effect is not repeated.
  if (!Tool.isPermanentList(permanent) || (retryable !== undefined && typeof retryable !== "function")) return false
  const isPermanent = (u: unknown) => {
    const tag = typeof u === "object" && u !== null && "_tag" in u ? u._tag : undefined
    return typeof tag === "string" && permanent.includes(tag)
  }
  for (const defect of Cause.defects(cause)) if (isPermanent(defect)) return false
  for (const failure of Cause.failures(cause)) {
    if (isPermanent(failure)) return false
    if (retryable === undefined) continue
    try {
      if (retryable(failure) !== true) return false
    } catch {
      return false
    }
  }
  return true
}

/** Logs once, at the start, when the nominal backoff of every retry does not fit before the deadline. */
const warnIfRetriesCannotFit = (
  tool: Tool.Any,
  schedule: Schedule.Schedule<unknown, unknown>,
  start: number,
  deadline: number
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const steps = stepper(schedule)
    let now = start
    for (let retry = 1; retry <= tool.retries; retry++) {
      const retryAt = yield* steps.next(now, undefined)
      if (retryAt === undefined) return
      now = retryAt
      if (now >= deadline) {
        return yield* Effect.logWarning(
          `${tool.name}: ${tool.retries} retries do not fit before the deadline ` +
            `(${formatDuration(deadline - start)} away); retry ${retry} and later will be skipped`
        ).pipe(Effect.annotateLogs({ tool: tool.name }))
      }
    }
  })
