/**
 * A run's cost and budget: each turn priced by the price table as it completes (its
 * `TurnCompleted` event), and before each turn the check that it would not pass the run's budget: the next turn is
 * estimated at the last turn's tokens and cost, at least the request's size (4 characters a token), so the run
 * stops before the turn that would pass it, never during a model call.
 */
import * as Cost from "../../Cost.js"
import type * as LanguageModel from "../../LanguageModel.js"
import type { Run } from "./run.js"
import { AgentEvent, type Budget, BudgetExceeded } from "./types.js"

/** The tokens a usage counts against a budget: input, output and the cache's. */
const tokensOf = (usage: LanguageModel.Usage): number =>
  usage.inputTokens + usage.outputTokens + (usage.cacheReadTokens ?? 0) + (usage.cacheWriteTokens ?? 0)

/** Gives the run its budget (the run's, else its agent's) and the price table in force. */
export const budgeted = (run: Run, budget: Budget | undefined, prices: Cost.Prices): void => {
  run.budget = budget
  run.prices = prices
}

/**
 * Counts turn `step` (asked or replayed): its tokens, and its cost by the model that answered (else the run's) added
 * to the run's; then tells `TurnCompleted`. A turn that would pass the budget is never asked (`overBudget`).
 */
export const completed = (run: Run, step: number, turn: LanguageModel.ModelTurn): void => {
  run.count(turn.usage)
  const model = turn.model ?? run.modelLabel
  const costUsd = Cost.cost(run.prices, model, turn.usage)
  if (costUsd !== undefined) run.costUsd = Math.round(((run.costUsd ?? 0) + costUsd) * 1e9) / 1e9
  run.last = { tokens: tokensOf(turn.usage), costUsd: costUsd ?? 0 }
  run.emit?.(AgentEvent.TurnCompleted({ step, model, usage: turn.usage, costUsd }))
}

/** `BudgetExceeded` when turn `step`, as estimated, would pass the run's budget; undefined when it may be asked. */
export const overBudget = (run: Run, step: number): BudgetExceeded | undefined => {
  const budget = run.budget
  if (budget === undefined || (budget.tokens === undefined && budget.costUsd === undefined)) return undefined
  const requestTokens = Math.ceil(
    ((run.agent.instructions?.length ?? 0) + JSON.stringify(run.messages).length) / 4
  )
  const exceeded = (limit: "tokens" | "costUsd", max: number, spent: number, next: number) =>
    new BudgetExceeded({ limit, budget: max, spent, next, step, partial: run.result("", step - 1) })
  if (budget.tokens !== undefined) {
    const spent = tokensOf(run.usage)
    const next = Math.max(run.last.tokens, requestTokens)
    if (spent + next > budget.tokens) return exceeded("tokens", budget.tokens, spent, next)
  }
  if (budget.costUsd !== undefined) {
    const price = Cost.priceOf(run.prices, run.modelLabel)
    const spent = run.costUsd ?? 0
    const next = Math.max(run.last.costUsd, price === undefined ? 0 : (requestTokens * price.input) / 1e6)
    if (spent + next > budget.costUsd) return exceeded("costUsd", budget.costUsd, spent, next)
  }
  return undefined
}
