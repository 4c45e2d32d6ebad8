import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Either, Exit, Fiber, Schema, TestClock } from "effect"
import { readFileSync } from "node:fs"
import { Tool, ToolContext } from "../src/index.js"
import * as Testing from "../examples/testing.js"
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
  it("runs the body directly for a unit test (Tool.test)", () =>
    Effect.runPromise(Tool.test(samples[1], { order_id: "ord-1", amount: 2 })).then((out) =>
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

describe("Tool.jsonSchema: a field with a default", () => {
  const properties = (tool: Tool.Any) => (Tool.jsonSchema(tool).parameters as Json).properties as Json

  it("shows the default of an optionalWith field, and leaves the field out of required", () => {
    const tool = Tool.make("lookup", {
      description: "Look up.",
      input: {
        order_id: Schema.String,
        include_history: Schema.optionalWith(Schema.Boolean, { default: () => false })
      },
      timeout: "1 second"
    }, () => Effect.void)
    const parameters = Tool.jsonSchema(tool).parameters as Json
    assert.deepStrictEqual(parameters.required, ["order_id"])
    assert.deepStrictEqual(parameters.properties.include_history, { type: "boolean", default: false })
    assert.deepStrictEqual(parameters.properties.order_id, { type: "string" })
  })

  it("shows defaults at every depth: a nested struct, a struct in an array, a union member", () => {
    const tool = Tool.make("nested", {
      description: "Nested.",
      input: {
        filter: Schema.Struct({
          page: Schema.Struct({ size: Schema.optionalWith(Schema.Number, { default: () => 20 }) }),
          status: Schema.optionalWith(Schema.Literal("open", "closed"), { default: () => "open" as const })
        }),
        lines: Schema.Array(
          Schema.Struct({ sku: Schema.String, quantity: Schema.optionalWith(Schema.Int, { default: () => 1 }) })
        ),
        target: Schema.Union(
          Schema.Struct({ email: Schema.optionalWith(Schema.Boolean, { default: () => true }) }),
          Schema.String
        )
      },
      timeout: "1 second"
    }, () => Effect.void)
    const { filter, lines, target } = properties(tool)
    assert.deepStrictEqual(filter.properties.page.properties.size, { type: "number", default: 20 })
    assert.deepStrictEqual(filter.properties.page.required, [])
    assert.deepStrictEqual(filter.properties.status, { type: "string", enum: ["open", "closed"], default: "open" })
    assert.strictEqual(lines.items.properties.quantity.default, 1)
    assert.deepStrictEqual(lines.items.required, ["sku"])
    assert.deepStrictEqual(target.anyOf[0].properties.email, { type: "boolean", default: true })
  })

  it("shows the encoded value of a default: a Date as its ISO text, a number from a string as text, an array", () => {
    const tool = Tool.make("encoded", {
      description: "Encoded.",
      input: {
        since: Schema.optionalWith(Schema.Date, { default: () => new Date(Date.UTC(2026, 0, 2)) }),
        limit: Schema.optionalWith(Schema.NumberFromString, { default: () => 50 }),
        tags: Schema.optionalWith(Schema.Array(Schema.String), { default: () => ["new", "paid"] }),
        renamed: Schema.optionalWith(Schema.String, { default: () => "x" }).pipe(Schema.fromKey("wire_name")),
        decoding: Schema.optional(Schema.Number).pipe(Schema.withDecodingDefault(() => 3))
      },
      timeout: "1 second"
    }, () => Effect.void)
    const { decoding, limit, since, tags, wire_name } = properties(tool)
    assert.strictEqual(since.default, "2026-01-02T00:00:00.000Z")
    assert.strictEqual(limit.default, "50")
    assert.deepStrictEqual(tags.default, ["new", "paid"])
    assert.strictEqual(wire_name.default, "x")
    assert.strictEqual(decoding.default, 3)
  })

  it("keeps a default the user annotated (on the type or on the field) instead of the decoding default", () => {
    // Only the encoded side shows this one: its Type side is a Date.
    const Day = Schema.transform(Schema.String, Schema.DateFromSelf, {
      strict: true,
      decode: (text) => new Date(text),
      encode: (date) => date.toISOString().slice(0, 10)
    })
    const tool = Tool.make("annotated", {
      description: "Annotated.",
      input: {
        day: Schema.optionalWith(Day.annotations({ default: new Date(Date.UTC(2026, 0, 2)) }), {
          default: () => new Date(0)
        }),
        otherDay: Schema.optionalWith(Day, { default: () => new Date(0) }),
        onType: Schema.optionalWith(Schema.Number.annotations({ default: 7 }), { default: () => 1 }),
        onField: Schema.optionalWith(Schema.Number, { default: () => 1 }).annotations({ default: 9 }),
        viaJsonSchema: Schema.optionalWith(Schema.Number.annotations({ jsonSchema: { default: 5 } }), {
          default: () => 1
        }),
        plain: Schema.optionalWith(Schema.Number, { default: () => 1 })
      },
      timeout: "1 second"
    }, () => Effect.void)
    const { day, onField, onType, otherDay, plain, viaJsonSchema } = properties(tool)
    assert.deepStrictEqual([day.default, otherDay.default], ["2026-01-02", "1970-01-01"])
    assert.deepStrictEqual([onType.default, onField.default, viaJsonSchema.default, plain.default], [7, 9, 5, 1])
  })

  it("leaves out a default that is not JSON or that throws, and still makes the tool", () => {
    const tool = Tool.make("odd", {
      description: "Odd defaults.",
      input: {
        nan: Schema.optionalWith(Schema.Number, { default: () => NaN }),
        map: Schema.optionalWith(Schema.Unknown, { default: () => new Map([["a", 1]]) }),
        throws: Schema.optionalWith(Schema.String, {
          default: () => {
            throw new Error("no default today")
          }
        }),
        maybe: Schema.optionalWith(Schema.String, { as: "Option" }),
        fine: Schema.optionalWith(Schema.String, { default: () => "ok" })
      },
      timeout: "1 second"
    }, () => Effect.void)
    assert.isTrue(Either.isRight(tool.schemas))
    const { fine, map, maybe, nan, throws } = properties(tool)
    const shown = [nan, map, throws, maybe].map((property) => "default" in property)
    assert.deepStrictEqual(shown, [false, false, false, false])
    assert.deepStrictEqual(nan, { type: "number" })
    assert.strictEqual(fine.default, "ok")
  })
})

describe("Tool.test: a tool's body without the platform (design: Call context)", () => {
  it.effect("close_security_gate reads the context safely: closed outside a call, deferred with a context near its deadline", () =>
    Effect.gen(function*() {
      assert.strictEqual(yield* Testing.closed, "closed")
      assert.strictEqual(yield* Testing.deferred, "deferred")
      assert.strictEqual(yield* Effect.promise(Testing.compiles), "closed")
    }))

  it.effect("the default call's deadline is on the fiber's clock: under TestClock, remaining moves with the test's time", () =>
    Effect.gen(function*() {
      const left = Tool.make("left", { description: "Time left.", input: {}, timeout: "1 minute" }, (_, call) =>
        Effect.map(Effect.sleep("10 seconds"), () => call.remaining()))
      const running = yield* Effect.fork(Tool.test(left, {}))
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(running), 50_000)
    }))

  it.effect("an async body's rejection is a failure, a plain body's throw a defect; the call given is its second argument", () =>
    Effect.gen(function*() {
      const rejects = Tool.make("rejects", { description: "Rejects.", input: {}, timeout: "1 second" }, async () => {
        throw new RangeError("no")
      })
      const throws = Tool.make("throws", { description: "Throws.", input: {}, timeout: "1 second" }, (): number => {
        throw new TypeError("no")
      })
      const ids = Tool.make("ids", { description: "Ids.", input: {}, timeout: "1 second" }, (_, call) => `${call.taskId}/${call.toolCallId}`)
      assert.instanceOf(yield* Effect.flip(Tool.test(rejects, {})), RangeError)
      const exit = yield* Effect.exit(Tool.test(throws, {}))
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      assert.strictEqual(yield* Tool.test(ids, {}), "local/local")
      assert.strictEqual(yield* Tool.test(ids, {}, ToolContext.makeCall({ taskId: "t", toolCallId: "c" })), "t/c")
    }))
})
