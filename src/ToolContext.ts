/**
 * The per-call context (DESIGN S8): which task and tool call a handler is serving, which attempt
 * this is, and when its deadline falls. `Invocation` provides it; a handler reads it with
 * `yield* ToolContext.ToolContext` or, when it may run outside a call, `yield* ToolContext.current`.
 */
import { Clock, Context, Duration, Effect, Option } from "effect"

/** What a handler knows about the call it is serving. Times are epoch milliseconds. */
export interface ToolCallInfo {
  /** The task this call belongs to (`"local"` when the caller gave none). */
  readonly taskId: string
  /** The tool call id, stable across redeliveries of the same call. */
  readonly toolCallId: string
  /** 1-based; +1 per retry inside one delivery, back to 1 on a redelivery. */
  readonly attempt: number
  /** The effective deadline: the earlier of start + the tool's timeout and the delivered deadline. */
  readonly deadlineAt: number
  /** How close to the deadline counts as expiring (from `Invocation`'s config). */
  readonly expiringThresholdMillis: number
}

/** The service tag: present inside a call made through `Invocation`, absent elsewhere. */
export class ToolContext extends Context.Tag("agent-tools/ToolContext")<ToolContext, ToolCallInfo>() {}

/** The current call's context, or `None` outside a call (for example in a direct `tool.handler(input)`). */
export const current: Effect.Effect<Option.Option<ToolCallInfo>> = Effect.serviceOption(ToolContext)

/** Time left before the call's deadline (zero once it has passed), read from the `Clock`. */
export const remaining: Effect.Effect<Duration.Duration, never, ToolContext> = Effect.flatMap(
  ToolContext,
  (ctx) => Effect.map(Clock.currentTimeMillis, (now) => Duration.millis(Math.max(0, ctx.deadlineAt - now)))
)

/** True when the remaining time is at or under the expiring threshold: finish up, start nothing new. */
export const isExpiring: Effect.Effect<boolean, never, ToolContext> = Effect.flatMap(
  ToolContext,
  (ctx) => Effect.map(Clock.currentTimeMillis, (now) => ctx.deadlineAt - now <= ctx.expiringThresholdMillis)
)
