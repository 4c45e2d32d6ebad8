/**
 * Starting one call of a run (design: Calls in a turn, Per-run reuse): through the run's door, which answers an
 * unknown tool `UnknownTool` (the text lists the tools there are) and reuses the run's outcomes for an idempotent
 * tool's call.
 */
import type * as LanguageModel from "../../LanguageModel.js"
import type * as Door from "../call/door.js"
import type { Run } from "./run.js"

/** The arguments as the pipeline takes them: JSON text, parsed already when it was JSON. */
export type Arguments = string | Door.ParsedArguments

/** Starts one call through the run's door: unknown tool -> `UnknownTool`; an idempotent one reuses the run's outcomes. */
export const startCall = (
  run: Run,
  calling: Door.CallingFiber,
  call: LanguageModel.ToolCall,
  args: Arguments
): Door.Started => run.door.start(calling, call.name, args, { taskId: run.runId, toolCallId: call.id })
