/**
 * The journal as a runner's tasks use it (Cluster.ts): a run read here waits for this runner's turns of
 * it still being written, and a call's outcome written once here is answered from memory after.
 */
import { Deferred, Effect } from "effect"
import * as Journal from "../Journal.js"
import type { ToolResult } from "../ToolResult.js"

/** Of how many runs a runner keeps journaled outcomes in memory (`runnerJournal`): the oldest run's are forgotten past it. */
const outcomeRunsKept = 4096

/**
 * The journal as this runner's tasks use it:
 *
 * - a run read here (a task taken up again) first waits for this runner's turns of that run still
 *   being written. A turn the model answered is journaled even when its loop is stopped meanwhile
 *   (modelTurn.ts), in the background: its shard locks were lost while the database was away, and the
 *   task, taken up again here once it is back, must find the turn rather than ask the model again;
 * - a call's outcome written once here is not written again: a served call's answer is journaled by
 *   the task's owner as it arrives (`ClusterTasks.answer`), before its loop sees it, and the loop then
 *   journals the same outcome as its call's. An outcome in the journal never changes (the first
 *   writer's stays), so the second write would only give back the first: it is answered from memory,
 *   one statement less a call;
 * - the retention sweep's purge of ended tasks prunes the engine's messages and replies of the tasks
 *   purged (`prune`, ClusterDatabase.ts), on the same schedule.
 */
export const runnerJournal = (
  journal: Journal.Journal["Type"],
  prune: (before: number) => Effect.Effect<void> = () => Effect.void
): Journal.Journal["Type"] => {
  const writing = new Map<string, Set<Deferred.Deferred<void>>>()
  // Per run, in the order first written: each call's outcome as the journal holds it.
  const outcomes = new Map<string, Map<string, ToolResult>>()
  const held = (runId: string, toolCallId: string, result: Effect.Effect<ToolResult>) =>
    Effect.suspend(() => {
      const known = outcomes.get(runId)?.get(toolCallId)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.tap(result, (stored) =>
        Effect.sync(() => {
          const calls = outcomes.get(runId) ?? new Map<string, ToolResult>()
          outcomes.set(runId, calls.set(toolCallId, stored))
          if (outcomes.size > outcomeRunsKept) outcomes.delete(outcomes.keys().next().value!)
        }))
    })
  return Journal.Journal.of({
    ...journal,
    turn: (runId, step, turn) =>
      Effect.flatMap(Deferred.make<void>(), (written) => {
        const runs = writing.get(runId) ?? new Set()
        writing.set(runId, runs.add(written))
        return Effect.ensuring(
          journal.turn(runId, step, turn),
          Effect.suspend(() => {
            runs.delete(written)
            if (runs.size === 0 && writing.get(runId) === runs) writing.delete(runId)
            return Deferred.succeed(written, undefined)
          })
        )
      }),
    callEnded: (runId, toolCallId, result) => held(runId, toolCallId, journal.callEnded(runId, toolCallId, result)),
    callAnswered: (runId, call, result) => held(runId, call.toolCallId, journal.callAnswered(runId, call, result)),
    purge: (before, kind) => Effect.zipRight(journal.purge(before, kind), kind === "run" ? Effect.void : prune(before)),
    ended: (runId, end, endedAt) =>
      Effect.zipRight(
        journal.ended(runId, end, endedAt),
        Effect.sync(() => outcomes.delete(runId))
      ),
    run: (runId) =>
      Effect.zipRight(
        Effect.forEach([...(writing.get(runId) ?? [])], Deferred.await, { discard: true }),
        journal.run(runId)
      )
  })
}
