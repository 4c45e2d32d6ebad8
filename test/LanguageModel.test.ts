/**
 * A turn as a stream of parts (design: The model side): the scripted model streams its replies in
 * deltas, `generate` is the same turn collected, and a watched run tells the deltas in order.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { Agent, LanguageModel } from "../src/index.js"

const reply: LanguageModel.ScriptedReply = {
  text: "Hello there, world",
  reasoning: [{ _tag: "Thinking", text: "Greet them.", signature: "sig-1" }],
  usage: { inputTokens: 3, outputTokens: 4, cacheReadTokens: 2 }
}
const request: LanguageModel.ModelRequest = { messages: [{ _tag: "UserMessage", text: "hi" }], tools: [] }

describe("LanguageModel: a turn as parts", () => {
  it.effect("a streamed script gives its text in deltas of `chunk`; generate gives the same turn as the whole one", () =>
    Effect.gen(function*() {
      const streamed = yield* Effect.flatMap(LanguageModel.LanguageModel, (model) =>
        Effect.all([Stream.runCollect(model.stream(request)), model.generate(request)])).pipe(
          Effect.provide(LanguageModel.layerScripted([reply, reply], { streamed: { chunk: 5 } }))
        )
      const [parts, collected] = streamed
      assert.deepStrictEqual(Chunk.toReadonlyArray(parts).map((p) => p._tag === "TextDelta" || p._tag === "ReasoningDelta" ? p.text : p._tag), [
        "Greet", " them", ".",
        "Reasoning",
        "Hello", " ther", "e, wo", "rld",
        "Usage",
        "Finish"
      ])
      const whole = yield* Effect.flatMap(LanguageModel.LanguageModel, (model) => model.generate(request)).pipe(
        Effect.provide(LanguageModel.layerScripted([reply]))
      )
      assert.deepStrictEqual(collected, whole)
      assert.deepStrictEqual(LanguageModel.collectParts(LanguageModel.partsOf(whole)), whole)
    }))

  it.effect("a watched run tells the deltas as they come, then the turn's text; the usage sums the cache's counts", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(Agent.make({ tools: [] }), "hi"))
      const told = Chunk.toReadonlyArray(events).flatMap((e) =>
        e._tag === "TextDelta" ? [`text ${e.text}`] : e._tag === "ReasoningDelta" ? [`thinking ${e.text}`] : e._tag === "Text" ? [`whole ${e.text}`] : []
      )
      assert.deepStrictEqual(told, [
        "thinking Greet",
        "thinking  them",
        "thinking .",
        "text Hello",
        "text  ther",
        "text e, wo",
        "text rld",
        "whole Hello there, world"
      ])
      const done = Chunk.unsafeLast(events)
      assert.deepStrictEqual(done._tag === "Done" ? done.result.usage : undefined, {
        inputTokens: 3,
        outputTokens: 4,
        cacheReadTokens: 2
      })
    }).pipe(Effect.provide(LanguageModel.layerScripted([reply], { streamed: { chunk: 5 } }))))
})

describe("LanguageModel: which failures a fallback chain moves on from", () => {
  it("transient failures, rate limits and context-length rejections; never a bad tool schema, auth or a decoding failure", () => {
    const rejected = (status: number, message: string) => new LanguageModel.ModelRequestRejected({ status, message })
    assert.isTrue(LanguageModel.fallsBack(new LanguageModel.ModelError({ message: "HTTP 529", transient: true, status: 529 })))
    assert.isTrue(LanguageModel.fallsBack(new LanguageModel.ModelError({ message: "rate limit", transient: false, status: 429 })))
    assert.isTrue(LanguageModel.fallsBack(rejected(400, "openai: HTTP 400: This model's maximum context length is 128000 tokens")))
    assert.isTrue(LanguageModel.fallsBack(rejected(400, "anthropic: HTTP 400: prompt is too long: 210311 tokens > 200000 maximum")))
    assert.isTrue(LanguageModel.fallsBack(rejected(413, "anthropic: HTTP 413: request too large")))
    assert.isFalse(LanguageModel.fallsBack(rejected(400, "tools.0.input_schema: JSON schema is invalid")))
    assert.isFalse(LanguageModel.fallsBack(new LanguageModel.ModelAuthError({ message: "HTTP 401", status: 401 })))
    assert.isFalse(LanguageModel.fallsBack(new LanguageModel.ModelError({ message: "unexpected body", transient: false })))
  })

  it.effect("a chain's stream falls back before its first part, not after it", () =>
    Effect.gen(function*() {
      const down = new LanguageModel.ModelError({ message: "down", transient: true })
      const failing: LanguageModel.Service = {
        generate: () => Effect.fail(down),
        stream: () => Stream.fail(down)
      }
      const broken: LanguageModel.Service = {
        generate: () => Effect.fail(down),
        stream: () => Stream.concat(Stream.make(LanguageModel.ModelPart.TextDelta({ text: "Hel" })), Stream.fail(down))
      }
      const second = yield* Effect.provide(LanguageModel.LanguageModel, LanguageModel.layerScripted([reply], { repeat: true }))
      const before = yield* Stream.runCollect(LanguageModel.fallback([failing, second]).stream(request))
      assert.strictEqual(LanguageModel.collectParts(before).text, "Hello there, world")
      const after = yield* Effect.flip(Stream.runCollect(LanguageModel.fallback([broken, second]).stream(request)))
      assert.strictEqual(after.message, "down")
    }))
})
