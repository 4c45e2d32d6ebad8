/**
 * Typed final output (design: The model side): `Agent.make({ output })` asks the model for JSON of the
 * Schema (the request's `output` format), decodes the answer, sends an answer that does not decode
 * back with its issues a bounded number of times, then fails with `OutputInvalid`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Agent, LanguageModel } from "../src/index.js"

const Order = Schema.Struct({
  id: Schema.String,
  status: Schema.Literal("shipped", "pending"),
  total: Schema.Number
})

const agent = Agent.make({ tools: [], output: Order })

const valid = "{\"id\":\"ord-4821\",\"status\":\"shipped\",\"total\":42}"
const invalid = "{\"id\":\"ord-4821\",\"status\":\"lost\",\"total\":\"42\"}"

/** The text of the last user message of a request: what the model was told after its answer. */
const lastUserText = (request: LanguageModel.ModelRequest): string => {
  const users = request.messages.filter((m) => m._tag === "UserMessage")
  return users[users.length - 1]!.text
}

describe("Agent typed output", () => {
  it.effect("a valid answer decodes: the result carries the value; the request asked for the Schema's JSON", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent, "Where is ord-4821?")
      assert.deepStrictEqual(result.value, { id: "ord-4821", status: "shipped", total: 42 })
      assert.strictEqual(result.output, valid)
      const [request] = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      assert.strictEqual(request!.output?.name, "final_answer")
      const schema = request!.output?.schema as { type: string; required: Array<string>; additionalProperties: boolean }
      assert.strictEqual(schema.type, "object")
      assert.deepStrictEqual([...schema.required].sort(), ["id", "status", "total"])
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: valid }]))))

  it.effect("an invalid answer goes back with its issues; the second decodes", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent, "Where is ord-4821?")
      assert.deepStrictEqual(result.value, { id: "ord-4821", status: "shipped", total: 42 })
      assert.strictEqual(result.steps, 2)
      const requests = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      const told = lastUserText(requests[1]!)
      assert.include(told, "status: Expected one of \"shipped\", \"pending\", actual \"lost\"")
      assert.include(told, "total: Expected number, actual \"42\"")
      // The invalid answer is in the conversation, before what the model was told.
      const said = requests[1]!.messages.find((m) => m._tag === "AssistantMessage")
      assert.strictEqual(said?._tag === "AssistantMessage" ? said.text : undefined, invalid)
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: invalid }, { text: valid }]))))

  it.effect("three invalid answers fail the run with the last one's issues (two retries by default)", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(agent, "Where is ord-4821?"))
      assert.strictEqual(error._tag, "OutputInvalid")
      if (error._tag !== "OutputInvalid") return
      assert.strictEqual(error.attempts, 3)
      assert.strictEqual(error.output, "not json at all")
      assert.include(error.errors, "the answer is not JSON")
      assert.include(error.message, "after 3 attempt(s)")
      assert.strictEqual((yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)).length, 3)
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: invalid }, { text: "{\"id\":1}" }, { text: "not json at all" }]))))

  it.effect("outputRetries bounds the answers sent back; an unknown key is an issue too", () =>
    Effect.gen(function*() {
      const strict = Agent.make({ tools: [], output: Order, outputRetries: 0 })
      const error = yield* Effect.flip(Agent.run(strict, "Where is ord-4821?"))
      assert.strictEqual(error._tag, "OutputInvalid")
      if (error._tag !== "OutputInvalid") return
      assert.strictEqual(error.attempts, 1)
      assert.include(error.errors, "extra")
    }).pipe(Effect.provide(LanguageModel.layerScripted([{
      text: "{\"id\":\"ord-4821\",\"status\":\"shipped\",\"total\":42,\"extra\":true}"
    }]))))
})
