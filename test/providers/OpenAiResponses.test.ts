/**
 * OpenAI's Responses API (src/providers/OpenAiResponses.ts) against a real HTTP server on 127.0.0.1
 * that sends its documented event stream (test/fixtures/openai-responses/): a run with two tool calls
 * and a final text, its deltas in order; the reasoning item (id and encrypted content) sent back
 * before the calls it led to, byte for byte; the conversation as input items, statelessly; a whole
 * JSON answer read too; a stream cut before `response.completed` asked again; a 429 retried after
 * its `retry-after`; a 401 named.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, ConfigProvider, Effect, Fiber, Layer, Schedule, Schema, Stream, TestClock } from "effect"
import { Agent, Timing, Tool } from "../../src/index.js"
import { Model } from "../../src/exports/providers.js"
import { fixture, fixtureServer, type FixtureServer, type Reply, sseFixture } from "../support/fixtureServer.js"

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
const answer = "Order ord-4821 has shipped; there is no order ord-0000."

const fastRetry = Timing.layer({ modelRetry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(4))) })
const modelOf = (server: FixtureServer, model = "gpt-5") =>
  Model.layer(`openai-responses:${model}`).pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([
      ["OPENAI_API_KEY", "sk-test"],
      ["OPENAI_BASE_URL", `${server.url}/v1`]
    ])))),
    Layer.provide(NodeHttpClient.layer),
    Layer.merge(fastRetry)
  )

const sse = (name: string, more?: Partial<Reply>): Reply => ({ status: 200, sse: sseFixture(`openai-responses/${name}.sse`), ...more })
const calls = fixture("openai-responses/response_function_calls.json")

describe("openai-responses: the Responses API", () => {
  it.scoped("a run: reasoning, two calls, then the text, streamed in order; the second request carries it all back as input items", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("stream_function_calls"), sse("stream_text")])
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(Effect.provide(modelOf(server))))
      const done = events[events.length - 1]!
      assert.strictEqual(done._tag, "Done")
      if (done._tag !== "Done") return
      assert.strictEqual(done.result.output, answer)
      assert.deepStrictEqual(done.result.usage, { inputTokens: 82 + 190, outputTokens: 51 + 17, cacheReadTokens: 0 + 64 })
      assert.deepStrictEqual(
        events.filter((e) => e._tag === "TextDelta").map((e) => e._tag === "TextDelta" ? e.text : ""),
        ["Order ord-4821 ", "has shipped; there is ", "no order ord-0000."]
      )
      assert.deepStrictEqual(
        events.filter((e) => e._tag === "ReasoningDelta").map((e) => e._tag === "ReasoningDelta" ? e.text : ""),
        ["Both orders ", "need a lookup."]
      )

      const [first, second] = server.received.map((r) => r.body)
      assert.strictEqual(server.received[0]!.url, "/v1/responses")
      assert.deepStrictEqual(
        { stream: first.stream, store: first.store, include: first.include, instructions: first.instructions },
        { stream: true, store: false, include: ["reasoning.encrypted_content"], instructions: "You are a support agent." }
      )
      assert.deepStrictEqual(first.tools, [{
        type: "function",
        name: "lookup_order",
        description: "Return the order record for order_id.",
        parameters: Tool.jsonSchema(lookupOrder).parameters,
        strict: false
      }])
      const [reasoning, call1, call2] = calls.output
      assert.deepStrictEqual(second.input.slice(0, 4), [
        { role: "user", content: prompt },
        // Byte for byte: the id and the encrypted content as they came.
        { type: "reasoning", id: reasoning.id, summary: reasoning.summary, encrypted_content: reasoning.encrypted_content },
        { type: "function_call", call_id: call1.call_id, name: call1.name, arguments: call1.arguments },
        { type: "function_call", call_id: call2.call_id, name: call2.name, arguments: call2.arguments }
      ])
      const outputs = second.input.slice(4)
      assert.deepStrictEqual(outputs.map((o: any) => [o.type, o.call_id]), [
        ["function_call_output", "call_abc123"],
        ["function_call_output", "call_def456"]
      ])
      assert.include(outputs[0].output, "shipped")
      assert.include(outputs[1].output, "no order ord-0000")
    }))

  it.scoped("a server that answers one JSON body (no stream) is read the same; a model not named like a reasoning one is not asked for encrypted reasoning", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([{ status: 200, body: calls }, { status: 200, body: fixture("openai-responses/response_text.json") }])
      const result = yield* Agent.run(agent, prompt).pipe(Effect.provide(modelOf(server, "gpt-4.1")))
      assert.strictEqual(result.output, answer)
      assert.strictEqual(result.steps, 2)
      assert.isUndefined(server.received[0]!.body.include)
      assert.strictEqual(server.received[1]!.body.input[1].encrypted_content, calls.output[0].encrypted_content)
    }))

  it.scoped("a stream cut before response.completed is asked again; the run completes", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([sse("stream_text", { cutAfterEvents: 4 }), sse("stream_text")])
      const fiber = yield* Effect.fork(Agent.run(Agent.make({ name: "plain", tools: [] }), prompt).pipe(Effect.provide(modelOf(server))))
      yield* Effect.promise(() => server.waitFor(1))
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.output, answer)
      assert.strictEqual(server.received.length, 2)
    }))

  it.scoped("a 429 waits for its retry-after; a 401 fails with the typed auth error", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([
        { status: 429, body: fixture("openai/error_rate_limit.json"), headers: { "retry-after": "2" } },
        sse("stream_text"),
        { status: 401, body: fixture("openai/error_authentication.json") }
      ])
      const plain = Agent.make({ name: "plain", tools: [] })
      const fiber = yield* Effect.fork(Agent.run(plain, prompt).pipe(Effect.provide(modelOf(server))))
      yield* Effect.promise(() => server.waitFor(1))
      yield* TestClock.adjust("1999 millis")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))
      assert.strictEqual(server.received.length, 1)
      yield* TestClock.adjust("1 milli")
      assert.strictEqual((yield* Fiber.join(fiber)).output, answer)
      const error = yield* Effect.flip(Agent.run(plain, prompt).pipe(Effect.provide(modelOf(server))))
      assert.strictEqual(error._tag, "ModelAuthError")
      assert.strictEqual(error.message, `openai: HTTP 401: ${fixture("openai/error_authentication.json").error.message}`)
    }))
})

describe("a provider's answer nested 100,000 deep", () => {
  const deep = "[".repeat(100_000) + "]".repeat(100_000)

  it.scoped("in a stream event or a whole body: the run fails with a typed, non-transient ModelError, no defect", () =>
    Effect.gen(function*() {
      const plain = Agent.make({ name: "plain", tools: [] })
      const event = `event: response.output_item.done\ndata: {"type":"response.output_item.done","item":${deep}}\n\n`
      const server = yield* fixtureServer([{ status: 200, sse: event }, { status: 200, text: `{"output":${deep}}` }])
      for (const what of ["stream event", "body"]) {
        const exit = yield* Effect.exit(Agent.run(plain, prompt).pipe(Effect.provide(modelOf(server))))
        assert.strictEqual(exit._tag, "Failure")
        const error = exit._tag === "Failure" ? Cause.failureOption(exit.cause) : undefined
        assert.isTrue(error !== undefined && error._tag === "Some", `${what}: ${exit._tag === "Failure" ? Cause.pretty(exit.cause).slice(0, 300) : ""}`)
        if (error?._tag !== "Some") return
        assert.strictEqual(error.value._tag, "ModelError")
        assert.match(error.value.message, new RegExp(`^openai: a ${what} nested deeper than 128 levels, refused unread`))
      }
      assert.strictEqual(server.received.length, 2)
    }))
})
