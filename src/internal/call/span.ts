/**
 * The call's span and its count, stage `traced`'s part (design: Observability): the span
 * `execute_tool <name>`, opened before the call is admitted and ended with its result, and the call
 * counted by its outcome while a telemetry layer exports the metrics.
 */
import { Context, Effect, Exit, FiberId, Option, type Tracer } from "effect"
import { CaptureContent } from "../../Telemetry.js"
import * as Metrics from "../util/metrics.js"
import type * as Tool from "../../Tool.js"
import { ToolResult } from "../../ToolResult.js"
import type { CallingFiber, Options } from "./caller.js"
import { compile } from "./compiled.js"
import { ParsedArguments } from "./input.js"
import type { Started } from "./reuse.js"

/** The call counted by its outcome (`agent_tools.tool.calls`), while a telemetry layer exports metrics. */
export const counted = (calling: CallingFiber, tool: Tool.Any, started: Started): Started => {
  if (!calling.exporting) return started
  const count = (result: ToolResult): ToolResult => {
    Metrics.toolCalls.unsafeUpdate(1, Metrics.toolLabels(tool.name, result.failure?._tag ?? "success"))
    return result
  }
  return started instanceof ToolResult ? count(started) : Effect.map(started, count)
}

/**
 * The call's span, on OpenTelemetry's GenAI conventions (`execute_tool <name>`, `gen_ai.*`), ours under
 * `agent_tools.*`; the arguments only when contents are captured (`Telemetry.CaptureContent`).
 */
export const openSpan = (
  calling: CallingFiber,
  tool: Tool.Any,
  toolCallId: string,
  options: Options | undefined,
  args: unknown
): Tracer.Span => {
  const span = calling.fiber.currentTracer.span(
    compile(tool).spanName,
    Option.fromNullable(options?.parentSpan ?? calling.fiber.currentSpan),
    Context.empty(),
    [],
    calling.clock.unsafeCurrentTimeNanos(),
    "internal"
  )
  span.attribute("gen_ai.operation.name", "execute_tool")
  span.attribute("gen_ai.tool.name", tool.name)
  span.attribute("gen_ai.tool.type", "function")
  span.attribute("gen_ai.tool.call.id", toolCallId)
  if (options?.taskId !== undefined) span.attribute("gen_ai.conversation.id", options.taskId)
  span.attribute("agent_tools.attempt", 1)
  span.attribute("agent_tools.reused", false)
  if (Context.get(calling.context, CaptureContent)) span.attribute("gen_ai.tool.call.arguments", argumentsText(args))
  return span
}

/** The arguments as the span shows them when contents are captured: their JSON text. */
const argumentsText = (args: unknown): string => {
  if (typeof args === "string") return args
  if (args instanceof ParsedArguments) return args.text
  try {
    return JSON.stringify(args) ?? ""
  } catch {
    return String(args)
  }
}

/** `started`, the span ended with its result, or with its interruption. */
export const endWhenDone = (calling: CallingFiber, span: Tracer.Span, started: Started): Started => {
  if (started instanceof ToolResult) return endSpan(calling, span, started)
  return started.pipe(
    Effect.map((result) => endSpan(calling, span, result)),
    Effect.onInterrupt(() =>
      Effect.sync(() => span.end(calling.clock.unsafeCurrentTimeNanos(), Exit.interrupt(FiberId.none)))
    )
  )
}

const endSpan = (calling: CallingFiber, span: Tracer.Span, result: ToolResult): ToolResult => {
  const failure = result.failure
  span.attribute("agent_tools.outcome", failure === undefined ? "success" : failure._tag)
  if (failure !== undefined) span.attribute("error.type", failure._tag)
  if (Context.get(calling.context, CaptureContent)) {
    span.attribute("gen_ai.tool.call.result", failure === undefined ? argumentsText(result.value) : result.error ?? "")
  }
  span.end(calling.clock.unsafeCurrentTimeNanos(), result.success ? Exit.void : Exit.fail(result.error))
  return result
}
