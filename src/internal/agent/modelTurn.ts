/**
 * A run's model turn (design: The loop, Hooks, Durable runs): replayed from the journal when it holds it, else
 * asked: turn hooks around the request, transient failures retried on `modelRetry`, a `chat` span when
 * tracing; a journaled run's turn is journaled before the loop sees it.
 */
import { Duration, Effect } from "effect"
import * as Cost from "../../Cost.js"
import * as LanguageModel from "../../LanguageModel.js"
import { CaptureContent } from "../../Telemetry.js"
import * as Metrics from "../util/metrics.js"
import { retryAfterFailure, Timing } from "../../Timing.js"
import { runTurnHooks } from "../hooks/turn.js"
import { type Run, usageAttributes } from "./run.js"
import { AgentEvent } from "./types.js"
import { formatDuration } from "../util/duration.js"

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
    ? generate(run, step, agent.instructions, toolkit.definitions)
    : runTurnHooks(
      run.turnHooks,
      { step, instructions: agent.instructions, tools: toolkit.definitions },
      (adjusted) => generate(run, step, adjusted.instructions, adjusted.tools)
    )
  const measured = run.exporting ? metered(run, turn) : turn
  if (!run.tracing) return measured
  const { model, provider } = run.model
  return Effect.withSpan(chatAnnotated(run, measured), model === undefined ? "chat" : `chat ${model}`, {
    kind: "client",
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": provider,
      "gen_ai.request.model": model,
      "gen_ai.conversation.id": run.runId,
      "agent_tools.step": step
    },
    captureStackTrace: false
  })
}

/** The request's duration and tokens (`gen_ai.client.operation.duration`, `gen_ai.client.token.usage`). */
const metered = (
  run: Run,
  turn: Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  const { model, provider } = run.model
  return Effect.suspend(() => {
    const started = performance.now()
    return Effect.tap(
    Effect.onExit(turn, () =>
      Effect.sync(() =>
        Metrics.operationDuration.unsafeUpdate((performance.now() - started) / 1000, Metrics.modelLabels(provider, model))
      )),
    (answer) =>
      Effect.sync(() => {
        Metrics.tokenUsage.unsafeUpdate(answer.usage.inputTokens, Metrics.modelLabels(provider, model, "input"))
        Metrics.tokenUsage.unsafeUpdate(answer.usage.outputTokens, Metrics.modelLabels(provider, model, "output"))
      })
    )
  })
}

/**
 * The `chat` span's outcome (OpenTelemetry's GenAI conventions): the tokens, why the model stopped, or
 * the failure's type; the messages in and out only when contents are captured (`Telemetry.CaptureContent`).
 */
const chatAnnotated = (
  run: Run,
  turn: Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> =>
  Effect.flatMap(CaptureContent, (capture) =>
    turn.pipe(
      Effect.tap((answer) =>
        Effect.annotateCurrentSpan({
          ...usageAttributes(answer.usage, Cost.cost(run.prices, answer.model ?? run.modelLabel, answer.usage)),
          ...(answer.model === undefined ? {} : { "gen_ai.response.model": answer.model.slice(answer.model.indexOf(":") + 1) }),
          "gen_ai.response.finish_reasons": [answer.finishReason],
          ...(capture
            ? {
              "gen_ai.system_instructions": run.agent.instructions,
              "gen_ai.input.messages": JSON.stringify(run.messages),
              "gen_ai.output.messages": JSON.stringify([{ text: answer.text, toolCalls: answer.toolCalls }])
            }
            : {})
        })
      ),
      Effect.tapError((error) => Effect.annotateCurrentSpan("error.type", error._tag))
    ))

/**
 * The turn from the run's model, or from a fallback chain's: each model with its own
 * retries, then the next on a failure the chain falls back on, unless the failed stream had given a part (then
 * the failure is the turn's). `ModelFallback` is told; the turn says which model answered (journaled with it).
 */
const generate = (
  run: Run,
  step: number,
  instructions: string | undefined,
  tools: ReadonlyArray<LanguageModel.ToolDefinition>
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  const fallbacks = run.model.fallbacks
  if (fallbacks === undefined) return generateWith(run, run.model, step, instructions, tools, { parts: 0 })
  const { models, on } = fallbacks
  const from = (i: number): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
    const model = models[i]!
    const seen = { parts: 0 }
    return Effect.catchIf(
      Effect.map(generateWith(run, model, step, instructions, tools, seen), (turn) => ({
        ...turn,
        model: turn.model ?? LanguageModel.labelOf(model)
      })),
      (failure) => i + 1 < models.length && seen.parts === 0 && on(failure),
      (failure) =>
        Effect.suspend(() => {
          const next = LanguageModel.labelOf(models[i + 1]!)
          run.emit?.(AgentEvent.ModelFallback({ step, from: LanguageModel.labelOf(model), to: next, reason: failure.message }))
          return Effect.zipRight(
            Effect.logWarning(`model ${LanguageModel.labelOf(model)} failed (${failure.message}); asking ${next}`),
            from(i + 1)
          )
        })
    )
  }
  return from(0)
}

/**
 * One request, retried on `modelRetry` while its failure is transient. Watched (a run with an
 * observer), the turn is streamed and its deltas told as they come; a stream that breaks after its
 * first part fails like one that never started, and what came is discarded: the observer is told
 * `TurnRetried` before the request is made again (design: The model side). Unwatched, `generate`.
 */
const generateWith = (
  run: Run,
  model: LanguageModel.LanguageModel["Type"],
  step: number,
  instructions: string | undefined,
  tools: ReadonlyArray<LanguageModel.ToolDefinition>,
  seen: { parts: number }
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  const request: LanguageModel.ModelRequest = run.output === undefined
    ? { instructions, messages: run.messages, tools }
    : { instructions, messages: run.messages, tools, output: run.output.format }
  const emit = run.emit
  let told = 0
  const tell = (part: LanguageModel.ModelPart): void => {
    seen.parts++
    if (part._tag === "TextDelta") {
      told++
      emit!(AgentEvent.TextDelta({ step, text: part.text }))
    } else if (part._tag === "ReasoningDelta") {
      told++
      emit!(AgentEvent.ReasoningDelta({ step, text: part.text }))
    }
  }
  // A model that answers whole has its deltas only once it has answered: told then, no stream run.
  const generate = emit === undefined
    ? model.generate(request)
    : model.streams !== true
    ? Effect.tap(model.generate(request), (turn) => Effect.sync(() => LanguageModel.partsOf(turn).forEach(tell)))
    : Effect.suspend(() => {
      told = 0
      seen.parts = 0
      return LanguageModel.collect(model.stream(request), tell)
    })
  return Effect.catchIf(
    generate,
    LanguageModel.isTransient,
    (first) =>
      Effect.flatMap(Timing, (timing) => retryAfterFailure(generate, first as LanguageModel.ModelFailure, run.modelRetry, {
        retryable: LanguageModel.isTransient,
        minDelayMillis: (error) => error._tag === "ModelError" ? error.retryAfterMillis : undefined,
        maxDelayMillis: Duration.toMillis(timing.maxRetryAfter),
        tooLong: (error, millis) => waitTooLong(error, millis, timing.maxRetryAfter),
        onRetry: (error, delay) =>
          Effect.suspend(() => {
            if (told > 0) emit?.(AgentEvent.TurnRetried({ step, reason: error.message }))
            return Effect.logWarning(`model request failed (${error.message}); retrying in ${formatDuration(delay)}`)
          })
      }))
  )
}

/** A provider asked for a wait past `maxRetryAfter`: the turn fails at once, saying its status and the wait. */
const waitTooLong = (error: LanguageModel.ModelFailure, millis: number, max: Duration.Duration): LanguageModel.ModelFailure =>
  new LanguageModel.ModelError({
    message: `${error.message} (retry-after asked for ${formatDuration(millis)}, over maxRetryAfter's ` +
      `${formatDuration(max)}: not retried)`,
    transient: false,
    ...(error._tag === "ModelError" && error.status !== undefined ? { status: error.status } : {})
  })
