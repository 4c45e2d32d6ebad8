/**
 * What a model's tokens cost: a price table (US dollars per million tokens: input, output, cache read, cache
 * write), shipped for the models this build names and overridable with a Layer, and the cost of a turn's or a
 * run's usage. The agent loop prices every turn (its `TurnCompleted` event, its `chat` span's
 * `agent_tools.usage.cost`), every run (`RunResult.costUsd`) and checks a run's budget before each turn.
 */
import { Context, Layer } from "effect"
import type * as LanguageModel from "./LanguageModel.js"

/** A model's prices, in US dollars per million tokens. */
export interface Price {
  readonly input: number
  readonly output: number
  /** Prompt tokens read from the provider's cache. Default: `input`. */
  readonly cacheRead?: number | undefined
  /** Prompt tokens written to the provider's cache. Default: `input`. */
  readonly cacheWrite?: number | undefined
  /**
   * Whether the provider's input count includes the cached tokens (OpenAI's `prompt_tokens` does; Anthropic's
   * `input_tokens` does not): then they are taken out of it before it is priced. Default false.
   */
  readonly cacheInInput?: boolean | undefined
}

/** A price table: by model string (`anthropic:claude-sonnet-4-5`) or by the model's name alone (`gpt-4.1`). */
export type Prices = Readonly<Record<string, Price>>

const openai = (input: number, output: number, cacheRead: number): Price => ({ input, output, cacheRead, cacheInInput: true })
const anthropic = (input: number, output: number): Price => ({
  input,
  output,
  cacheRead: input / 10,
  cacheWrite: input * 1.25
})

/**
 * The shipped table: the providers' list prices (US dollars per million tokens) for the models the command line
 * and the docs name, and their close relatives. Check them against your provider's bill; override with `layer`.
 */
export const defaults: Prices = {
  "claude-opus-4-1": anthropic(15, 75),
  "claude-opus-4": anthropic(15, 75),
  "claude-sonnet-4-5": anthropic(3, 15),
  "claude-sonnet-4": anthropic(3, 15),
  "claude-haiku-4-5": anthropic(1, 5),
  "claude-3-5-haiku": anthropic(0.8, 4),
  "gpt-5": openai(1.25, 10, 0.125),
  "gpt-5-mini": openai(0.25, 2, 0.025),
  "gpt-5-nano": openai(0.05, 0.4, 0.005),
  "gpt-4.1": openai(2, 8, 0.5),
  "gpt-4.1-mini": openai(0.4, 1.6, 0.1),
  "gpt-4.1-nano": openai(0.1, 0.4, 0.025),
  "gpt-4o": openai(2.5, 10, 1.25),
  "gpt-4o-mini": openai(0.15, 0.6, 0.075)
}

/** The price table in force: a `Context.Reference`, so code that provides nothing gets `defaults`. */
export class PriceTable extends Context.Reference<PriceTable>()("agent-tools/Cost/PriceTable", {
  defaultValue: (): Prices => defaults
}) {}

/** The shipped table with `prices` over it (new models, or your negotiated prices). */
export const layer = (prices: Prices): Layer.Layer<never> => Layer.succeed(PriceTable, { ...defaults, ...prices })

const found = new WeakMap<Prices, Map<string, Price | undefined>>()

/**
 * `model`'s price (`provider:model`, else its name alone, else its name without a date suffix), or undefined.
 * Looked up once per table and model: every turn of a run is priced.
 */
export const priceOf = (prices: Prices, model: string): Price | undefined => {
  let known = found.get(prices)
  if (known === undefined) found.set(prices, known = new Map())
  if (known.has(model)) return known.get(model)
  const name = model.slice(model.indexOf(":") + 1)
  const price = prices[model] ?? prices[name] ?? prices[name.replace(/-\d{8}$|-latest$/, "")]
  known.set(model, price)
  return price
}

/** What `usage` costs at `price`, in US dollars (rounded to a billionth of a dollar: no float dust). */
export const costOf = (price: Price, usage: LanguageModel.Usage): number => {
  const read = usage.cacheReadTokens ?? 0
  const written = usage.cacheWriteTokens ?? 0
  const input = price.cacheInInput === true ? Math.max(0, usage.inputTokens - read - written) : usage.inputTokens
  const micro = input * price.input + usage.outputTokens * price.output + read * (price.cacheRead ?? price.input) +
    written * (price.cacheWrite ?? price.input)
  return Math.round(micro * 1000) / 1e9
}

/** What `usage` of `model` costs in US dollars with `prices`, or undefined for a model the table does not price. */
export const cost = (prices: Prices, model: string, usage: LanguageModel.Usage): number | undefined => {
  const price = priceOf(prices, model)
  return price === undefined ? undefined : costOf(price, usage)
}
