// A field's default, as each face shows it (design: What the model sees): the definitions an agent's model
// is given, the manifest the platform receives over a real WebSocket and hands its model, MCP's tools/list through
// the official client.
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schedule, Schema } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../src/index.js"
import { Serve } from "../src/exports/serve.js"
import { mcpClient } from "./support/mcpHttp.js"
import { clientLayer, embeddedPlatform } from "./support/platform.js"

const policy = Timing.layer({ redelivery: Schedule.spaced("200 millis"), reconnect: Schedule.spaced("50 millis") })

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: {
    order_id: Schema.String,
    include_history: Schema.optionalWith(Schema.Boolean, { default: () => false }),
    page: Schema.Struct({ size: Schema.optionalWith(Schema.Number, { default: () => 20 }) })
  },
  timeout: "5 seconds"
}, ({ order_id }) => Effect.succeed({ id: order_id }))

type Json = Record<string, any>

/** What a face shows of the input: the required keys, the top-level default and the nested one. */
const shown = (parameters: unknown) => {
  const schema = parameters as Json
  return {
    required: schema.required,
    include_history: schema.properties.include_history,
    size: schema.properties.page.properties.size
  }
}

const expected = {
  required: ["order_id", "page"],
  include_history: { type: "boolean", default: false },
  size: { type: "number", default: 20 }
}

describe("a field's default, on every face", () => {
  it.effect("Tool.jsonSchema and the toolkit's definitions and manifest", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(shown(Tool.jsonSchema(lookupOrder).parameters), expected)
      const toolkit = yield* Toolkit.make(lookupOrder)
      assert.deepStrictEqual(shown(toolkit.definitions[0]!.parameters), expected)
      assert.deepStrictEqual(shown(toolkit.manifest[0]!.parameters), expected)
    }))

  it.live("the platform's model, given the manifest registered over a real WebSocket", () =>
    Effect.gen(function*() {
      const offered: Array<ReadonlyArray<LanguageModel.ToolDefinition>> = []
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [(request) => {
        offered.push(request.tools)
        return { text: "done" }
      }]
      const url = yield* embeddedPlatform(script, policy)
      const answer = yield* Effect.gen(function*() {
        const serving = yield* Serve.makeConfig(yield* Toolkit.make(lookupOrder))
        return yield* serving.runTask("go")
      }).pipe(Effect.scoped, Effect.provide(clientLayer({ url }, policy)))
      assert.strictEqual(answer, "done")
      const tool = offered[0]?.find((definition) => definition.name === "lookup_order")
      assert.isDefined(tool)
      assert.deepStrictEqual(shown(tool!.parameters), expected)
    }).pipe(Effect.scoped))

  it.live("MCP tools/list, through the official client", () =>
    Effect.gen(function*() {
      const { client } = yield* mcpClient(yield* Toolkit.make(lookupOrder))
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((listed) => listed.name), ["lookup_order"])
      assert.deepStrictEqual(shown(tools[0]!.inputSchema), expected)
    }).pipe(Effect.scoped))
})
