/**
 * A run's model turn (design: The loop, Hooks, Durable runs): replayed from the journal when it holds it, else
 * asked: turn hooks around the request, transient failures retried on `modelRetry`, a `chat` span when
 * tracing; a journaled run's turn is journaled before the loop sees it.
 */
import { Duration, Effect } from "effect"
import * as LanguageModel from "../../LanguageModel.js"
import { retryAfterFailure } from "../../Timing.js"
import { runTurnHooks } from "../hooks/turn.js"
import type { Run } from "./run.js"
import { AgentEvent } from "./types.js"

/** One model turn: replayed from the journal when it holds it, else asked (and journaled before the loop sees it). */
export const ask = (run: Run, step: number): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  const journaled = run.journaled
  if (journaled === undefined) return askModel(run, step)
  const replayed = journaled.turns[step - 1]
  if (replayed !== undefined) {
    run.emit?.(AgentEvent.Replayed({ step, id: undefined }))
    return Effect.succeed(replayed)
  }
  // The journal's turn is the run's: the first writer's, should another process have asked too. A turn
  // asked is journaled even if the loop is interrupted meanwhile (its shard moved while the database was
  // away): in the background, so the loop still stops at once, and the next owner does not ask again.
  return Effect.flatMap(
    askModel(run, step),
    (turn) => Effect.disconnect(Effect.uninterruptible(journaled.journal.turn(run.runId, step, turn)))
  )
}

/** Asks the model: turn hooks around it (design: Hooks), transient failures retried on `modelRetry`, a span when tracing. */
const askModel = (run: Run, step: number): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  const { agent, toolkit } = run
  const turn = run.turnHooks.length === 0
    ? generate(run, agent.instructions, toolkit.definitions)
    : runTurnHooks(
      run.turnHooks,
      { step, instructions: agent.instructions, tools: toolkit.definitions },
      (adjusted) => generate(run, adjusted.instructions, adjusted.tools)
    )
  if (!run.tracing) return turn
  return Effect.withSpan(turn, "chat", {
    kind: "client",
    attributes: { "gen_ai.operation.name": "chat", "agent_tools.step": step },
    captureStackTrace: false
  })
}

const generate = (
  run: Run,
  instructions: string | undefined,
  tools: ReadonlyArray<LanguageModel.ToolDefinition>
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  const generate = run.model.generate({ instructions, messages: run.messages, tools })
  return Effect.catchIf(
    generate,
    LanguageModel.isTransient,
    (first) =>
      retryAfterFailure(generate, first as LanguageModel.ModelFailure, run.modelRetry, {
        retryable: LanguageModel.isTransient,
        minDelayMillis: (error) => error._tag === "ModelError" ? error.retryAfterMillis : undefined,
        onRetry: (error, delay) =>
          Effect.logWarning(`model request failed (${error.message}); retrying in ${Duration.format(delay)}`)
      })
  )
}
