/**
 * A journaled run's calls (design: Durable runs, Interruption and shutdown): a journaled outcome is reused, not
 * run again; a call journaled as started without an outcome reads "outcome unknown" if its tool is
 * idempotent, and runs again within its journaled deadline if not; a new call is journaled before it
 * runs. The decisions are the pipeline's `gate` for the call, so the pipeline decodes and keys it.
 */
import { Duration, Effect } from "effect"
import type * as Journal from "../../Journal.js"
import type * as LanguageModel from "../../LanguageModel.js"
import { OutcomeUnknown, TimedOut, ToolResult, UnknownTool } from "../../ToolResult.js"
import * as Door from "../call/door.js"
import { approve } from "./approvals.js"
import { type Arguments, startCall } from "./call.js"
import { journalOutcome, runJournaled } from "./journaledCall.js"
import { awaitingApproval, type Run, subAgentTools } from "./run.js"
import { AgentEvent } from "./types.js"

/**
 * Starts one call of a journaled run: a non-idempotent tool's journaled outcome is reused as it is;
 * else the pipeline decodes the call and `replay` decides, as its gate.
 */
export const startJournaled = (
  run: Run,
  calling: Door.CallingFiber,
  step: number,
  call: LanguageModel.ToolCall,
  args: Arguments
): Door.Started => {
  const known = run.journaled!.calls.get(call.id)
  const tool = run.door.lookup(call.name)
  if (tool instanceof UnknownTool || known?.result !== undefined && !tool.idempotent) {
    if (known?.result === undefined) return startCall(run, calling, call, args)
    run.emit?.(AgentEvent.Replayed({ step, id: call.id }))
    return known.result
  }
  return run.door.start(calling, call.name, args, {
    taskId: run.runId,
    toolCallId: call.id,
    gate: (admitted) => replay(run, calling.clock.unsafeCurrentTimeMillis(), step, call, known, admitted)
  })
}

/**
 * A decoded call of a journaled run: an idempotent tool's journaled outcome is the run's outcome for
 * that input again (design: Per-run reuse); so is one the run reused already; a call journaled as
 * started without an outcome reads "outcome unknown" if its tool is idempotent, and runs again (within
 * its journaled deadline) if not; a new call is journaled as started before it runs, and its outcome
 * before the loop sees it. A call that needs approval passes `approve` first.
 */
const replay = (
  run: Run,
  now: number,
  step: number,
  call: LanguageModel.ToolCall,
  known: Journal.JournaledCall | undefined,
  admitted: Door.Admitted
): Door.Started => {
  const { tool } = admitted
  if (known?.result !== undefined) {
    run.emit?.(AgentEvent.Replayed({ step, id: call.id }))
    return admitted.keep(known.result)
  }
  const reused = admitted.reused()
  if (reused !== undefined) {
    // Reusing a sub-agent's call whose child run waits for approvals: this one waits with it, unjournaled.
    return Effect.flatMap(
      Door.awaitStarted(reused),
      (result) => result === awaitingApproval ? Effect.succeed(result) : journalOutcome(run, call, result, known)
    )
  }
  if (known !== undefined) {
    // A sub-agent's call goes on with its child run, journaled itself, for a whole timeout again: the time the
    // run stood suspended or stopped does not count (design: Agents that call agents).
    if (subAgentTools.has(tool)) return runJournaled(run, admitted, call, now + Duration.toMillis(tool.timeout), false, false)
    // It started before the run stopped; whether it had its effect is unknown (design: Interruption and shutdown).
    if (tool.idempotent && !run.journaled!.rerunUnfinished) {
      const unknown = ToolResult.failure(new OutcomeUnknown({ toolName: tool.name, earlierAttempt: "unfinished" }))
      admitted.keep(unknown)
      return journalOutcome(run, call, unknown, known)
    }
    if (known.deadlineAt <= now) {
      // Its deadline passed while the run was stopped: it timed out, as the first run's would have.
      const allowedMillis = Duration.toMillis(tool.timeout)
      const timedOut = ToolResult.failure(new TimedOut({ toolName: tool.name, allowedMillis }))
      return journalOutcome(run, call, timedOut, known)
    }
    // It passed its approval before it started.
    return runJournaled(run, admitted, call, known.deadlineAt, false, tool.needsApproval)
  }
  const deadlineAt = now + Duration.toMillis(tool.timeout)
  if (tool.needsApproval) return approve(run, admitted, call, now, deadlineAt)
  return runJournaled(run, admitted, call, deadlineAt, true, false)
}
