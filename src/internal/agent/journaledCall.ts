/**
 * A journaled run's call and its journal (design: Durable runs): journaled as started before its handler runs, its
 * outcome journaled before the loop sees it; an outcome got without running (reused, unknown, denied)
 * journaled as the call's answer. The journal's outcome is the call's: the first writer's.
 */
import { Effect } from "effect"
import type * as Journal from "../../Journal.js"
import type * as LanguageModel from "../../LanguageModel.js"
import type { ToolResult } from "../../ToolResult.js"
import type * as Door from "../call/door.js"
import { awaitingApproval, type Run } from "./run.js"

/**
 * Runs a journaled call: journaled as started first (unless it was already), its outcome journaled
 * before the loop sees it; an idempotent tool's kept as the run's outcome for its input.
 */
export const runJournaled = (
  run: Run,
  admitted: Door.Admitted,
  call: LanguageModel.ToolCall,
  deadlineAt: number,
  firstStart: boolean,
  approved: boolean
): Door.Started => {
  const { journal } = run.journaled!
  const started = Effect.zipRight(
    firstStart
      ? journal.callStarted(run.runId, { toolCallId: call.id, name: call.name, arguments: call.arguments, deadlineAt })
      : Effect.void,
    // The journal's outcome is the call's: the first writer's, should another process have run it too.
    // A sub-agent's call whose child run suspended has no outcome yet: it waits with the run (design: Agents that
    // call agents), and is taken up again on resume.
    Effect.flatMap(
      admitted.run({ deadlineAt, approved }),
      (result) => run.nested.has(call.id) ? Effect.succeed(awaitingApproval) : journal.callEnded(run.runId, call.id, result)
    )
  )
  return admitted.keep(started)
}

/**
 * Journals `result` as the outcome of `call`, which did not run its handler here (reused, unknown,
 * denied); gives the outcome the journal holds (the first writer's).
 */
export const journalOutcome = (
  run: Run,
  call: LanguageModel.ToolCall,
  result: ToolResult,
  known: Journal.JournaledCall | undefined
): Effect.Effect<ToolResult> => {
  const { journal } = run.journaled!
  const deadlineAt = known?.deadlineAt ?? 0
  return journal.callAnswered(run.runId, { toolCallId: call.id, name: call.name, arguments: call.arguments, deadlineAt }, result)
}
