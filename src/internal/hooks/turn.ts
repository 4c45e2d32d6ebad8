/**
 * Turn hooks, beside the agent loop that runs them (design: Hooks): what wraps each model turn, to
 * change the instructions or the tools offered.
 */
import { Context, type Effect } from "effect"
import type * as LanguageModel from "../../LanguageModel.js"

/** A model turn as a turn hook sees it; a hook may pass on other instructions or fewer tools. */
export interface Turn {
  readonly step: number
  readonly instructions: string | undefined
  readonly tools: ReadonlyArray<LanguageModel.ToolDefinition>
}

/**
 * Wraps a model turn: `proceed(turn)` asks the model with `turn`'s instructions and tools. `R`: the
 * services the hook's effect needs (`Hooks.layer` gives them from where it is built); none by default.
 */
export type TurnHook<R = never> = (
  turn: Turn,
  proceed: (turn: Turn) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>
) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure, R>

/** The turn hooks in force, the first outermost: none by default. Each needs nothing (`Hooks.layer` gave it its services). */
export class TurnHooks extends Context.Reference<TurnHooks>()("agent-tools/TurnHooks", {
  defaultValue: (): ReadonlyArray<TurnHook> => []
}) {}

/** Runs a model turn through `hooks`. */
export const runTurnHooks = (
  hooks: ReadonlyArray<TurnHook>,
  turn: Turn,
  ask: (turn: Turn) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  let wrapped = ask
  for (let i = hooks.length - 1; i >= 0; i--) {
    const hook = hooks[i]!
    const next = wrapped
    wrapped = (t) => hook(t, next)
  }
  return wrapped(turn)
}
