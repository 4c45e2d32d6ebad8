/**
 * Provider rate limits, shared by every run of a process: per model (`provider:model`) or
 * per provider, requests a minute, input and output tokens a minute and requests in flight. A request waits for
 * capacity, at most `maxWait`, or fails at once with a `ModelError` (status 429, not retried; a fallback chain
 * moves on) naming the limit. The provider's own rate-limit headers (`retry-after`, `x-ratelimit-*`,
 * `anthropic-ratelimit-*`) lower the budget until they reset: a `retry-after` pauses every request of the model.
 *
 * The HTTP providers (`Anthropic`, `OpenAi`, `OpenAiResponses`) use the `RateLimits` in the context of each
 * request; `limited` puts any other `LanguageModel` under them.
 */
import { Clock, Context, Duration, Effect, Layer, Option, type Scope, Stream } from "effect"
import { formatDuration } from "./internal/util/duration.js"
import * as LanguageModel from "./LanguageModel.js"

/** The limits of one model or provider. Each left out is not limited (a provider's headers may still pause it). */
export interface Limit {
  readonly requestsPerMinute?: number | undefined
  /** Prompt tokens a minute (a request is counted at its estimate, 4 characters a token, then at its usage). */
  readonly inputTokensPerMinute?: number | undefined
  /** Completion tokens a minute: counted when a turn reports them; a request waits while the minute's are spent. */
  readonly outputTokensPerMinute?: number | undefined
  /** Requests waiting for their answer at once. */
  readonly inFlight?: number | undefined
}

/** Options of `layer`. */
export interface Options {
  /** By model string (`anthropic:claude-sonnet-4-5`) or provider (`anthropic`): the model's own wins. */
  readonly limits?: Readonly<Record<string, Limit>> | undefined
  /** How long a request waits for capacity at most, within its turn. Default 1 minute. */
  readonly maxWait?: Duration.DurationInput | undefined
}

/** A request's hold on a model's capacity: it tells the turn's usage, and its scope's end frees its place in flight. */
export interface Permit {
  readonly used: (usage: LanguageModel.Usage) => void
}

/** The process's rate limits. */
export class RateLimits extends Context.Tag("agent-tools/RateLimits")<RateLimits, {
  /** Waits for capacity for a request to `model` of about `inputTokens` tokens; its place in flight is the scope's. */
  readonly acquire: (model: string, inputTokens: number) => Effect.Effect<Permit, LanguageModel.ModelError, Scope.Scope>
  /** Reads a response's rate-limit headers. */
  readonly observe: (model: string, headers: Readonly<Record<string, string | undefined>>) => Effect.Effect<void>
}>() {}

/** A tokens- or requests-a-minute budget, refilled continuously; taken ahead (in debt) by a request that waits. */
class Bucket {
  constructor(readonly name: string, readonly perMinute: number, public available: number, public at: number) {}
  refill(now: number): void {
    this.available = Math.min(this.perMinute, this.available + ((now - this.at) * this.perMinute) / 60_000)
    this.at = now
  }
  /** Milliseconds until `amount` more than what is taken could be had (0: at once). */
  waitFor(amount: number): number {
    const short = Math.min(amount, this.perMinute) - this.available
    return short <= 0 ? 0 : Math.ceil((short * 60_000) / this.perMinute)
  }
}

interface State {
  readonly requests: Bucket | undefined
  readonly input: Bucket | undefined
  readonly output: Bucket | undefined
  readonly inFlight: { readonly limit: number; readonly semaphore: Effect.Semaphore } | undefined
  pausedUntil: number
  pausedBy: string
}

const refused = (model: string, what: string, waitMillis: number, maxWait: number) =>
  new LanguageModel.ModelError({
    message: `rate limit of ${model}: ${what} has no capacity within maxWait (${formatDuration(maxWait)}; ` +
      `the next is in ${formatDuration(waitMillis)}): raise the limit (RateLimit.layer) or maxWait`,
    transient: false,
    status: 429
  })

/** The rate limits of a process: provide it once, and every run in its context shares them. */
export const layer = (options?: Options): Layer.Layer<RateLimits> =>
  Layer.sync(RateLimits, () => {
    const maxWait = Duration.toMillis(Duration.decode(options?.maxWait ?? Duration.minutes(1)))
    const states = new Map<string, State>()
    const stateOf = (model: string, now: number): State => {
      let state = states.get(model)
      if (state !== undefined) return state
      const limit = options?.limits?.[model] ?? options?.limits?.[model.slice(0, Math.max(0, model.indexOf(":")))] ?? {}
      const bucket = (name: keyof Limit, perMinute: number | undefined) =>
        perMinute === undefined ? undefined : new Bucket(`${name} (${perMinute})`, perMinute, perMinute, now)
      state = {
        requests: bucket("requestsPerMinute", limit.requestsPerMinute),
        input: bucket("inputTokensPerMinute", limit.inputTokensPerMinute),
        output: bucket("outputTokensPerMinute", limit.outputTokensPerMinute),
        inFlight: limit.inFlight === undefined
          ? undefined
          : { limit: limit.inFlight, semaphore: Effect.unsafeMakeSemaphore(limit.inFlight) },
        pausedUntil: 0,
        pausedBy: ""
      }
      states.set(model, state)
      return state
    }
    // Takes the request's share of every minute's budget (in debt, when it must wait), or refuses it: how long to wait.
    const reserve = (model: string, inputTokens: number, now: number, waited: number): number | LanguageModel.ModelError => {
      const state = stateOf(model, now)
      const waits: Array<readonly [string, number]> = [[state.pausedBy, state.pausedUntil - now]]
      for (const [bucket, amount] of [[state.requests, 1], [state.input, inputTokens], [state.output, 1]] as const) {
        if (bucket === undefined) continue
        bucket.refill(now)
        waits.push([bucket.name, bucket.waitFor(amount)])
      }
      const [what, wait] = waits.reduce((a, b) => (b[1] > a[1] ? b : a))
      if (wait > 0 && waited + wait > maxWait) return refused(model, what, wait, maxWait)
      if (state.requests !== undefined) state.requests.available -= 1
      if (state.input !== undefined) state.input.available -= Math.min(inputTokens, state.input.perMinute)
      return Math.max(0, wait)
    }
    const acquire = (model: string, inputTokens: number) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        const wait = reserve(model, inputTokens, started, 0)
        if (typeof wait !== "number") return yield* wait
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        // A provider's pause told while this request waited.
        const state = stateOf(model, started)
        let now = yield* Clock.currentTimeMillis
        while (state.pausedUntil > now) {
          if (state.pausedUntil - started > maxWait) return yield* refused(model, state.pausedBy, state.pausedUntil - now, maxWait)
          yield* Effect.sleep(Duration.millis(state.pausedUntil - now))
          now = yield* Clock.currentTimeMillis
        }
        const inFlight = state.inFlight
        if (inFlight !== undefined) {
          const left = Math.max(0, maxWait - (now - started))
          yield* Effect.acquireRelease(
            Effect.timeoutFail(inFlight.semaphore.take(1), {
              duration: Duration.millis(left),
              onTimeout: () => refused(model, `inFlight (${inFlight.limit})`, left, maxWait)
            }),
            () => inFlight.semaphore.release(1)
          )
        }
        // What the request is counted at so far: its estimate, then each usage it tells (a stream may tell several).
        let input = Math.min(inputTokens, state.input?.perMinute ?? inputTokens)
        let output = 0
        return {
          used: (usage: LanguageModel.Usage) => {
            const prompt = usage.inputTokens + (usage.cacheWriteTokens ?? 0)
            if (state.input !== undefined) state.input.available += input - prompt
            if (state.output !== undefined) state.output.available -= usage.outputTokens - output
            input = prompt
            output = usage.outputTokens
          }
        } satisfies Permit
      })
    const observe = (model: string, headers: Readonly<Record<string, string | undefined>>) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const state = stateOf(model, now)
        const pause = (until: number, by: string) => {
          if (until > state.pausedUntil) {
            state.pausedUntil = until
            state.pausedBy = by
          }
        }
        const after = retryAfterMillis(headers)
        if (after !== undefined) pause(now + after, `the provider's retry-after (${formatDuration(after)})`)
        for (const [bucket, remainingName, resetName] of headerNames(state)) {
          const remaining = Number(headers[remainingName])
          if (headers[remainingName] === undefined || !Number.isFinite(remaining)) continue
          const reset = resetAt(headers[resetName], now)
          if (remaining <= 0 && reset !== undefined) pause(reset, `the provider's ${remainingName}: 0`)
          else if (bucket !== undefined) {
            bucket.refill(now)
            bucket.available = Math.min(bucket.available, remaining)
          }
        }
      })
    return { acquire, observe }
  })

/** Each header pair a provider tells its remaining budget with, and the bucket it lowers. */
const headerNames = (state: State): ReadonlyArray<readonly [Bucket | undefined, string, string]> => [
  [state.requests, "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"],
  [state.input, "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"],
  [state.requests, "anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"],
  [state.input, "anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"],
  [state.output, "anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"],
  [state.input, "anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"]
]

/** `retry-after-ms`, or `retry-after` in seconds. */
const retryAfterMillis = (headers: Readonly<Record<string, string | undefined>>): number | undefined => {
  const millis = Number(headers["retry-after-ms"])
  if (headers["retry-after-ms"] !== undefined && Number.isFinite(millis) && millis >= 0) return millis
  const seconds = Number(headers["retry-after"])
  return headers["retry-after"] !== undefined && Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : undefined
}

/** A reset as OpenAI says it (`1s`, `6m0s`, `120ms`: from now) or Anthropic (an RFC 3339 time). */
const resetAt = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const parts = [...value.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)]
  if (parts.length > 0 && parts.map((p) => p[0]).join("") === value.trim()) {
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const
    return now + parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2] as keyof typeof unit], 0)
  }
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : date
}

/** A request's prompt tokens, estimated before it is sent: 4 characters a token. */
export const estimateTokens = (request: LanguageModel.ModelRequest): number =>
  Math.ceil(JSON.stringify(request).length / 4)

/**
 * `model` under the `RateLimits` in the context of each request (none: as it is): each `generate` and `stream`
 * waits for capacity first and tells its usage after. `name` is the model's (default `provider:model`).
 */
export const limited = (model: LanguageModel.Service, name = LanguageModel.labelOf(model)): LanguageModel.Service => {
  const generate = (request: LanguageModel.ModelRequest) =>
    Effect.flatMap(Effect.serviceOption(RateLimits), (limits) =>
      Option.isNone(limits) ? model.generate(request) : Effect.scoped(
        Effect.flatMap(limits.value.acquire(name, estimateTokens(request)), (permit) =>
          Effect.tap(model.generate(request), (turn) => Effect.sync(() => permit.used(turn.usage))))
      ))
  const stream = (request: LanguageModel.ModelRequest) =>
    Stream.unwrapScoped(Effect.flatMap(Effect.serviceOption(RateLimits), (limits) =>
      Option.isNone(limits) ? Effect.succeed(model.stream(request)) : Effect.map(
        limits.value.acquire(name, estimateTokens(request)),
        (permit) =>
          Stream.tap(model.stream(request), (part) => part._tag === "Usage" ? Effect.sync(() => permit.used(part.usage)) : Effect.void)
      )))
  return { ...model, generate, stream }
}

/** Tells the `RateLimits` in context (if any) of a response's headers for `model`. */
export const observe = (model: string, headers: Readonly<Record<string, string | undefined>>): Effect.Effect<void> =>
  Effect.flatMap(Effect.serviceOption(RateLimits), (limits) => Option.isNone(limits) ? Effect.void : limits.value.observe(model, headers))
