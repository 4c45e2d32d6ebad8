/**
 * Starting one call of a run through the pipeline (design: Calls in a turn, Per-run reuse): an unknown tool is
 * answered `UnknownTool` (the text lists the tools there are); an idempotent tool's call reuses the
 * run's outcomes, through the pipeline's `reuse`.
 */
import type * as LanguageModel from "../../LanguageModel.js"
import * as Toolkit from "../../Toolkit.js"
import { ToolResult } from "../../ToolResult.js"
import * as Pipeline from "../call/pipeline.js"
import type { Run } from "./run.js"

/** The arguments as the pipeline takes them: JSON text, parsed already when it was JSON. */
export type Arguments = string | Pipeline.ParsedArguments

/** Starts one call: unknown tool -> `UnknownTool`; an idempotent one reuses the run's outcomes (design: Per-run reuse). */
export const startCall = (
  run: Run,
  calling: Pipeline.CallingFiber,
  call: LanguageModel.ToolCall,
  args: Arguments
): Pipeline.Started => {
  const tool = run.toolkit.byName.get(call.name)
  if (tool === undefined) return ToolResult.failure(Toolkit.unknownTool(run.toolkit, call.name))
  return Pipeline.start(calling, tool, args, { taskId: run.runId, toolCallId: call.id, run: run.hookState, reuse: run.outcomes })
}
