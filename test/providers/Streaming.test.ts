/**
 * Both providers' streaming wire formats (design: The model side), against a real HTTP server on
 * 127.0.0.1 that sends the recorded event streams under test/fixtures/<provider>/stream_*.sse: deltas
 * in order, tool calls as soon as their arguments are complete, a stream that breaks, thinking blocks
 * sent back byte for byte (also by a resumed run), cache breakpoints and cached-token counts.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, Redacted, Schedule, Schema, Stream, TestClock } from "effect"
import { Agent, Journal, LanguageModel, Timing, Tool } from "../../src/index.js"
import * as Anthropic from "../../src/providers/Anthropic.js"
import * as OpenAi from "../../src/providers/OpenAi.js"
import { type FixtureServer, fixture, fixtureServer, type Reply, sseFixture } from "../support/fixtureServer.js"
import { recordingTracer } from "../support/recordingTracer.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: { order_id: Schema.String },
  output: Schema.Struct({ id: Schema.String, status: Schema.String }),
  timeout: "10 seconds"
}, ({ order_id }) =>
  order_id === "ord-4821" ? Effect.succeed({ id: order_id, status: "shipped" }) : Effect.fail(new NotFound({ message: `no order ${order_id}` })))

const agent = Agent.make({ name: "support", tools: [lookupOrder], instructions: "You are a support agent." })
const prompt = "Check orders ord-4821 and ord-0000"

const fastRetry = Timing.layer({ modelRetry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(4))) })

type Provider = "anthropic" | "openai"

const modelOf = (provider: Provider, server: FixtureServer, options?: { readonly cache?: boolean }) =>
  (provider === "anthropic"
    ? Anthropic.layer({ model: "claude-sonnet-4-5", apiKey: Redacted.make("sk-ant-test"), baseUrl: server.url, ...options })
    : OpenAi.layer({ model: "gpt-4.1", apiKey: Redacted.make("sk-test"), baseUrl: `${server.url}/v1` })).pipe(
      Layer.provide(NodeHttpClient.layer),
      Layer.merge(fastRetry)
    )

const sse = (provider: Provider, name: string, more?: Partial<Reply>): Reply => ({
  status: 200,
  sse: sseFixture(`${provider}/${name}.sse`),
  ...more
})
const toolCalls = (provider: Provider) => provider === "anthropic" ? "stream_tool_use" : "stream_tool_calls"

/** Each provider's model as the run's `TurnCompleted` says it. */
const labels = { anthropic: "anthropic:claude-sonnet-4-5", openai: "openai:gpt-4.1" }

/** An event as a short line, for comparing sequences. */
const line = (event: Agent.AgentEvent): string => {
  switch (event._tag) {
    case "TurnStarted":
      return `turn ${event.step}`
    case "TextDelta":
      return `delta ${event.text}`
    case "Text":
      return `text ${event.text}`
    case "ToolCallStarted":
      return `started ${event.id}`
    case "ToolCallFinished":
      return `finished ${event.call.id}`
    case "TurnRetried":
      return `retried ${event.step}`
    case "TurnCompleted":
      return `completed ${event.step} ${event.model}`
    case "Done":
      return `done ${event.result.output}`
    default:
      return event._tag
  }
}

const ids = {
  anthropic: ["toolu_01A09q90qw90lq917835lq9", "toolu_01B2c3d4e5f6g7h8i9j0k1l2"],
  openai: ["call_abc123", "call_def456"]
}
const firstDeltas = { anthropic: ["I'll look up", " both orders."], openai: [] as Array<string> }
const lastDeltas = {
  anthropic: ["Order ord-4821 has shipped;", " there is no order ord-0000."],
  openai: ["Order ord-4821", " has shipped;", " there is no order ord-0000."]
}
const answer = "Order ord-4821 has shipped; there is no order ord-0000."

/** The events of a two-turn run: the first turn's deltas (and text), its calls, then the answer's deltas. */
const twoTurns = (provider: Provider): Array<string> => {
  const [a, b] = ids[provider]
  const first = firstDeltas[provider]
  return [
    "turn 1",
    ...first.map((d) => `delta ${d}`),
    `completed 1 ${labels[provider]}`,
    ...(first.length === 0 ? [] : [`text ${first.join("")}`]),
    `started ${a}`,
    `started ${b}`,
    `finished ${a}`,
    `finished ${b}`,
    "turn 2",
    ...lastDeltas[provider].map((d) => `delta ${d}`),
    `completed 2 ${labels[provider]}`,
    `text ${answer}`,
    `done ${answer}`
  ]
}

for (const provider of ["anthropic", "openai"] as const) {
  describe(`${provider}: streaming`, () => {
    it.scoped("a run with two tool calls and a final text streams its deltas in order; the usage counts the cache", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([sse(provider, toolCalls(provider)), sse(provider, "stream_text")])
        const events = yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(Effect.provide(modelOf(provider, server)))
        assert.deepStrictEqual(Chunk.toReadonlyArray(events).map(line), twoTurns(provider))
        const done = Chunk.unsafeLast(events)
        assert.strictEqual(done._tag, "Done")
        if (done._tag !== "Done") return
        assert.deepStrictEqual(
          done.result.usage,
          provider === "anthropic"
            ? { inputTokens: 472 + 610, outputTokens: 91 + 42, cacheReadTokens: 1200, cacheWriteTokens: 1200 }
            : { inputTokens: 82 + 171, outputTokens: 51 + 17, cacheReadTokens: 128 }
        )
        // The streamed calls went back as the API wants them, exactly as a whole answer's would.
        const { tools: _, ...second } = server.received[1]!.body
        const expected = fixture(`${provider}/request_turn2.json`).messages
        const upToAssistant = (messages: Array<any>) => messages.slice(0, messages.findIndex((m) => m.role === "assistant") + 1)
        assert.deepStrictEqual(upToAssistant(second.messages), upToAssistant(expected))
        assert.strictEqual(server.received[0]!.body.stream, true)
      }))

    it.scoped("a tool call comes as soon as its arguments are complete, before the stream ends", () =>
      Effect.gen(function*() {
        // The stream stops (open) right after the first call's block: its part must come all the same.
        const held = provider === "anthropic" ? 11 : 6
        const server = yield* fixtureServer([sse(provider, toolCalls(provider), { holdAfterEvents: held })])
        const parts = yield* Effect.flatMap(LanguageModel.LanguageModel, (model) =>
          model.stream({ messages: [{ _tag: "UserMessage", text: prompt }], tools: [Tool.jsonSchema(lookupOrder)] }).pipe(
            Stream.takeUntil((part) => part._tag === "ToolCall"),
            Stream.runCollect
          )).pipe(Effect.provide(modelOf(provider, server)))
        const last = Chunk.unsafeLast(parts)
        assert.deepStrictEqual(last._tag === "ToolCall" ? last.call : undefined, {
          id: ids[provider][0]!,
          name: "lookup_order",
          arguments: provider === "anthropic" ? "{\"order_id\": \"ord-4821\"}" : "{\"order_id\":\"ord-4821\"}"
        })
      }))

    it.scoped("a stream that breaks after its first parts: the turn is asked again, observers told TurnRetried", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([
          // Headers, then the connection closes: broken before any part.
          sse(provider, "stream_text", { cutAfterEvents: 0 }),
          // A few deltas, then the connection closes.
          sse(provider, "stream_text", { cutAfterEvents: 3 }),
          sse(provider, "stream_text")
        ])
        const fiber = yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(
          Effect.provide(modelOf(provider, server)),
          Effect.fork
        )
        for (let n = 1; n <= 2; n++) {
          yield* Effect.promise(() => server.waitFor(n))
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 30)))
          yield* TestClock.adjust("1 second")
        }
        const lines = Chunk.toReadonlyArray(yield* Fiber.join(fiber)).map(line)
        const cut = lastDeltas[provider].slice(0, provider === "anthropic" ? 1 : 2)
        assert.deepStrictEqual(lines, [
          "turn 1",
          ...cut.map((d) => `delta ${d}`),
          "retried 1",
          ...lastDeltas[provider].map((d) => `delta ${d}`),
          `completed 1 ${labels[provider]}`,
          `text ${answer}`,
          `done ${answer}`
        ])
        assert.strictEqual(server.received.length, 3)
      }))

    it.scoped("unwatched (Agent.run), a broken stream is retried the same way", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([sse(provider, "stream_text", { cutAfterEvents: 2 }), sse(provider, "stream_text")])
        const fiber = yield* Agent.run(agent, prompt).pipe(Effect.provide(modelOf(provider, server)), Effect.fork)
        yield* Effect.promise(() => server.waitFor(1))
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 30)))
        yield* TestClock.adjust("1 second")
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.output, answer)
        assert.strictEqual(server.received.length, 2)
      }))
  })
}

describe("anthropic: streaming, thinking and caching", () => {
  const thinkingEvents = () =>
    sseFixture("anthropic/stream_thinking.sse").split("\n\n").filter((e) => e !== "").map((e) =>
      JSON.parse(e.split("\n").find((l) => l.startsWith("data: "))!.slice(6))
    )
  // The blocks as the recording streamed them: its deltas joined, its signature, the redacted data.
  const recorded = () => {
    const events = thinkingEvents()
    const thinking = events.filter((e) => e.delta?.type === "thinking_delta").map((e) => e.delta.thinking).join("")
    const signature = events.find((e) => e.delta?.type === "signature_delta").delta.signature
    const data = events.find((e) => e.content_block?.type === "redacted_thinking").content_block.data
    return [{ type: "thinking", thinking, signature }, { type: "redacted_thinking", data }]
  }

  it.scoped("thinking blocks come back first in the next request, byte for byte, beside the tool results", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("anthropic", "stream_thinking"), sse("anthropic", "stream_text")])
      const events = yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(Effect.provide(modelOf("anthropic", server)))
      const reasoning = Chunk.toReadonlyArray(events).flatMap((e) => e._tag === "ReasoningDelta" ? [e.text] : [])
      assert.strictEqual(reasoning.join(""), recorded()[0]!.thinking)
      const sent = server.received[1]!.body.messages[1]
      assert.strictEqual(sent.role, "assistant")
      assert.deepStrictEqual(sent.content.slice(0, 2), recorded())
      assert.strictEqual(JSON.stringify(sent.content.slice(0, 2)), JSON.stringify(recorded()))
      assert.strictEqual(sent.content[2].type, "tool_use")
      assert.strictEqual(server.received[1]!.body.messages[2].content[0].type, "tool_result")
    }))

  it.scoped("a resumed run sends the journaled thinking blocks too", () =>
    Effect.gen(function*() {
      const first = yield* fixtureServer([
        sse("anthropic", "stream_thinking"),
        { status: 400, body: fixture("anthropic/error_invalid_request.json") }
      ])
      const error = yield* Effect.flip(Agent.run(agent, prompt, { runId: "run-think" }).pipe(
        Effect.provide(modelOf("anthropic", first))
      ))
      assert.strictEqual(error._tag, "ModelRequestRejected")
      const second = yield* fixtureServer([sse("anthropic", "stream_text")])
      const result = yield* Agent.resume(agent, "run-think").pipe(Effect.provide(modelOf("anthropic", second)))
      assert.strictEqual(result.output, answer)
      assert.strictEqual(second.received.length, 1)
      assert.strictEqual(JSON.stringify(second.received[0]!.body.messages[1].content.slice(0, 2)), JSON.stringify(recorded()))
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.scoped("cache_control marks the system prompt, the last tool and the conversation's last block; off by option", () =>
    Effect.gen(function*() {
      const ephemeral = { type: "ephemeral" }
      const server = yield* fixtureServer([sse("anthropic", "stream_tool_use"), sse("anthropic", "stream_text")])
      yield* Agent.run(agent, prompt).pipe(Effect.provide(modelOf("anthropic", server)))
      for (const { body } of server.received) {
        assert.deepStrictEqual(body.system, [{ type: "text", text: "You are a support agent.", cache_control: ephemeral }])
        assert.deepStrictEqual(body.tools[body.tools.length - 1].cache_control, ephemeral)
        const last = body.messages[body.messages.length - 1].content
        assert.deepStrictEqual(last[last.length - 1].cache_control, ephemeral)
        // Exactly three breakpoints (the API allows four).
        assert.strictEqual(JSON.stringify(body).split("\"cache_control\"").length - 1, 3)
      }
      const off = yield* fixtureServer([sse("anthropic", "stream_text")])
      yield* Agent.run(agent, prompt).pipe(Effect.provide(modelOf("anthropic", off, { cache: false })))
      assert.strictEqual(off.received[0]!.body.system, "You are a support agent.")
      assert.notInclude(JSON.stringify(off.received[0]!.body), "cache_control")
    }))

  it.scoped("an overloaded_error event mid-stream is transient: asked again", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("anthropic", "stream_error_overloaded"), sse("anthropic", "stream_text")])
      const fiber = yield* Agent.run(agent, prompt).pipe(Effect.provide(modelOf("anthropic", server)), Effect.fork)
      yield* Effect.promise(() => server.waitFor(1))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 30)))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* Fiber.join(fiber)).output, answer)
      assert.strictEqual(server.received.length, 2)
    }))
})

describe("typed output through each provider's structured-output mode", () => {
  const Order = Schema.Struct({ id: Schema.String, status: Schema.Literal("shipped", "pending"), total: Schema.Number })
  const typed = Agent.make({ tools: [lookupOrder], output: Order })

  it.scoped("anthropic: the answer is the input of a final_answer tool, offered beside the agent's tools", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("anthropic", "stream_output")])
      const result = yield* Agent.run(typed, "Where is ord-4821?").pipe(Effect.provide(modelOf("anthropic", server)))
      assert.deepStrictEqual(result.value, { id: "ord-4821", status: "shipped", total: 42 })
      assert.strictEqual(result.toolCalls.length, 0)
      const tools = server.received[0]!.body.tools
      assert.deepStrictEqual(tools.map((t: any) => t.name), ["lookup_order", "final_answer"])
      assert.deepStrictEqual([...tools[1].input_schema.required].sort(), ["id", "status", "total"])
    }))

  it.scoped("openai: response_format json_schema carries the Schema's JSON Schema", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("openai", "stream_output")])
      const result = yield* Agent.run(typed, "Where is ord-4821?").pipe(Effect.provide(modelOf("openai", server)))
      assert.deepStrictEqual(result.value, { id: "ord-4821", status: "shipped", total: 42 })
      const format = server.received[0]!.body.response_format
      assert.strictEqual(format.type, "json_schema")
      assert.strictEqual(format.json_schema.name, "final_answer")
      assert.deepStrictEqual(format.json_schema.schema.properties.status, { type: "string", enum: ["shipped", "pending"] })
    }))
})

describe("reasoning and cached tokens, told and counted", () => {
  it.scoped("openai: a compatible server's reasoning_content is told as deltas, kept with the turn, not sent back", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("openai", "stream_reasoning"), sse("openai", "stream_text")])
      const events = yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(Effect.provide(modelOf("openai", server)))
      const reasoning = Chunk.toReadonlyArray(events).flatMap((e) => e._tag === "ReasoningDelta" ? [e.text] : [])
      assert.deepStrictEqual(reasoning, ["The user asks about ord-4821.", " I will look it up."])
      const assistant = server.received[1]!.body.messages.find((m: any) => m.role === "assistant")
      assert.deepStrictEqual(Object.keys(assistant).sort(), ["content", "role", "tool_calls"])
      assert.notInclude(JSON.stringify(server.received[1]!.body), "The user asks")
    }))

  it.scoped("the chat span carries the cached token counts", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recordingTracer()
      const server = yield* fixtureServer([sse("anthropic", "stream_tool_use"), sse("anthropic", "stream_text")])
      yield* Agent.run(agent, prompt).pipe(Effect.provide(modelOf("anthropic", server)), Effect.withTracer(tracer))
      const chats = spans.filter((s) => s.name.startsWith("chat"))
      assert.deepStrictEqual(
        chats.map((s) => [
          s.attributes.get("gen_ai.usage.cache_read.input_tokens"),
          s.attributes.get("gen_ai.usage.cache_creation.input_tokens")
        ]),
        [[0, 1200], [1200, 0]]
      )
    }))
})

describe("openai-compatible servers", () => {
  it.scoped("tool calls sent whole, without an index (some compatible servers), are told apart by their ids", () =>
    Effect.gen(function*() {
      const chunk = (delta: unknown, finish: string | null = null) =>
        `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
      const call = (id: string, order: string) => ({
        tool_calls: [{ id, type: "function", function: { name: "lookup_order", arguments: `{"order_id":"${order}"}` } }]
      })
      const text = chunk({ role: "assistant" }) + chunk(call("a", "ord-4821")) + chunk(call("b", "ord-0000")) +
        chunk({}, "tool_calls") + "data: [DONE]\n\n"
      const server = yield* fixtureServer([{ status: 200, sse: text }])
      const turn = yield* Effect.flatMap(LanguageModel.LanguageModel, (model) => model.generate({ messages: [], tools: [] })).pipe(
        Effect.provide(modelOf("openai", server))
      )
      assert.deepStrictEqual(turn.toolCalls, [
        { id: "a", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" },
        { id: "b", name: "lookup_order", arguments: "{\"order_id\":\"ord-0000\"}" }
      ])
      assert.strictEqual(turn.finishReason, "tool_calls")
    }))
})
