/**
 * THE pipeline that runs one tool call (design: Input, Error text, Deadlines, Retries, Call context). Agent runs, served calls and MCP all
 * call `Invocation.run`; none of them decodes, times out, retries or formats errors on its own.
 *
 * Arguments -> size and key checks -> strict decode -> hooks -> handler (own fiber, deadline,
 * retries, `ToolContext`) -> output encode -> JSON check -> `ToolResult`. Every failure on the way
 * becomes a failed result, its kind in `failure` and its text in `error`; nothing escapes as a defect.
 */
import { Effect, Layer } from "effect"
import * as Pipeline from "./internal/call/pipeline.js"
import type * as Tool from "./Tool.js"
import type { ToolContext } from "./ToolContext.js"
import type { ToolResult } from "./ToolResult.js"

export {
  checkResult,
  type Config,
  defaultConfig,
  InvocationConfig,
  InvocationObserver,
  type RetryEvent
} from "./internal/call/pipeline.js"

/**
 * Who is calling, by when the call must be done, and where an earlier outcome may answer it: a
 * scope's (`reuse`) or a delivery store's (`dedupe`, such as the `Idempotency` service).
 */
export type Options = Omit<Pipeline.Options, "gate">

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
): Effect.Effect<ToolResult, never, Exclude<R, ToolContext>> =>
  Effect.withFiberRuntime((fiber, status) =>
    Pipeline.awaitStarted(Pipeline.start(new Pipeline.CallingFiber(fiber, status.runtimeFlags), tool, args, options))
  )
