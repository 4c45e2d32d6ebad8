/**
 * The schema form each provider's strict mode accepts (src/providers/StrictSchema.ts), checked against
 * each provider's documented rules, written out here as checkers: a tool with nested optional objects,
 * unions, defaults and constraints goes out in each form; arguments a model sends in that form
 * validate against it (ajv) and, restored, decode with the tool's own Schema; what no form can express
 * is refused naming the tool, the field and the provider.
 */
import { describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Either, Schema } from "effect"
import { Tool } from "../src/index.js"
import * as StrictSchema from "../src/providers/StrictSchema.js"
import { Category } from "./support/recursiveSchema.js"

type Json = Record<string, unknown>

const Address = Schema.Struct({
  street: Schema.String.pipe(Schema.minLength(1)),
  zip: Schema.optional(Schema.String.pipe(Schema.pattern(/^\d{5}$/))),
  note: Schema.optional(Schema.Struct({ text: Schema.String, urgent: Schema.optional(Schema.Boolean) }))
})

const ship = Tool.make("ship", {
  description: "Ships a parcel.",
  input: {
    to: Address,
    billing: Schema.optional(Address),
    mode: Schema.Union(Schema.Literal("air"), Schema.Struct({ sea: Schema.Number.pipe(Schema.between(1, 9)) })),
    count: Schema.optionalWith(Schema.Number.pipe(Schema.int(), Schema.positive()), { default: () => 1 }),
    items: Schema.Array(Schema.Struct({ sku: Schema.String, gift: Schema.optional(Schema.Boolean) })).pipe(Schema.minItems(2)),
    when: Schema.NullOr(Schema.String),
    level: Schema.Literal(1, 2, 3)
  },
  output: Schema.String,
timeout: "5 seconds"
}, () => "done")

const parameters = Tool.jsonSchema(ship).parameters as unknown as Json

/** Every object node of a schema (`$defs` included), with its path. */
const objects = (schema: unknown, path = ""): Array<{ readonly path: string; readonly node: Json }> => {
  if (typeof schema !== "object" || schema === null) return []
  if (Array.isArray(schema)) return schema.flatMap((s, i) => objects(s, `${path}[${i}]`))
  const node = schema as Json
  const here = node.type === "object" || node.properties !== undefined ? [{ path, node }] : []
  return [...here, ...Object.entries(node).flatMap(([k, v]) => objects(v, `${path}/${k}`))]
}

/** Every schema node's keywords (the names under `properties` and `$defs` are not keywords). */
const keywords = (schema: unknown): Set<string> => {
  const found = new Set<string>()
  const visit = (node: unknown, names: boolean): void => {
    if (typeof node !== "object" || node === null) return
    if (Array.isArray(node)) return node.forEach((n) => visit(n, false))
    for (const [k, v] of Object.entries(node)) {
      if (!names) found.add(k)
      if (k === "enum" || k === "const" || k === "default" || k === "required") continue
      visit(v, !names && (k === "properties" || k === "$defs"))
    }
  }
  visit(schema, false)
  return found
}

/**
 * The documented rules, each provider's own: OpenAI's Structured Outputs "supported schemas" (every
 * object `additionalProperties: false` and every property in `required`; optional as a union with
 * null; no `minLength`/`maxLength`/`default`...); Anthropic's strict tool use "JSON Schema
 * limitations" (objects closed; no numeric bounds, no string lengths, `minItems` 0 or 1 only, no
 * recursion); Gemini's function declaration `Schema` (the OpenAPI 3.0 subset: no
 * `additionalProperties`, `$ref`, `const` or `null` type; `nullable` instead; enums of strings).
 */
const documented: Record<"openai" | "anthropic" | "google", (form: Json) => Array<string>> = {
  openai: (form) => {
    const allowed = new Set(["type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "description", "title", "$ref", "$defs", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"])
    return [
      ...[...keywords(form)].filter((k) => !allowed.has(k)).map((k) => `keyword ${k}`),
      ...objects(form).filter(({ node }) => node.additionalProperties !== false).map(({ path }) => `${path} not closed`),
      ...objects(form).filter(({ node }) =>
        JSON.stringify(Object.keys(node.properties as Json).sort()) !== JSON.stringify([...(node.required as Array<string>)].sort())
      ).map(({ path }) => `${path}: not every property required`)
    ]
  },
  anthropic: (form) => {
    const refused = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "maxItems", "uniqueItems"]
    const minItems: Array<string> = []
    JSON.stringify(form, (k, v) => {
      if (k === "minItems" && typeof v === "number" && v > 1) minItems.push(`minItems ${v}`)
      return v
    })
    return [
      ...[...keywords(form)].filter((k) => refused.includes(k)).map((k) => `keyword ${k}`),
      ...minItems,
      ...objects(form).filter(({ node }) => node.additionalProperties !== false).map(({ path }) => `${path} not closed`)
    ]
  },
  google: (form) => {
    const allowed = new Set(["type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum"])
    const problems = [...keywords(form)].filter((k) => !allowed.has(k)).map((k) => `keyword ${k}`)
    JSON.stringify(form, (k, v) => {
      if (k === "type" && (v === "null" || Array.isArray(v))) problems.push(`type ${JSON.stringify(v)}`)
      if (k === "enum" && Array.isArray(v) && v.some((e) => typeof e !== "string")) problems.push(`enum ${JSON.stringify(v)}`)
      return v
    })
    return problems
  }
}

const formOf = (provider: StrictSchema.Provider, tool: { readonly name: string; readonly parameters: unknown } = { name: "ship", parameters }) => {
  const form = StrictSchema.strictForm(provider, tool)
  if (Either.isLeft(form)) throw new Error(form.left.message)
  return form.right
}

/** Arguments a model sends in OpenAI's form: every field present, `null` for the optional ones it leaves out. */
const openAiArgs = {
  to: { street: "Main St 1", zip: null, note: { text: "ring twice", urgent: null } },
  billing: null,
  mode: { sea: 3 },
  count: null,
  items: [{ sku: "a", gift: null }, { sku: "b", gift: true }],
  when: null,
  level: 2
}

describe("StrictSchema: the form each provider's strict mode accepts", () => {
  it("Effect's own rendering breaks each provider's rules (what the forms are for)", () => {
    expect(documented.openai(parameters)).not.toEqual([])
    expect(documented.anthropic(parameters)).not.toEqual([])
    expect(documented.google(parameters)).not.toEqual([])
  })

  for (const provider of ["openai", "openrouter", "anthropic", "bedrock", "google"] as const) {
    it(`${provider}: nested optional objects, unions, defaults and constraints go out in its documented form`, () => {
      const { parameters: form } = formOf(provider)
      const rules = provider === "openrouter" ? documented.openai : provider === "bedrock" ? documented.anthropic : documented[provider]
      expect(rules(form)).toEqual([])
      // A constraint the form cannot carry is still read by the model, in the description.
      const street = ((form.properties as Json).to as Json).properties as Json
      if (provider === "openai" || provider === "openrouter" || provider === "anthropic" || provider === "bedrock") {
        expect((street.street as Json).description).toMatch(/minLength: 1/)
      }
      if (provider !== "google") expect(JSON.stringify(form)).toMatch(/minItems: 2|"minItems":2/)
    })
  }

  it("openai: the model's nulls validate against the form and, restored, decode with the tool's Schema", () => {
    const { parameters: form, restore } = formOf("openai")
    const ajv = new Ajv({ strict: false })
    expect(ajv.validate(form, openAiArgs), JSON.stringify(ajv.errors)).toBe(true)
    // Without the restore, the tool's Schema refuses the nulls.
    const decode = Schema.decodeUnknownEither(ship.input)
    expect(Either.isLeft(decode(openAiArgs))).toBe(true)
    const restored = restore(openAiArgs)
    expect(restored).toEqual({
      to: { street: "Main St 1", note: { text: "ring twice" } },
      mode: { sea: 3 },
      items: [{ sku: "a" }, { sku: "b", gift: true }],
      when: null,
      level: 2
    })
    const decoded = decode(restored)
    expect(Either.isRight(decoded) ? decoded.right.count : "refused").toBe(1)
  })

  it("the other forms keep optional fields optional: arguments without them validate, and restore changes nothing", () => {
    const args = { to: { street: "x" }, mode: "air", items: [{ sku: "a" }, { sku: "b" }], when: "today", level: 1 }
    for (const provider of ["anthropic", "bedrock", "google"] as const) {
      const { parameters: form, restore } = formOf(provider)
      const ajv = new Ajv({ strict: false })
      expect(ajv.validate(form, args), `${provider}: ${JSON.stringify(ajv.errors)}`).toBe(true)
      expect(restore(args)).toBe(args)
    }
  })

  it("a recursive schema: kept as $ref for openai, refused for anthropic and google naming tool, field and provider", () => {
    const tree = Tool.make("file", { description: "Files it.", input: { under: Category }, output: Schema.String, timeout: "5 seconds" }, () => "ok")
    const tool = { name: "file", parameters: Tool.jsonSchema(tree).parameters }
    const openai = formOf("openai", tool)
    expect(documented.openai(openai.parameters)).toEqual([])
    const ajv = new Ajv({ strict: false })
    expect(ajv.validate(openai.parameters, { under: { name: "a", sub: [{ name: "b", sub: [] }] } })).toBe(true)
    for (const provider of ["anthropic", "google"] as const) {
      const refused = StrictSchema.strictForm(provider, tool)
      expect(Either.isLeft(refused)).toBe(true)
      if (Either.isLeft(refused)) {
        expect(refused.left).toMatchObject({ _tag: "ToolSchemaRefused", tool: "file", provider })
        // Where it refers to itself: the field inside the first level.
        expect(refused.left.field).toBe("under.sub[].sub[]")
        expect(refused.left.message).toMatch(new RegExp(`^tool file: field under\\.sub\\[\\]\\.sub\\[\\] cannot be sent to ${provider} in its strict mode: the schema refers to itself \\(Category\\)`))
      }
    }
  })

  it("a map or a tuple has no form in any provider: refused, with the fix", () => {
    const withMap = Tool.make("tag", {
      description: "Tags.",
      input: { labels: Schema.Record({ key: Schema.String, value: Schema.String }) },
      output: Schema.String,
    timeout: "5 seconds"
    }, () => "ok")
    const withTuple = Tool.make("move", {
      description: "Moves.",
      input: { to: Schema.Struct({ at: Schema.Tuple(Schema.Number, Schema.Number) }) },
      output: Schema.String,
    timeout: "5 seconds"
    }, () => "ok")
    for (const provider of ["openai", "openrouter", "anthropic", "bedrock", "google"] as const) {
      const map = StrictSchema.strictForm(provider, { name: "tag", parameters: Tool.jsonSchema(withMap).parameters })
      expect(Either.isLeft(map) && map.left.message).toBe(
        `tool tag: field labels cannot be sent to ${provider} in its strict mode: a map (Schema.Record: any keys) has no strict form; ` +
          "use an array of { key, value } Structs, or a Struct with the keys named"
      )
      const tuple = StrictSchema.strictForm(provider, { name: "move", parameters: Tool.jsonSchema(withTuple).parameters })
      expect(Either.isLeft(tuple) && tuple.left.field).toBe("to.at")
      expect(Either.isLeft(tuple) && tuple.left.message).toMatch(/a tuple \(items as a list\) has no strict form; use a Schema\.Struct/)
    }
  })

  it("google: const as a one-value enum, null as nullable, definitions inlined, no additionalProperties", () => {
    const picked = Tool.make("pick", {
      description: "Picks.",
      input: { kind: Schema.Literal("one"), maybe: Schema.NullOr(Schema.Number), at: Address.annotations({ identifier: "Address" }) },
      output: Schema.String,
    timeout: "5 seconds"
    }, () => "ok")
    const { parameters: form } = formOf("google", { name: "pick", parameters: Tool.jsonSchema(picked).parameters })
    const properties = form.properties as Json
    expect(properties.kind).toEqual({ type: "string", enum: ["one"] })
    expect(properties.maybe).toEqual({ type: "number", nullable: true })
    expect((properties.at as Json).type).toBe("object")
    expect(JSON.stringify(form)).not.toMatch(/\$ref|\$defs|additionalProperties/)
  })
})
