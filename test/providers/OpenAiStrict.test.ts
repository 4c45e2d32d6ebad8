/**
 * Our OpenAI client in strict mode (`OpenAi.layer({ strict: true })`), against a real HTTP server on
 * 127.0.0.1 answering in Chat Completions' documented format: each tool goes out with `strict: true`
 * in OpenAI's strict form (`StrictSchema`), the model's nulls for optional fields are taken out again
 * before the tool's Schema decodes them, a tool with no strict form is refused before any request;
 * off (the default), tools go as Effect renders them.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Layer, Redacted, Schema } from "effect"
import { Agent, LanguageModel, Tool } from "../../src/index.js"
import * as OpenAi from "../../src/providers/OpenAi.js"
import * as StrictSchema from "../../src/providers/StrictSchema.js"
import { fixture, fixtureServer, type FixtureServer } from "../support/fixtureServer.js"

const notes: Array<unknown> = []
const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: {
    order_id: Schema.String,
    note: Schema.optional(Schema.Struct({ text: Schema.String, flag: Schema.optional(Schema.Boolean) }))
  },
  timeout: "10 seconds"
}, ({ note, order_id }) => {
  notes.push(note)
  return `order ${order_id}`
})
const agent = Agent.make({ name: "support", tools: [lookupOrder] })
const prompt = "Check orders ord-4821 and ord-0000"

const openAi = (server: FixtureServer, strict: boolean) =>
  OpenAi.layer({ model: "gpt-4.1", apiKey: Redacted.make("sk-test"), baseUrl: server.url, strict }).pipe(
    Layer.provide(NodeHttpClient.layer)
  )

// A model in strict mode sends every field: `null` for the optional ones it leaves out.
const replies = [{ status: 200, body: fixture("openrouter/response_tool_calls.json") }, { status: 200, body: fixture("openrouter/response_text.json") }]

describe("OpenAI's strict mode for tools", () => {
  it.scoped("on: the strict form with strict: true; the model's nulls taken out before decoding; the model says it requires the form", () =>
    Effect.gen(function*() {
      notes.length = 0
      const server = yield* fixtureServer(replies)
      const model = yield* Effect.provide(LanguageModel.LanguageModel, openAi(server, true))
      assert.strictEqual(model.strictSchemas, "openai")
      const result = yield* Agent.run(agent, prompt).pipe(Effect.provideService(LanguageModel.LanguageModel, model))
      assert.strictEqual(result.steps, 2)
      assert.deepStrictEqual(notes, [undefined, { text: "urgent" }])
      const form = StrictSchema.strictForm("openai", Tool.jsonSchema(lookupOrder))
      const [tool] = server.received[0]!.body.tools
      assert.deepStrictEqual(tool.function, {
        name: "lookup_order",
        description: "Return the order record for order_id.",
        parameters: Either.isRight(form) ? form.right.parameters : undefined,
        strict: true
      })
    }))

  it.scoped("on: a tool with no strict form (a map) fails the run before any request, naming it", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer(replies)
      const tag = Tool.make("tag", {
        description: "Tags.",
        input: { labels: Schema.Record({ key: Schema.String, value: Schema.String }) },
        timeout: "5 seconds"
      }, () => "ok")
      const error = yield* Effect.flip(Agent.run(Agent.make({ tools: [tag] }), prompt).pipe(Effect.provide(openAi(server, true))))
      assert.strictEqual(error._tag, "ModelRequestRejected")
      assert.match(error.message, /^tool tag: field labels cannot be sent to openai in its strict mode: a map/)
      assert.strictEqual(server.received.length, 0)
    }))

  it.scoped("off (the default): tools as Effect renders them, no strict flag", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([{ status: 200, body: fixture("openrouter/response_text.json") }])
      yield* Agent.run(agent, prompt).pipe(Effect.provide(openAi(server, false)))
      const [tool] = server.received[0]!.body.tools
      assert.deepStrictEqual(tool.function, {
        name: "lookup_order",
        description: "Return the order record for order_id.",
        parameters: Tool.jsonSchema(lookupOrder).parameters
      })
    }))
})
