/**
 * Provider rate limits (`RateLimit`): requests in flight against a fake OpenAI server on 127.0.0.1 that answers 429
 * above 5 at once; tokens a minute spread over the minute (TestClock); a provider's `retry-after` and
 * `anthropic-ratelimit-*` headers pause every run of the model; a wait past `maxWait` fails naming the limit.
 */
import { assert, describe, it } from "@effect/vitest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Clock, Effect, Fiber, Layer, Redacted, Schedule, TestClock } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent, LanguageModel, RateLimit, Timing } from "../src/index.js"
import { OpenAi } from "../src/exports/providers.js"
import { fixture } from "./support/fixtureServer.js"

/** An OpenAI server that answers 429 to a request beyond `max` in flight; each answer takes `millis`. */
const busyServer = (max: number, millis: number) =>
  Effect.acquireRelease(
    Effect.async<{ url: string; stats: { inFlight: number; most: number; refused: number; answered: number; at: Array<number> }; close: () => void }>(
      (resume) => {
        const stats = { inFlight: 0, most: 0, refused: 0, answered: 0, at: [] as Array<number> }
        const server = createServer((req, res) => {
          req.resume()
          req.on("end", () => {
            stats.at.push(performance.now())
            if (stats.inFlight >= max) {
              stats.refused++
              res.writeHead(429, { "content-type": "application/json", "retry-after-ms": "0" })
              return res.end(JSON.stringify({ error: { message: "too many requests in flight" } }))
            }
            stats.inFlight++
            stats.most = Math.max(stats.most, stats.inFlight)
            setTimeout(() => {
              stats.inFlight--
              stats.answered++
              res.writeHead(200, { "content-type": "application/json" })
              res.end(JSON.stringify(fixture("openai/response_text.json")))
            }, millis)
          })
        })
        server.listen(0, "127.0.0.1", () =>
          resume(Effect.succeed({
            url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
            stats,
            close: () => {
              server.closeAllConnections()
              server.close()
            }
          })))
      }
    ),
    (s) => Effect.sync(() => s.close())
  )

const openaiAt = (url: string) =>
  OpenAi.layer({ model: "gpt-4.1", baseUrl: `${url}/v1`, apiKey: Redacted.make("sk-test") }).pipe(Layer.provide(NodeHttpClient.layer))

const agent = Agent.make({ name: "limited" })
/** No retries of the model's own: a 429 is the run's failure, so none can hide. */
const noRetry = Timing.layer({ modelRetry: Schedule.stop })
const twenty = (run: Effect.Effect<unknown, unknown, LanguageModel.LanguageModel>) =>
  Effect.all(Array.from({ length: 20 }, () => Effect.either(run)), { concurrency: "unbounded" })

describe("RateLimit: requests in flight", () => {
  it.scopedLive("20 concurrent runs with a limit of 5 in flight never see the server's 429", () =>
    Effect.gen(function*() {
      const server = yield* busyServer(5, 100)
      const outcomes = yield* twenty(Agent.run(agent, "hi")).pipe(
        Effect.provide(Layer.mergeAll(openaiAt(server.url), noRetry, RateLimit.layer({ limits: { "openai:gpt-4.1": { inFlight: 5 } } })))
      )
      assert.strictEqual(outcomes.filter((o) => o._tag === "Right").length, 20)
      assert.strictEqual(server.stats.refused, 0)
      assert.isAtMost(server.stats.most, 5)
      assert.strictEqual(server.stats.answered, 20)
    }))

  it.scopedLive("without the limit the same runs are refused (the server is strict)", () =>
    Effect.gen(function*() {
      const server = yield* busyServer(5, 500)
      const outcomes = yield* twenty(Agent.run(agent, "hi")).pipe(Effect.provide(Layer.merge(openaiAt(server.url), noRetry)))
      assert.isAbove(server.stats.refused, 0)
      assert.isAbove(outcomes.filter((o) => o._tag === "Left").length, 0)
    }))

  it.scopedLive("a retry-after from the server pauses every run of that model until it passes", () =>
    Effect.gen(function*() {
      let first = true
      const server = yield* Effect.acquireRelease(
        Effect.async<{ url: string; at: Array<number>; close: () => void }>((resume) => {
          const at: Array<number> = []
          const s = createServer((req, res) => {
            req.resume()
            req.on("end", () => {
              at.push(performance.now())
              if (first) {
                first = false
                res.writeHead(429, { "content-type": "application/json", "retry-after-ms": "400" })
                return res.end(JSON.stringify({ error: { message: "slow down" } }))
              }
              res.writeHead(200, { "content-type": "application/json" })
              res.end(JSON.stringify(fixture("openai/response_text.json")))
            })
          })
          s.listen(0, "127.0.0.1", () =>
            resume(Effect.succeed({
              url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
              at,
              close: () => (s.closeAllConnections(), s.close())
            })))
        }),
        (s) => Effect.sync(() => s.close())
      )
      const models = Layer.mergeAll(openaiAt(server.url), noRetry, RateLimit.layer())
      const [refused, later] = yield* Effect.all([Effect.either(Agent.run(agent, "one")), Agent.run(agent, "two")]).pipe(
        Effect.provide(models)
      )
      assert.strictEqual(refused._tag, "Left")
      assert.strictEqual(later.output, "Order ord-4821 has shipped; there is no order ord-0000.")
      // The second run's request came only once the first's retry-after had passed (a lower bound: never flaky).
      assert.isAtLeast(server.at[1]! - server.at[0]!, 390)
    }))
})

/** A scripted model under the rate limits, each turn's time kept; its prompt tokens as many as estimated. */
const timed = (usage: LanguageModel.Usage, times: Array<number>) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.map(LanguageModel.LanguageModel, (model) => RateLimit.limited(model, "scripted:model"))
  ).pipe(Layer.provide(LanguageModel.layerScripted([(request) =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      times.push(now)
      return { text: "ok", usage: { ...usage, inputTokens: RateLimit.estimateTokens(request) } }
    })], { repeat: true })))

describe("RateLimit: tokens a minute (TestClock)", () => {
  it.effect("6 turns of about 400 prompt tokens under 1000 a minute are spread over the minutes they need", () =>
    Effect.gen(function*() {
      const times: Array<number> = []
      const prompt = "x".repeat(1550)
      const runs = yield* Effect.fork(Effect.all(Array.from({ length: 6 }, () => Agent.run(agent, prompt)), { concurrency: "unbounded" }).pipe(
        Effect.provide(Layer.merge(timed({ inputTokens: 400, outputTokens: 1 }, times), RateLimit.layer({ limits: { scripted: { inputTokensPerMinute: 1000 } }, maxWait: "5 minutes" })))
      ))
      for (let i = 0; i < 30; i++) yield* TestClock.adjust("5 seconds")
      yield* Fiber.join(runs)
      assert.strictEqual(times.length, 6)
      // About 2400 tokens at 1000 a minute, the first 1000 at once: two turns at once, the last about 84 s in, and
      // by any time no more than the minute's budget and what has refilled since.
      const tokens = RateLimit.estimateTokens({ messages: [{ _tag: "UserMessage", text: prompt }], tools: [] })
      assert.isAtLeast(tokens, 390)
      const tokensBy = (t: number) => times.filter((at) => at <= t).length * tokens
      for (const at of times) assert.isAtMost(tokensBy(at), 1000 + (at * 1000) / 60_000, `at ${at} ms`)
      assert.strictEqual(times.filter((at) => at === 0).length, 2)
      assert.isAtLeast(Math.max(...times), 80_000)
      assert.isAtMost(Math.max(...times), 100_000)
    }))

  it.effect("a turn that cannot have capacity within maxWait fails at once, naming the limit", () =>
    Effect.gen(function*() {
      const times: Array<number> = []
      const failure = yield* Effect.flip(Effect.all([Agent.run(agent, "hi"), Agent.run(agent, "hi")])).pipe(
        Effect.provide(Layer.merge(timed({ inputTokens: 1, outputTokens: 1 }, times), RateLimit.layer({ limits: { "scripted:model": { requestsPerMinute: 1 } }, maxWait: "10 seconds" })))
      )
      assert.strictEqual(failure._tag, "ModelError")
      assert.include(failure.message, "rate limit of scripted:model: requestsPerMinute (1) has no capacity within maxWait (10 s")
      assert.strictEqual(times.length, 1)
    }))

  it.effect("Anthropic's remaining 0 pauses the model until its reset; a retry-after pauses it too", () =>
    Effect.gen(function*() {
      const times: Array<number> = []
      const layers = Layer.merge(timed({ inputTokens: 1, outputTokens: 1 }, times), RateLimit.layer())
      yield* Effect.gen(function*() {
        const limits = yield* RateLimit.RateLimits
        yield* limits.observe("scripted:model", {
          "anthropic-ratelimit-requests-remaining": "0",
          "anthropic-ratelimit-requests-reset": new Date(30_000).toISOString()
        })
        const run = yield* Effect.fork(Agent.run(agent, "hi"))
        yield* TestClock.adjust("29 seconds")
        assert.strictEqual(times.length, 0)
        yield* TestClock.adjust("2 seconds")
        yield* Fiber.join(run)
        assert.deepStrictEqual(times, [30_000])
        yield* limits.observe("scripted:model", { "retry-after": "20" })
        const again = yield* Effect.fork(Agent.run(agent, "hi"))
        yield* TestClock.adjust("19 seconds")
        assert.strictEqual(times.length, 1)
        yield* TestClock.adjust("2 seconds")
        yield* Fiber.join(again)
        assert.strictEqual(times.length, 2)
      }).pipe(Effect.provide(layers))
    }))
})
