/**
 * Cost and budgets: the price table applied to a fake Anthropic server's usage, to the cent, in the run's result,
 * its events and its spans; a per-run budget (tokens or dollars) stops the run before the turn that would pass it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Chunk, Effect, Layer, Redacted, Schema, Stream } from "effect"
import { Agent, Cost, LanguageModel, Tool } from "../src/index.js"
import { Anthropic } from "../src/exports/providers.js"
import { fixture, fixtureServer, type Reply } from "./support/fixtureServer.js"
import { recordingTracer } from "./support/recordingTracer.js"

const lookup = Tool.make("lookup", { description: "looks up", input: { n: Schema.Number }, output: Schema.String, timeout: "5 seconds" }, ({ n }) =>
  Effect.succeed(`found ${n}`))
const agent = Agent.make({ name: "priced", tools: [lookup] })

const anthropicReply = (content: ReadonlyArray<unknown>, usage: Record<string, number>): Reply => ({
  status: 200,
  body: { ...fixture("anthropic/response_text.json"), content, stop_reason: "end_turn", usage }
})

describe("Cost", () => {
  it.scopedLive("a run's cost is the price table applied to the server's usage: in the result, the events and the spans", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([
        anthropicReply([{ type: "tool_use", id: "toolu_1", name: "lookup", input: { n: 1 } }], {
          input_tokens: 1000,
          output_tokens: 200,
          cache_read_input_tokens: 5000,
          cache_creation_input_tokens: 300
        }),
        anthropicReply([{ type: "text", text: "found it" }], { input_tokens: 2000, output_tokens: 100 })
      ])
      const model = Anthropic.layer({ model: "claude-sonnet-4-5", baseUrl: server.url, apiKey: Redacted.make("sk-ant-test") }).pipe(
        Layer.provide(NodeHttpClient.layer)
      )
      const { spans, tracer } = recordingTracer()
      const events = yield* Stream.runCollect(Agent.stream(agent, "find 1")).pipe(
        Effect.map(Chunk.toArray),
        Effect.provide(model),
        Effect.withTracer(tracer)
      )
      // claude-sonnet-4-5: $3 in, $15 out, $0.30 cache read, $3.75 cache write, per million tokens.
      const turn1 = (1000 * 3 + 200 * 15 + 5000 * 0.3 + 300 * 3.75) / 1e6
      const turn2 = (2000 * 3 + 100 * 15) / 1e6
      const costs = events.flatMap((e) => e._tag === "TurnCompleted" ? [e.costUsd] : [])
      assert.deepStrictEqual(costs, [turn1, turn2])
      const done = events.at(-1)
      const result = done?._tag === "Done" ? done.result : undefined
      assert.strictEqual(result?.costUsd, 0.016125)
      assert.strictEqual(Math.round((result?.costUsd ?? 0) * 100), 2, "to the cent")
      const chats = spans.filter((s) => s.name === "chat claude-sonnet-4-5")
      assert.deepStrictEqual(chats.map((s) => s.attributes.get("agent_tools.usage.cost")), [turn1, turn2])
      assert.strictEqual(chats[0]?.attributes.get("gen_ai.usage.cache_read.input_tokens"), 5000)
      const run = spans.find((s) => s.name === "invoke_agent priced")
      assert.strictEqual(run?.attributes.get("agent_tools.usage.cost"), 0.016125)
      assert.strictEqual(run?.attributes.get("gen_ai.usage.input_tokens"), 3000)
    }))

  it("OpenAI's input count holds its cached tokens: they are priced once, at the cache's price", () => {
    const price = Cost.priceOf(Cost.defaults, "openai:gpt-4.1")!
    // gpt-4.1: $2 in, $8 out, $0.50 cached, per million; 1000 prompt tokens of which 400 cached.
    assert.strictEqual(Cost.costOf(price, { inputTokens: 1000, outputTokens: 100, cacheReadTokens: 400 }), (600 * 2 + 100 * 8 + 400 * 0.5) / 1e6)
    assert.isDefined(Cost.priceOf(Cost.defaults, "anthropic:claude-sonnet-4-5-20250929"), "a dated name finds its model")
    assert.isUndefined(Cost.cost(Cost.defaults, "scripted:scripted", { inputTokens: 1, outputTokens: 1 }))
  })
})

const call = (id: string): LanguageModel.ToolCall => ({ id, name: "lookup", arguments: "{\"n\":1}" })
const usage = { inputTokens: 100, outputTokens: 10 }
/** A model that calls a tool every turn, each turn 110 tokens. */
const busy = LanguageModel.layerScripted([1, 2, 3, 4, 5].map((i) => ({ toolCalls: [call(`c${i}`)], usage })))
const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)

describe("Budgets", () => {
  it.effect("a token budget stops the run before the turn that would pass it", () =>
    Effect.gen(function*() {
      const failure = yield* Effect.flip(Agent.run(agent, "go", { budget: { tokens: 250 } }))
      assert.strictEqual(failure._tag, "BudgetExceeded")
      if (failure._tag !== "BudgetExceeded") return
      assert.deepInclude(failure, { limit: "tokens", budget: 250, spent: 220, next: 110, step: 3 })
      assert.include(failure.message, "budget.tokens")
      assert.strictEqual(failure.partial.toolCalls.length, 2)
      assert.strictEqual((yield* requests).length, 2, "the third turn is never asked")
    }).pipe(Effect.provide(busy)))

  it.effect("an agent's cost budget, with a price table of its own, stops each run the same way", () =>
    Effect.gen(function*() {
      const capped = Agent.make({ name: "capped", tools: [lookup], budget: { costUsd: 0.3 } })
      const failure = yield* Effect.flip(Agent.run(capped, "go"))
      assert.strictEqual(failure._tag, "BudgetExceeded")
      if (failure._tag !== "BudgetExceeded") return
      // $1000 a million tokens: 110 tokens a turn cost $0.11.
      assert.deepInclude(failure, { limit: "costUsd", spent: 0.22, step: 3 })
      assert.strictEqual(failure.partial.costUsd, 0.22)
      assert.strictEqual((yield* requests).length, 2)
    }).pipe(Effect.provide(Layer.merge(busy, Cost.layer({ scripted: { input: 1000, output: 1000 } })))))

  it.effect("a run within its budget ends as any other, its cost in its result", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent, "go", { budget: { tokens: 1000 } })
      assert.strictEqual(result.output, "done")
      assert.strictEqual(result.usage.inputTokens, 200)
      assert.strictEqual(result.costUsd, 0.22)
    }).pipe(Effect.provide(Layer.merge(
      LanguageModel.layerScripted([{ toolCalls: [call("c1")], usage }, { text: "done", usage }]),
      Cost.layer({ scripted: { input: 1000, output: 1000 } })
    ))))
})
