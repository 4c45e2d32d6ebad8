/** Models in production: a fallback chain, the process's rate limits, the price table and a run's budget. */
import { Effect, Layer } from "effect"
import { Agent, Cost, LanguageModel, RateLimit } from "../src/index.js"
import { Model } from "../src/exports/providers.js"
import { lookupOrder } from "./tools.js"

// #region fallback
// Anthropic first; OpenAI when Anthropic still fails after its own retries (429, 5xx, overloaded, no answer
// in time) or the conversation is past its context window. A rejected tool schema is never retried elsewhere.
export const models = Model.fallback(["anthropic:claude-sonnet-4-5", "openai:gpt-4.1"], {
  on: LanguageModel.fallsBack // the default; any (failure) => boolean
})
// #endregion

// #region limits
// One set of limits for every run of this process: provide the layer once, with the model.
export const limits = RateLimit.layer({
  limits: {
    "anthropic:claude-sonnet-4-5": { requestsPerMinute: 50, inputTokensPerMinute: 30_000, outputTokensPerMinute: 8_000 },
    openai: { inFlight: 10 }             // every OpenAI model, unless it has limits of its own
  },
  maxWait: "30 seconds"                  // longer than this for capacity: the turn fails, naming the limit
})
// #endregion

// #region budget
export const agent = Agent.make({
  name: "support",
  tools: [lookupOrder],
  budget: { costUsd: 0.5 }               // each run: at most 50 cents, stopped before the turn that would pass it
})

// Prices in US dollars per million tokens, over the shipped table (Cost.defaults).
export const prices = Cost.layer({ "my-finetune": { input: 4, output: 16, cacheRead: 0.4 } })

export const program = Effect.gen(function*() {
  const result = yield* Agent.run(agent, "Where is order ord-4821?", { budget: { tokens: 20_000 } })
  yield* Effect.log(`answered for $${result.costUsd ?? 0} (${result.usage.inputTokens} tokens in)`)
}).pipe(
  Effect.catchTag("BudgetExceeded", (over) => Effect.log(over.message)),
  Effect.provide(Layer.mergeAll(models, limits, prices))
)
// #endregion
