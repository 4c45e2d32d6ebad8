/**
 * THE pipeline that runs one tool call (design: Input, Error text, Deadlines, Retries, Call context), and its
 * door: agent runs, served calls and MCP all go through a dispatcher over their toolkit (`dispatcher`, the door
 * of design: The call pipeline); none of them decodes, times out, retries or formats errors on its own.
 *
 * Arguments -> size and key checks -> strict decode -> hooks -> handler (own fiber, deadline,
 * retries, `ToolContext`) -> output encode -> JSON check -> `ToolResult`. Every failure on the way
 * becomes a failed result, its kind in `failure` and its text in `error`; nothing escapes as a defect.
 */
import { type Effect, Layer } from "effect"
import * as Door from "./internal/call/door.js"
import * as Pipeline from "./internal/call/pipeline.js"
import type * as Tool from "./Tool.js"
import type { CallServices } from "./ToolContext.js"
import type * as Toolkit from "./Toolkit.js"
import type { ToolResult } from "./ToolResult.js"

export type { CallOptions, Dispatcher, DispatcherOptions, ReusePolicy } from "./internal/call/door.js"

export {
  checkResult,
  type Config,
  defaultConfig,
  InvocationConfig,
  InvocationObserver,
  type RetryEvent
} from "./internal/call/pipeline.js"

/**
 * Who is calling, by when the call must be done, and where an earlier outcome may answer it: a delivery
 * store's (`dedupe`, such as the `Idempotency` service). A run's own outcomes (design: Per-run reuse) are a
 * dispatcher's (`dispatcher`'s `reuse`).
 */
export type Options = Omit<Pipeline.Options, "gate" | "reuse">

/** Overrides some limits; the rest keep their defaults. */
export const layerConfig = (config: Partial<Pipeline.Config>): Layer.Layer<Pipeline.InvocationConfig> =>
  Layer.succeed(Pipeline.InvocationConfig, { ...Pipeline.defaultConfig, ...config })

/**
 * Runs one call of `tool` with `args` (JSON text or an already-parsed value). Never fails and never
 * dies: every problem is a failed `ToolResult`. Interrupting it interrupts the handler.
 * With tracing on and a tracer installed, the call is a span `execute_tool <name>`, parent of the
 * handler's spans; with no tracer installed no span is made (nobody would read it).
 */
export const run = <R>(
  tool: Tool.Tool<string, any, any, any, R, any>,
  args: unknown,
  options?: Options
): Effect.Effect<ToolResult, never, Exclude<R, CallServices>> => Door.runTool(tool, args, options)

/**
 * A dispatcher over `toolkit` (the door every face goes through, design: The call pipeline): it runs a call by
 * tool name (an unknown name is the `UnknownTool` result every face gives), with the state of one run, session
 * or task: the hook state (`state`, else one of its own, of `kind`), an idempotent tool's outcomes reused by
 * `reuse` (`joinInFlight` for calls that start together, `maxBytes` to bound them), each delivery run once in
 * `dedupe`. A call's `traceparent` continues the caller's trace. `prepare` starts the worker threads of its
 * tools, once before the first call.
 */
export const dispatcher = <R>(toolkit: Toolkit.Toolkit<R>, options?: Door.DispatcherOptions): Door.Dispatcher<R> =>
  Door.make(toolkit, options)
