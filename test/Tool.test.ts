import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { readFileSync } from "node:fs"
import { Tool } from "../src/index.js"
import { samples } from "./fixtures/sampleTools.js"

type Json = Record<string, any>

/** Every object schema (a node with `type: "object"`) in a JSON Schema, with its path. */
const objectNodes = (node: unknown, path = "$"): Array<[string, Json]> => {
  if (typeof node !== "object" || node === null) return []
  const out: Array<[string, Json]> = []
  const record = node as Json
  if (record.type === "object") out.push([path, record])
  for (const [key, value] of Object.entries(record)) out.push(...objectNodes(value, `${path}.${key}`))
  return out
}

const deep = Tool.make("deep", {
  description: "Three levels of nested structs.",
  input: {
    level1: Schema.Struct({
      level2: Schema.Struct({
        level3: Schema.Struct({ leaf: Schema.String }),
        note: Schema.optional(Schema.String)
      })
    }),
    count: Schema.Number.pipe(Schema.between(1, 10)).annotations({ description: "How many, 1 to 10" })
  },
  timeout: "5 seconds"
}, () => Effect.succeed(null))

describe("Tool.jsonSchema", () => {
  it("puts additionalProperties: false on every struct at every depth", () => {
    const { parameters } = Tool.jsonSchema(deep)
    const objects = objectNodes(parameters)
    assert.deepStrictEqual(objects.map(([path]) => path), [
      "$",
      "$.properties.level1",
      "$.properties.level1.properties.level2",
      "$.properties.level1.properties.level2.properties.level3"
    ])
    for (const [path, node] of objects) assert.strictEqual(node.additionalProperties, false, path)
  })

  it("shows descriptions and between(1, 10) as description, minimum and maximum", () => {
    const count = (Tool.jsonSchema(deep).parameters as Json).properties.count
    assert.strictEqual(count.type, "number")
    assert.strictEqual(count.description, "How many, 1 to 10")
    assert.strictEqual(count.minimum, 1)
    assert.strictEqual(count.maximum, 10)
  })

  it("leaves optional fields out of required", () => {
    const parameters = Tool.jsonSchema(deep).parameters as Json
    assert.deepStrictEqual(parameters.required, ["level1", "count"])
    const level2 = parameters.properties.level1.properties.level2
    assert.deepStrictEqual(level2.required, ["level3"])
    assert.deepStrictEqual(Object.keys(level2.properties), ["level3", "note"])
  })

  it("renders an empty input as type object", () => {
    const noInput = Tool.make("ping", { description: "Ping.", input: {}, timeout: "1 second" }, () => Effect.void)
    assert.deepStrictEqual(Tool.jsonSchema(noInput).parameters, {
      type: "object",
      properties: {},
      required: [],
      additionalProperties: false
    })
  })

  it("accepts a Schema.Struct as input, identifier and all, with no top-level $ref", () => {
    const Input = Schema.Struct({ id: Schema.String }).annotations({ identifier: "LookupInput" })
    const tool = Tool.make("by_struct", { description: "By struct.", input: Input, timeout: "1 second" }, () =>
      Effect.void)
    const parameters = Tool.jsonSchema(tool).parameters as Json
    assert.strictEqual(parameters.type, "object")
    assert.strictEqual(parameters.$ref, undefined)
    assert.deepStrictEqual(parameters.required, ["id"])
  })

  it("keeps a Record's value schema in additionalProperties", () => {
    const parameters = Tool.jsonSchema(samples[2]).parameters as Json
    assert.deepStrictEqual(parameters.properties.labels.additionalProperties, { type: "string" })
  })

  it("matches the committed schemas of three sample tools", () => {
    for (const tool of samples) {
      const expected = JSON.parse(readFileSync(new URL(`./fixtures/schemas/${tool.name}.json`, import.meta.url), "utf8"))
      assert.deepStrictEqual(Tool.jsonSchema(tool), expected, tool.name)
    }
  })

  it("computes the schema once per tool", () => {
    const [tool] = samples
    assert.strictEqual(Tool.jsonSchema(tool).parameters, Tool.jsonSchema(tool).parameters)
  })

  it("keeps the reason instead of throwing when JSON cannot express a field", () => {
    const tool = Tool.make("bad", {
      description: "Bad.",
      input: { when: Schema.Struct({ at: Schema.DateFromSelf }) },
      timeout: "1 second"
    }, () => Effect.void)
    assert.isTrue(Either.isLeft(tool.schemas))
    assert.throws(() => Tool.jsonSchema(tool), /input field when\.at \(DateFromSelf\) is not JSON-representable/)
  })
})

describe("Tool.make", () => {
  it("keeps the handler directly callable", () =>
    Effect.runPromise(samples[1].handler({ order_id: "ord-1", amount: 2 })).then((out) =>
      assert.deepStrictEqual(out, { refund_id: "ref-ord-1" })
    ))

  it("applies the tool defaults", () => {
    const tool = Tool.make("defaults", { description: "Defaults.", input: {}, timeout: "2 seconds" }, () => Effect.void)
    assert.strictEqual(tool.retries, 0)
    assert.deepStrictEqual(tool.permanent, [])
    assert.strictEqual(tool.retryable, undefined)
    assert.strictEqual(tool.idempotent, false)
    assert.strictEqual(tool.errorTransform, undefined)
    assert.strictEqual((Tool.outputJsonSchema(tool) as { $id?: string }).$id, "/schemas/unknown")
  })
})
