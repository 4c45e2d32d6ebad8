/**
 * The per-call context (design: Call context): which task and tool call a handler is serving, which attempt
 * this is, and when its deadline falls. `Invocation` provides it; a handler reads it with
 * `yield* ToolContext.ToolContext` or, when it may run outside a call, `yield* ToolContext.current`.
 */
import { Clock, Context, Duration, Effect, type FiberRefs, Option, Runtime, type Scope, type Tracer } from "effect"
import { effectLevels, type McpLogLevel } from "./internal/util/logLevels.js"
import { traceparentOf } from "./internal/util/traceContext.js"

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

/**
 * What a call gives its handler, so that a caller never provides them: the call's context and the call's
 * `Scope`, closed when the call ends (at its deadline at the latest): a resource the handler acquires with
 * `Effect.acquireRelease` is released then.
 */
export type CallServices = ToolContext | Scope.Scope

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

/** The levels of a call's log lines: MCP's (syslog's), lowest first. */
export type LogLevel = McpLogLevel

/**
 * Who hears a call's progress and log lines (design: Call context): over MCP, the client that made the
 * call (`Mcp` provides it for each `tools/call`); by default, nobody for progress and Effect's
 * logger for log lines. Plain functions that never throw, so a report costs a handler nothing.
 */
export interface Listener {
  readonly progress: (progress: number, total: number | undefined, message: string | undefined) => void
  readonly log: (level: LogLevel, message: string) => void
}

/** A log line as text: a string as it is, anything else as JSON; a `Redacted` anywhere is `<redacted>`. */
export const logText = (message: unknown): string => {
  if (typeof message === "string") return message
  try {
    return JSON.stringify(message) ?? String(message)
  } catch {
    return String(message)
  }
}

/**
 * The default listener. Its log lines never reach it from a call: `ToolContext.log` and a `Call` made
 * by the pipeline, by `Tool.test` or by `makeCallEffect` write them through the calling fiber's logger.
 * Only a bare `makeCall()`, used outside any fiber, has no logger to write to: its lines are dropped,
 * never written past the application's logger on a runtime of the process's (whose default logger
 * writes to stdout: under `mcp`, the protocol's channel).
 */
const nobody: Listener = {
  progress: () => undefined,
  log: () => undefined
}

/** The listener of the current call: `Mcp`'s for a `tools/call`, the default elsewhere. */
export class CallListener extends Context.Reference<CallListener>()("agent-tools/ToolContext/CallListener", {
  defaultValue: (): Listener => nobody
}) {}

/**
 * Reports how far the call is: `progress` (rising with each report) of `total` if known, and a
 * message. Over MCP, a `notifications/progress` to the client when its request asked for them; a
 * no-op elsewhere. A notification only: it does not move the call's deadline.
 */
export const progress = (progress: number, total?: number, message?: string): Effect.Effect<void> =>
  Effect.flatMap(CallListener, (listener) => Effect.sync(() => listener.progress(progress, total, message)))

/**
 * A log line of the call: over MCP, a `notifications/message` to the client (at or above the level it
 * set with `logging/setLevel`); elsewhere, Effect's log at the matching level. A value that is not a
 * string goes as JSON; a `Redacted` in it, or in a template string, reads `<redacted>`.
 */
export const log = (level: LogLevel, message: unknown): Effect.Effect<void> =>
  Effect.flatMap(CallListener, (listener) =>
    listener === nobody
      // In the calling fiber, so that its logger (stderr under `mcp`) and annotations apply.
      ? Effect.logWithLevel(effectLevels[level], logText(message))
      : Effect.sync(() => listener.log(level, logText(message))))

/**
 * The second argument of every handler (design: Handler shapes): the call's context for a body that is not an Effect,
 * an async or a plain function. Its clock is the caller's, so `TestClock` drives `remaining`.
 */
export interface Call extends ToolCallInfo {
  /**
   * Aborted when the call ends before its body does: at the deadline (reason: a `TimeoutError`
   * DOMException) or on interruption (an `AbortError`). Hand it to `fetch` and the like.
   */
  readonly signal: AbortSignal
  /** Milliseconds left before the deadline, zero once it has passed. */
  readonly remaining: () => number
  /** True when the remaining time is at or under the expiring threshold: finish up, start nothing new. */
  readonly isExpiring: () => boolean
  /** As `ToolContext.progress`, at once. */
  readonly progress: (progress: number, total?: number, message?: string) => void
  /** As `ToolContext.log`, at once. */
  readonly log: (level: LogLevel, message: unknown) => void
  /**
   * The W3C `traceparent` of the call's span (`execute_tool <name>`) while a tracer listens, for a body
   * that calls out over HTTP to carry the trace on (a `traceparent` header); undefined otherwise.
   */
  readonly traceparent: string | undefined
}

/**
 * A `Call` whose signal and helpers are made on first use: one object per attempt on the hot path,
 * no `AbortController` for a handler that never reads `signal`, and an abort that comes first is
 * kept for a signal made later.
 */
export class CallContext implements Call {
  private controller: AbortController | undefined = undefined
  private reason: unknown = undefined
  private aborted = false
  constructor(
    readonly info: ToolCallInfo,
    readonly clock: { readonly unsafeCurrentTimeMillis: () => number },
    // The calling fiber's services and fiber refs, read on first use only: the listener, and the logger of a line nobody hears.
    readonly calling?: {
      readonly context: Context.Context<never>
      readonly fiber: { readonly getFiberRefs: () => FiberRefs.FiberRefs }
    },
    /** The call's span, while a tracer listens. */
    private readonly span?: Tracer.AnySpan | undefined
  ) {}
  get traceparent(): string | undefined {
    return this.span === undefined ? undefined : traceparentOf(this.span)
  }
  get taskId(): string {
    return this.info.taskId
  }
  get toolCallId(): string {
    return this.info.toolCallId
  }
  get attempt(): number {
    return this.info.attempt
  }
  get deadlineAt(): number {
    return this.info.deadlineAt
  }
  get expiringThresholdMillis(): number {
    return this.info.expiringThresholdMillis
  }
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController()
      if (this.aborted) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }
  // Getters returning arrows, so that `const { remaining } = call` works too.
  get remaining(): () => number {
    return () => Math.max(0, this.info.deadlineAt - this.clock.unsafeCurrentTimeMillis())
  }
  get isExpiring(): () => boolean {
    return () => this.info.deadlineAt - this.clock.unsafeCurrentTimeMillis() <= this.info.expiringThresholdMillis
  }
  get progress(): (progress: number, total?: number, message?: string) => void {
    return (progress, total, message) => this.listener().progress(progress, total, message)
  }
  get log(): (level: LogLevel, message: unknown) => void {
    return (level, message) => {
      const listener = this.listener()
      if (listener !== nobody || this.calling === undefined) return listener.log(level, logText(message))
      // Through the caller's logger (stderr under `mcp`, its annotations), as `ToolContext.log` in an Effect.
      const runtime = Runtime.make({
        context: this.calling.context,
        fiberRefs: this.calling.fiber.getFiberRefs(),
        runtimeFlags: Runtime.defaultRuntimeFlags
      })
      Runtime.runSync(runtime)(Effect.logWithLevel(effectLevels[level], logText(message)))
    }
  }
  private listener(): Listener {
    return this.calling === undefined ? nobody : Context.get(this.calling.context, CallListener)
  }
  /** Aborts the signal with `reason`; later aborts keep the first reason. */
  abort(reason: unknown): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = reason
    this.controller?.abort(reason)
  }
}

/** A call's context with the defaults of a call made outside any: ids `"local"`, attempt 1, a deadline a minute after `now`. */
const localInfo = (now: number, info: Partial<ToolCallInfo> | undefined): ToolCallInfo => ({
  taskId: "local",
  toolCallId: "local",
  attempt: 1,
  deadlineAt: now + 60_000,
  expiringThresholdMillis: 1000,
  ...info
})

/**
 * A `Call` outside any call, for a unit test that calls `tool.handler(input, ToolContext.makeCall())`
 * directly, outside any fiber: ids `"local"`, attempt 1, a deadline a minute away unless given.
 * Its `remaining` and `isExpiring`, and the default deadline, read `clock`: by default the live clock
 * (wall time), not a `TestClock`; pass `clock` (any `{ unsafeCurrentTimeMillis }`) to fix them. It
 * belongs to no fiber, so its `log` lines are dropped: in an Effect, use `makeCallEffect` (the fiber's
 * clock and logger), or `Tool.test`, which gives a call of this kind the test's logger.
 */
export const makeCall = (
  info?: Partial<ToolCallInfo>,
  clock: { readonly unsafeCurrentTimeMillis: () => number } = Clock.make()
): CallContext => new CallContext(localInfo(clock.unsafeCurrentTimeMillis(), info), clock)

/**
 * `makeCall` on the running fiber: the default deadline, `remaining` and `isExpiring` on its `Clock`
 * (a `TestClock` drives them), its `log` lines through its logger and annotations, its `progress` to
 * its `CallListener`.
 */
export const makeCallEffect = (info?: Partial<ToolCallInfo>): Effect.Effect<CallContext> =>
  Effect.withFiberRuntime((fiber) => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const calling = { context: fiber.currentContext, fiber }
    return Effect.succeed(new CallContext(localInfo(clock.unsafeCurrentTimeMillis(), info), clock, calling))
  })
