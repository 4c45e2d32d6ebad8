/**
 * `Tool.fromJsonSchema`: a tool whose input and output come as JSON Schemas (a remote MCP server's
 * tools, a served tool as the platform sees it). The model sees the schemas as given; values are
 * checked against them, each failure at its path; a schema that cannot be compiled is reported by
 * `Toolkit.make` and the tool cannot be called; `checked: "elsewhere"` passes any object.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { Invocation, Tool, Toolkit } from "../src/index.js"

const parameters = {
  type: "object",
  properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
  required: ["city"],
  additionalProperties: false
}
const output = { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] }

/** What each call's handler was given. */
const given: Array<Record<string, unknown>> = []

const forecast = (answer: unknown, options: Partial<Tool.JsonSchemaOptions> = {}) =>
  Tool.fromJsonSchema("forecast", {
    description: "The weather for a city.",
    parameters,
    output,
    timeout: "5 seconds",
    ...options
  }, (input) =>
    Effect.sync(() => {
      given.push(input)
      return answer
    }))

describe("Tool.fromJsonSchema", () => {
  it.effect("the model sees the schemas as given; arguments that fit reach the handler, an output that fits is the result", () =>
    Effect.gen(function*() {
      const tool = forecast({ summary: "sunny" })
      assert.deepStrictEqual(Tool.jsonSchema(tool).parameters as unknown, parameters)
      assert.deepStrictEqual(Tool.outputJsonSchema(tool) as unknown, output)
      given.length = 0
      const result = yield* Invocation.run(tool, { city: "Lyon", days: 2 })
      assert.deepStrictEqual(result.value, { summary: "sunny" })
      assert.deepStrictEqual(given, [{ city: "Lyon", days: 2 }])
    }))

  it.effect("arguments that do not fit fail the call with each issue at its path, and the handler never runs", () =>
    Effect.gen(function*() {
      given.length = 0
      const result = yield* Invocation.run(forecast({ summary: "sunny" }), { days: 0, town: "Lyon" })
      assert.strictEqual(result.failure?._tag, "InvalidInput")
      assert.include(result.error, "city")
      assert.include(result.error, "is missing")
      assert.include(result.error, "town")
      assert.include(result.error, "days")
      assert.deepStrictEqual(given, [])
    }))

  it.effect("an output that does not fit its schema fails the call", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(forecast({ summary: 3 }), { city: "Lyon" })
      assert.isDefined(result.failure)
      assert.include(result.error, "summary")
    }))

  it.effect("a schema that cannot be compiled: Toolkit.make names the tool and why; the tool cannot be called", () =>
    Effect.gen(function*() {
      const odd = forecast({ summary: "sunny" }, {
        parameters: { type: "object", properties: { city: { type: "town" } } },
        schemaNames: { input: "the vendor's input schema", output: "the vendor's output schema" }
      })
      assert.isTrue(Either.isLeft(odd.schemas))
      const made = yield* Effect.either(Toolkit.make(odd))
      assert.isTrue(Either.isLeft(made))
      assert.match(Either.isLeft(made) ? made.left.message : "", /forecast.*the vendor's input schema cannot be checked/)
      given.length = 0
      const result = yield* Invocation.run(odd, { city: "Lyon" })
      assert.strictEqual(result.failure?._tag, "InvalidInput")
      assert.include(result.error, "the vendor's input schema cannot be checked")
      assert.deepStrictEqual(given, [])
    }))

  it.effect("checked elsewhere: any JSON object passes, the output is taken as it comes, the model sees the schemas as given", () =>
    Effect.gen(function*() {
      const tool = forecast({ anything: true }, { checked: "elsewhere" })
      assert.deepStrictEqual(Tool.jsonSchema(tool).parameters as unknown, parameters)
      assert.deepStrictEqual(Tool.outputJsonSchema(tool) as unknown, output)
      given.length = 0
      const result = yield* Invocation.run(tool, { town: 1 })
      assert.deepStrictEqual(result.value, { anything: true })
      assert.deepStrictEqual(given, [{ town: 1 }])
      const notAnObject = yield* Invocation.run(tool, [1, 2])
      assert.strictEqual(notAnObject.failure?._tag, "InvalidInput")
    }))
})
