/**
 * The caller of a call, as the pipeline sees it: the fiber that makes it (`CallingFiber`: its
 * services, limits and clock) and what it asks (`Options`, with a `gate` that decides from the
 * `Admitted` call). Declared apart from the stages, re-exported by `pipeline.ts`.
 */
import { Clock, Context, type Effect, type Fiber, type RuntimeFlags, type Tracer } from "effect"
import type * as Reuse from "./reuse.js"
import type { Started } from "./reuse.js"
import { listening } from "../util/tracing.js"
import type { RunState } from "../hooks/tool.js"
import * as Metrics from "../util/metrics.js"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import type { ToolResult } from "../../ToolResult.js"
import { type Config, InvocationConfig } from "./config.js"
import { ToolWorkers, unprovided } from "../worker/service.js"

/** Who is calling, and by when the call must be done. */
export interface Options {
  /** Default `"local"`. */
  readonly taskId?: string | undefined
  /** Default: a fresh id from the `Ids` generator in force (`call-<UUID>`). */
  readonly toolCallId?: string | undefined
  /** The delivered deadline (epoch milliseconds or a Date): the call ends at the earlier of this and its timeout. */
  readonly deadlineAt?: number | Date | undefined
  /**
   * Called just before the handler runs (after decoding, the deadline check and the hooks that
   * come first): a call interrupted before it never had an effect (design: Interruption and shutdown).
   */
  readonly onStart?: (() => void) | undefined
  /**
   * The run whose state hooks may keep (design: Hooks): a face's door sets it, per run (`Agent`), task (`Serve`) or
   * session (`Mcp`).
   */
  readonly run?: RunState | undefined
  /**
   * A person approved this call through the run's journal or the platform (design: Durable runs); `Agent` and
   * `Serve` set it. Without it, a tool with `needsApproval` runs only if a hook approves (`Hooks.approved`).
   */
  readonly approved?: boolean | undefined
  /**
   * The scope whose outcomes an idempotent tool's call reuses and adds to (design: Per-run reuse): the same
   * call (`sameCall`: the tool and its decoded input) is answered by the first one's outcome. A face's
   * door gives its own, by the face's policy: per run (`Agent`), per session (`Mcp`).
   */
  readonly reuse?: Reuse.Outcomes | undefined
  /**
   * The store in which the call's delivery (task id, call id) runs once, however often it comes
   * (design: Delivery dedupe): `Serve` gives its `Idempotency` store.
   */
  readonly dedupe?: Reuse.Deliveries | undefined
  /**
   * The span the call's span is a child of, in place of the caller's current one: a span of another
   * process, named by the W3C `traceparent` a call carried (MCP's `_meta`, a platform's delivery).
   */
  readonly parentSpan?: Tracer.AnySpan | undefined
  /**
   * The caller's step once the input is decoded, in place of the plain reuse-or-run: an agent's
   * journaled replay and approvals (design: Durable runs). It decides from the `Admitted` call.
   */
  readonly gate?: Gate | undefined
}

/** A decoded call as a `gate` sees it, with what it may do with it. */
export interface Admitted {
  readonly tool: Tool.Any
  readonly toolCallId: string
  /** The decoded input. */
  readonly input: unknown
  /** Its input's part of the `sameCall` key (an approval is bound to it). */
  readonly inputKey: string
  /** The outcome of the same call in the `reuse` scope, for an idempotent tool (the call is then marked reused). */
  readonly reused: () => Started | undefined
  /** Keeps `started` as the same call's outcome in the `reuse` scope, for an idempotent tool; gives what to await. */
  readonly keep: (started: Started) => Started
  /**
   * Runs it (hooks, then the handler), on the fiber that runs the effect; `deadlineAt` and `approved`
   * take the place of the options' (a journaled call keeps its journaled deadline).
   */
  readonly run: (overrides?: {
    readonly deadlineAt?: number | undefined
    readonly approved?: boolean | undefined
  }) => Effect.Effect<ToolResult>
}

/** See `Options.gate`. */
export type Gate = (admitted: Admitted) => Started

/**
 * The fiber that makes a call, as the call needs it: its services, limits and clock, and its fiber
 * refs for the handler's fiber. Made once per batch of calls by loops that start many (`Agent`).
 */
export class CallingFiber {
  readonly context: Context.Context<never>
  readonly clock: Clock.Clock
  readonly config: Config
  readonly tracing: boolean
  /** A telemetry layer exports the metrics (`Metrics.Exporting`): the call's are counted. */
  readonly exporting: boolean
  constructor(readonly fiber: Fiber.RuntimeFiber<unknown, unknown>, readonly runtimeFlags: RuntimeFlags.RuntimeFlags) {
    this.context = fiber.currentContext
    this.clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    this.config = Context.get(this.context, InvocationConfig)
    this.tracing = listening(fiber)
    this.exporting = Context.get(this.context, Metrics.Exporting)
  }
}

/** `calling` with `context` in place of its own; its fiber, limits and clock stay the same. */
export const withContext = (calling: CallingFiber, context: Context.Context<never>): CallingFiber => ({
  fiber: calling.fiber,
  runtimeFlags: calling.runtimeFlags,
  clock: calling.clock,
  config: calling.config,
  tracing: calling.tracing,
  exporting: calling.exporting,
  context
})

/**
 * The caller on `fiber` in place of `calling` (a retry's awaiting fiber, a gate's running one), with that
 * fiber's services: a worker tool's call keeps the pools its door gave it (`ToolWorkers`), if `fiber` has none.
 */
export const onFiber = (
  calling: CallingFiber,
  tool: Tool.Any,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  runtimeFlags: RuntimeFlags.RuntimeFlags
): CallingFiber => {
  const next = new CallingFiber(fiber, runtimeFlags)
  if (tool.worker === undefined) return next
  const given = Context.get(calling.context, ToolWorkers)
  if (given === unprovided || Context.get(next.context, ToolWorkers) !== unprovided) return next
  return withContext(next, Context.add(next.context, ToolWorkers, given))
}

/**
 * A call's context whose id, its caller having given none, is made on first read (`mint`): the `Ids`
 * generator's UUID would cost a call whose body never reads it a fifth of its time. The pipeline gives
 * it only to a body's `Call`; what else sees the context (hooks, retries, an Effect body's
 * `ToolContext`, a worker) gets plain data (`settledInfo`), so that a spread of it keeps the id.
 */
export class LocalCallInfo implements ToolCallInfo {
  readonly attempt = 1
  constructor(
    readonly taskId: string,
    readonly deadlineAt: number,
    readonly expiringThresholdMillis: number,
    private readonly mint: () => string
  ) {}
  get toolCallId(): string {
    return this.mint()
  }
  toJSON(): ToolCallInfo {
    return settledInfo(this)
  }
}

/** `info` as plain data, its id made now if it was not yet. */
export const settledInfo = (info: ToolCallInfo): ToolCallInfo =>
  info instanceof LocalCallInfo
    ? {
      taskId: info.taskId,
      toolCallId: info.toolCallId,
      attempt: info.attempt,
      deadlineAt: info.deadlineAt,
      expiringThresholdMillis: info.expiringThresholdMillis
    }
    : info
