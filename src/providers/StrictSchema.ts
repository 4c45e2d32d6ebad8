/**
 * The JSON Schema each provider accepts for a tool's input in its strict mode (design: What the model
 * sees). A tool's `parameters` are Effect's rendering of its input Schema (JSON Schema draft-07,
 * objects closed, definitions under `$defs`); each provider takes a narrower form, and a schema
 * outside it is a 400 at the first request (or, without strict mode, arguments the Schema refuses).
 * `strictForm` rewrites a tool's schema into that form once, when the tool is offered to the model,
 * and refuses what no form of that provider can express with a message naming the tool, the field,
 * the provider and the fix.
 *
 * What each form does:
 *
 * | provider | objects | optional fields | constraints it refuses | definitions (`$ref`) |
 * |---|---|---|---|---|
 * | `openai`, `openrouter` | closed at every depth | required, `null` allowed (a `null` the model sends for one is removed again: `restore`) | `minLength`, `maxLength`, `default`, `uniqueItems`, ... moved into the description | kept, recursion too |
 * | `anthropic`, `bedrock` | closed at every depth | kept optional | numeric bounds, string lengths, `maxItems`, `minItems` above 1 moved into the description | kept; recursion refused |
 * | `google` | `additionalProperties` left out (the OpenAPI subset has none) | kept optional | `exclusiveMinimum`/`Maximum`, `multipleOf`, `uniqueItems`, enums of numbers moved into the description; `const` sent as a one-value `enum`; `null` as `nullable` | inlined; recursion refused |
 *
 * Refused by every form: a map (`Schema.Record`: an object with `additionalProperties` of a
 * schema), a tuple (`items` as a list), `allOf`/`oneOf`/`not`/`if`, `patternProperties`.
 */
import { Either, Schema } from "effect"

/** The providers with a strict form, by the names our model strings use. */
export type Provider = "openai" | "openrouter" | "anthropic" | "bedrock" | "google"

/** A tool's input schema that the provider's strict mode cannot take, in any form. */
export class ToolSchemaRefused extends Schema.TaggedError<ToolSchemaRefused>("agent-tools/ToolSchemaRefused")(
  "ToolSchemaRefused",
  { tool: Schema.String, field: Schema.String, provider: Schema.String, message: Schema.String }
) {}

/** The form a provider receives, and how to bring the arguments it sends back to the tool's own form. */
export interface StrictForm {
  readonly parameters: Record<string, unknown>
  /**
   * The arguments as the tool's Schema expects them: for a form that made optional fields required
   * with `null` allowed, a `null` in such a field is removed again (the field is absent, as the
   * Schema has it). The identity for the other forms.
   */
  readonly restore: (args: unknown) => unknown
}

type Json = Record<string, unknown>

interface Rules {
  /** Every property required; an optional one takes `null` as well (OpenAI's strict mode). */
  readonly allRequired: boolean
  /** Keywords kept as they are; any other (a constraint) goes into the description. */
  readonly keeps: ReadonlySet<string>
  /** `additionalProperties: false` written on each object (else left out). */
  readonly closeObjects: boolean
  /** `$ref`: kept with its `$defs` (recursion allowed), kept (recursion refused), or inlined (recursion refused). */
  readonly refs: "keep" | "keep-not-recursive" | "inline"
  /** The largest `minItems` the form takes. */
  readonly minItemsUpTo: number
  /** OpenAPI's spelling: `nullable: true`, `const` as a one-value `enum`, enums of strings only, one type per schema. */
  readonly openApi: boolean
}

const structural = ["type", "properties", "required", "additionalProperties", "items", "enum", "anyOf", "description", "title", "$ref"]

const openAi: Rules = {
  allRequired: true,
  keeps: new Set([...structural, "const", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems"]),
  closeObjects: true,
  refs: "keep",
  minItemsUpTo: Number.POSITIVE_INFINITY,
  openApi: false
}

const anthropic: Rules = {
  allRequired: false,
  keeps: new Set([...structural, "const", "default", "format", "pattern", "minItems"]),
  closeObjects: true,
  refs: "keep-not-recursive",
  minItemsUpTo: 1,
  openApi: false
}

const google: Rules = {
  allRequired: false,
  keeps: new Set([...structural, "format", "default", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"]),
  closeObjects: false,
  refs: "inline",
  minItemsUpTo: Number.POSITIVE_INFINITY,
  openApi: true
}

const rules: Record<Provider, Rules> = { openai: openAi, openrouter: openAi, anthropic, bedrock: anthropic, google }

/** True for the names `strictForm` has a form for. */
export const isProvider = (name: string | undefined): name is Provider => name !== undefined && name in rules

/** What `restore` does at one node of the form: which nulls to take out, and where to look further. */
type Restorer =
  | { readonly _tag: "Object"; readonly nulled: ReadonlySet<string>; readonly fields: ReadonlyMap<string, Restorer> }
  | { readonly _tag: "Array"; readonly items: Restorer }
  | { readonly _tag: "AnyOf"; readonly branches: ReadonlyArray<Restorer> }
  | { readonly _tag: "Ref"; readonly name: string }
  | { readonly _tag: "None" }

const none: Restorer = { _tag: "None" }

class Refusal {
  constructor(readonly field: string, readonly message: string) {}
}

/** Adds a constraint the form cannot carry to the description, so that the model still reads it. */
const describe = (out: Json, keyword: string, value: unknown): void => {
  const said = `${keyword}: ${JSON.stringify(value)}`
  out.description = typeof out.description === "string" && out.description !== "" ? `${out.description} (${said})` : said
}

const refuseAlways: Record<string, string> = {
  allOf: "allOf (an intersection) has no strict form; use one Schema.Struct with the fields of both",
  oneOf: "oneOf has no strict form; use Schema.Union (anyOf)",
  not: "not has no strict form; check the value in the tool instead",
  if: "if/then/else has no strict form; use Schema.Union of the cases",
  patternProperties: "patternProperties (keys matching a pattern) has no strict form; use an array of { key, value }",
  additionalItems: "",
  $schema: "",
  $id: "",
  $comment: "",
  examples: "",
  $defs: ""
}

/**
 * The provider's strict form of a tool's input schema, or why it has none. Pure, and cheap enough
 * to run when a toolkit is offered; the form is the same for the same schema.
 */
export const strictForm = (
  provider: Provider,
  tool: { readonly name: string; readonly parameters: unknown }
): Either.Either<StrictForm, ToolSchemaRefused> => {
  const former = new Former(provider, tool.parameters as Json)
  try {
    const { restorer, schema } = former.walk(former.root, "")
    if (former.rule.refs !== "inline" && Object.keys(former.outDefs).length > 0) schema.$defs = former.outDefs
    const restore = former.rule.allRequired
      ? (args: unknown) => restoreWith(restorer, former.defRestorers, args)
      : (args: unknown) => args
    return Either.right({ parameters: schema, restore })
  } catch (error) {
    if (!(error instanceof Refusal)) throw error
    const field = error.field === "" ? "(input)" : error.field
    return Either.left(
      new ToolSchemaRefused({
        tool: tool.name,
        field,
        provider,
        message: `tool ${tool.name}: field ${field} cannot be sent to ${provider} in its strict mode: ${error.message}`
      })
    )
  }
}

interface Formed {
  readonly schema: Json
  readonly restorer: Restorer
}

/** One schema's rewriting: its definitions, those rewritten so far, and those being rewritten now. */
class Former {
  readonly rule: Rules
  readonly defs: Record<string, Json>
  readonly outDefs: Record<string, Json> = {}
  readonly defRestorers = new Map<string, Restorer>()
  /** The definitions being rewritten now (a `$ref` to one of them is recursion). */
  private readonly open = new Set<string>()

  constructor(readonly provider: Provider, readonly root: Json) {
    this.rule = rules[provider]
    this.defs = (typeof root.$defs === "object" && root.$defs !== null ? root.$defs : {}) as Record<string, Json>
  }

  walk(node: Json, field: string): Formed {
    if (typeof node !== "object" || node === null) return { schema: node, restorer: none }
    if (node.$ref !== undefined) return this.ref(node.$ref, field)
    const out: Json = {}
    let restorer: Restorer = none
    for (const [keyword, value] of Object.entries(node)) {
      restorer = this.keyword(keyword, value, field, out) ?? restorer
    }
    if (node.properties !== undefined || node.type === "object") restorer = this.object(node, field, out)
    return { schema: out, restorer }
  }

  private ref(ref: unknown, field: string): Formed {
    const match = typeof ref === "string" ? /^#\/\$defs\/(.+)$/.exec(ref) : null
    const name = match === null ? "" : decodeURIComponent(match[1]!)
    if (!(name in this.defs)) throw new Refusal(field, `$ref ${JSON.stringify(ref)} is not one of the schema's own definitions`)
    if (this.open.has(name) && this.rule.refs !== "keep") {
      throw new Refusal(
        field,
        `the schema refers to itself (${name}): ${this.provider}'s strict mode takes no recursive schema; bound the depth (a Struct per level)`
      )
    }
    if (this.rule.refs === "inline") return this.inOpen(name, () => this.walk(this.defs[name]!, field))
    if (this.outDefs[name] === undefined && !this.open.has(name)) {
      const done = this.inOpen(name, () => this.walk(this.defs[name]!, field))
      this.outDefs[name] = done.schema
      this.defRestorers.set(name, done.restorer)
    }
    return { schema: { $ref: `#/$defs/${encodeURIComponent(name)}` }, restorer: { _tag: "Ref", name } }
  }

  private inOpen<A>(name: string, f: () => A): A {
    this.open.add(name)
    try {
      return f()
    } finally {
      this.open.delete(name)
    }
  }

  /** One keyword of a node into `out`; the node's restorer when the keyword gives it one. */
  private keyword(keyword: string, value: unknown, field: string, out: Json): Restorer | undefined {
    const { openApi } = this.rule
    if (keyword in refuseAlways) {
      const why = refuseAlways[keyword]!
      if (why !== "") throw new Refusal(field, why)
      return undefined
    }
    switch (keyword) {
      case "properties":
      case "required":
      case "additionalProperties":
        return undefined
      case "items": {
        if (Array.isArray(value)) {
          throw new Refusal(field, "a tuple (items as a list) has no strict form; use a Schema.Struct with a field per position")
        }
        const items = this.walk(value as Json, `${field}[]`)
        out.items = items.schema
        return { _tag: "Array", items: items.restorer }
      }
      case "anyOf":
        return this.anyOf(value as Array<Json>, field, out)
      case "const":
        if (!openApi) out.const = value
        else if (typeof value === "string") out.enum = [value]
        else describe(out, "const", value)
        return undefined
      case "enum":
        if (openApi && !(value as Array<unknown>).every((v) => typeof v === "string")) describe(out, "enum", value)
        else out.enum = value
        return undefined
      case "type":
        this.type(value, field, out)
        return undefined
      case "minItems":
        if (typeof value === "number" && value > this.rule.minItemsUpTo) describe(out, keyword, value)
        else out[keyword] = value
        return undefined
      default:
        if (this.rule.keeps.has(keyword)) out[keyword] = value
        else describe(out, keyword, value)
        return undefined
    }
  }

  private anyOf(value: Array<Json>, field: string, out: Json): Restorer {
    const branches = value.map((branch) => this.walk(branch, field))
    const nonNull = branches.filter((branch) => branch.schema.type !== "null")
    if (this.rule.openApi && nonNull.length < branches.length) {
      // OpenAPI: `nullable` on the schema, not a `null` branch.
      if (nonNull.length === 1) Object.assign(out, nonNull[0]!.schema)
      else out.anyOf = nonNull.map((branch) => branch.schema)
      out.nullable = true
    } else {
      out.anyOf = branches.map((branch) => branch.schema)
    }
    return { _tag: "AnyOf", branches: branches.map((branch) => branch.restorer) }
  }

  private type(value: unknown, field: string, out: Json): void {
    if (!Array.isArray(value) || !this.rule.openApi) {
      out.type = value
      return
    }
    const types = value.filter((t) => t !== "null")
    if (types.length !== 1) {
      throw new Refusal(field, `a value of several types (${value.join(", ")}) has no form in ${this.provider}'s schema; use Schema.Union`)
    }
    out.type = types[0]
    if (types.length < value.length) out.nullable = true
  }

  /** An object node's properties, `required` and closing, by the rules; its restorer. */
  private object(node: Json, field: string, out: Json): Restorer {
    const additional = node.additionalProperties
    if (additional === true || (typeof additional === "object" && additional !== null)) {
      throw new Refusal(
        field,
        "a map (Schema.Record: any keys) has no strict form; use an array of { key, value } Structs, or a Struct with the keys named"
      )
    }
    const properties = (node.properties ?? {}) as Record<string, Json>
    const required = new Set((node.required ?? []) as Array<string>)
    const outProperties: Record<string, Json> = {}
    const fields = new Map<string, Restorer>()
    const nulled = new Set<string>()
    for (const [key, property] of Object.entries(properties)) {
      const done = this.walk(property, field === "" ? key : `${field}.${key}`)
      fields.set(key, done.restorer)
      if (this.rule.allRequired && !required.has(key) && !acceptsNull(done.schema)) {
        nulled.add(key)
        const { description, ...rest } = done.schema
        outProperties[key] = { anyOf: [rest, { type: "null" }], ...(description === undefined ? {} : { description }) }
      } else {
        outProperties[key] = done.schema
      }
    }
    out.type = "object"
    out.properties = outProperties
    out.required = this.rule.allRequired ? Object.keys(properties) : [...required]
    if (this.rule.closeObjects) out.additionalProperties = false
    return { _tag: "Object", nulled, fields }
  }
}

/** The form already lets the field be `null` (the tool's Schema takes `null` there itself). */
const acceptsNull = (schema: Json): boolean => {
  if (schema.type === "null" || (Array.isArray(schema.type) && schema.type.includes("null"))) return true
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Array<Json>).some(acceptsNull)
  return false
}

const restoreWith = (restorer: Restorer, defs: ReadonlyMap<string, Restorer>, value: unknown): unknown => {
  switch (restorer._tag) {
    case "None":
      return value
    case "Ref":
      return restoreWith(defs.get(restorer.name) ?? none, defs, value)
    case "Array":
      return Array.isArray(value) ? value.map((item) => restoreWith(restorer.items, defs, item)) : value
    case "AnyOf":
      // Each branch that fits the value's shape takes out its own nulls; the decoding after says which branch it is.
      return restorer.branches.reduce((current, branch) => fits(branch, defs, current) ? restoreWith(branch, defs, current) : current, value)
    case "Object": {
      if (typeof value !== "object" || value === null || Array.isArray(value)) return value
      const out: Record<string, unknown> = {}
      for (const [key, field] of Object.entries(value)) {
        if (field === null && restorer.nulled.has(key)) continue
        const inner = restorer.fields.get(key)
        out[key] = inner === undefined ? field : restoreWith(inner, defs, field)
      }
      return out
    }
  }
}

const fits = (restorer: Restorer, defs: ReadonlyMap<string, Restorer>, value: unknown): boolean => {
  switch (restorer._tag) {
    case "Ref":
      return fits(defs.get(restorer.name) ?? none, defs, value)
    case "Object":
      return typeof value === "object" && value !== null && !Array.isArray(value) &&
        Object.keys(value).every((key) => restorer.fields.has(key))
    case "Array":
      return Array.isArray(value)
    default:
      return false
  }
}

/** A request's tools in a provider's form, and how to bring a call's arguments back to each tool's own. */
export interface PreparedTools {
  readonly tools: ReadonlyArray<{ readonly name: string; readonly description: string; readonly parameters: unknown }>
  /** The call's arguments (JSON text) as its tool's Schema expects them. */
  readonly restore: (name: string, args: string) => string
}

/**
 * A provider's tools, prepared once per toolkit (a request's `tools` is the toolkit's list, the same
 * array every turn): each tool's schema in the provider's strict form where it has one. Where it has
 * none, `required` (strict mode on, or a provider with no other form) refuses the toolkit with the
 * first tool's `ToolSchemaRefused`; otherwise that tool goes as Effect renders it, which the
 * provider's non-strict mode takes.
 */
export const preparer = (
  provider: Provider,
  required: boolean
): (tools: ReadonlyArray<{ readonly name: string; readonly description: string; readonly parameters: unknown }>) =>
  Either.Either<PreparedTools, ToolSchemaRefused> => {
  const done = new WeakMap<object, Either.Either<PreparedTools, ToolSchemaRefused>>()
  return (tools) => {
    let prepared = done.get(tools)
    if (prepared === undefined) {
      prepared = prepare(provider, required, tools)
      done.set(tools, prepared)
    }
    return prepared
  }
}

const prepare = (
  provider: Provider,
  required: boolean,
  tools: ReadonlyArray<{ readonly name: string; readonly description: string; readonly parameters: unknown }>
): Either.Either<PreparedTools, ToolSchemaRefused> => {
  const formed: Array<{ readonly name: string; readonly description: string; readonly parameters: unknown }> = []
  const restorers = new Map<string, (args: unknown) => unknown>()
  for (const tool of tools) {
    const form = strictForm(provider, tool)
    if (Either.isLeft(form)) {
      if (required) return Either.left(form.left)
      formed.push(tool)
      continue
    }
    formed.push({ ...tool, parameters: form.right.parameters })
    if (rules[provider].allRequired) restorers.set(tool.name, form.right.restore)
  }
  return Either.right({
    tools: formed,
    restore: (name, args) => {
      const restore = restorers.get(name)
      if (restore === undefined) return args
      try {
        return JSON.stringify(restore(JSON.parse(args)))
      } catch {
        // Not JSON: the pipeline's decoding says so, naming the tool.
        return args
      }
    }
  })
}

