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
  const rule = rules[provider]
  const root = tool.parameters as Json
  const defs = (typeof root.$defs === "object" && root.$defs !== null ? root.$defs : {}) as Record<string, Json>
  const outDefs: Record<string, Json> = {}
  const defRestorers = new Map<string, Restorer>()
  /** The definitions being rewritten now (a `$ref` to one of them is recursion). */
  const open = new Set<string>()

  const refName = (ref: unknown, field: string): string => {
    const match = typeof ref === "string" ? /^#\/\$defs\/(.+)$/.exec(ref) : null
    if (match === null || !(decodeURIComponent(match[1]!) in defs)) {
      throw new Refusal(field, `$ref ${JSON.stringify(ref)} is not one of the schema's own definitions`)
    }
    return decodeURIComponent(match[1]!)
  }

  const walk = (node: Json, field: string): { readonly schema: Json; readonly restorer: Restorer } => {
    if (typeof node !== "object" || node === null) return { schema: node, restorer: none }
    if (node.$ref !== undefined) {
      const name = refName(node.$ref, field)
      if (open.has(name) && rule.refs !== "keep") {
        throw new Refusal(field, `the schema refers to itself (${name}): ${provider}'s strict mode takes no recursive schema; bound the depth (a Struct per level)`)
      }
      if (rule.refs === "inline") {
        open.add(name)
        const inlined = walk(defs[name]!, field)
        open.delete(name)
        return inlined
      }
      if (!outDefs[name] && !open.has(name)) {
        open.add(name)
        const done = walk(defs[name]!, field)
        open.delete(name)
        outDefs[name] = done.schema
        defRestorers.set(name, done.restorer)
      }
      return { schema: { $ref: `#/$defs/${encodeURIComponent(name)}` }, restorer: { _tag: "Ref", name } }
    }
    const out: Json = {}
    let restorer: Restorer = none
    for (const [keyword, value] of Object.entries(node)) {
      if (keyword in refuseAlways) {
        const why = refuseAlways[keyword]!
        if (why !== "") throw new Refusal(field, why)
        continue
      }
      switch (keyword) {
        case "properties":
        case "required":
        case "additionalProperties":
          break
        case "items": {
          if (Array.isArray(value)) {
            throw new Refusal(field, "a tuple (items as a list) has no strict form; use a Schema.Struct with a field per position")
          }
          const items = walk(value as Json, `${field}[]`)
          out.items = items.schema
          restorer = { _tag: "Array", items: items.restorer }
          break
        }
        case "anyOf": {
          const branches = (value as Array<Json>).map((branch) => walk(branch, field))
          const nonNull = branches.filter((branch) => branch.schema.type !== "null")
          if (rule.openApi && nonNull.length < branches.length) {
            // OpenAPI: `nullable` on the schema, not a `null` branch.
            if (nonNull.length === 1) {
              Object.assign(out, nonNull[0]!.schema, { nullable: true })
            } else {
              out.anyOf = nonNull.map((branch) => branch.schema)
              out.nullable = true
            }
          } else {
            out.anyOf = branches.map((branch) => branch.schema)
          }
          restorer = { _tag: "AnyOf", branches: branches.map((branch) => branch.restorer) }
          break
        }
        case "const":
          if (rule.openApi) {
            if (typeof value === "string") out.enum = [value]
            else describe(out, "const", value)
          } else {
            out.const = value
          }
          break
        case "enum":
          if (rule.openApi && !(value as Array<unknown>).every((v) => typeof v === "string")) describe(out, "enum", value)
          else out.enum = value
          break
        case "type":
          if (Array.isArray(value)) {
            const types = value.filter((t) => t !== "null")
            if (types.length !== 1 || !rule.openApi) {
              if (!rule.openApi) out.type = value
              else throw new Refusal(field, `a value of several types (${value.join(", ")}) has no form in ${provider}'s schema; use Schema.Union`)
            } else {
              out.type = types[0]
              if (types.length < value.length) out.nullable = true
            }
          } else {
            out.type = value
          }
          break
        case "minItems":
          if (typeof value === "number" && value > rule.minItemsUpTo) describe(out, keyword, value)
          else if (rule.keeps.has(keyword)) out[keyword] = value
          break
        default:
          if (rule.keeps.has(keyword)) out[keyword] = value
          else describe(out, keyword, value)
      }
    }
    if (node.properties !== undefined || node.type === "object") {
      const additional = node.additionalProperties
      if (additional === true || (typeof additional === "object" && additional !== null)) {
        throw new Refusal(
          field === "" ? "(input)" : field,
          "a map (Schema.Record: any keys) has no strict form; use an array of { key, value } Structs, or a Struct with the keys named"
        )
      }
      const properties = (node.properties ?? {}) as Record<string, Json>
      const required = new Set((node.required ?? []) as Array<string>)
      const outProperties: Record<string, Json> = {}
      const fields = new Map<string, Restorer>()
      const nulled = new Set<string>()
      for (const [key, property] of Object.entries(properties)) {
        const path = field === "" ? key : `${field}.${key}`
        const done = walk(property, path)
        fields.set(key, done.restorer)
        if (rule.allRequired && !required.has(key) && !acceptsNull(done.schema, outDefs)) {
          nulled.add(key)
          outProperties[key] = { anyOf: [withoutDescription(done.schema), { type: "null" }] }
          if (done.schema.description !== undefined) {
            ;(outProperties[key] as Json).description = done.schema.description
          }
        } else {
          outProperties[key] = done.schema
        }
      }
      out.type = "object"
      out.properties = outProperties
      out.required = rule.allRequired ? Object.keys(properties) : [...required]
      if (rule.closeObjects) out.additionalProperties = false
      restorer = { _tag: "Object", nulled, fields }
    }
    return { schema: out, restorer }
  }

  try {
    const { restorer, schema } = walk(root, "")
    if (rule.refs !== "inline" && Object.keys(outDefs).length > 0) schema.$defs = outDefs
    const restore = rule.allRequired ? (args: unknown) => restoreWith(restorer, defRestorers, args) : (args: unknown) => args
    return Either.right({ parameters: schema, restore })
  } catch (error) {
    if (!(error instanceof Refusal)) throw error
    return Either.left(
      new ToolSchemaRefused({
        tool: tool.name,
        field: error.field === "" ? "(input)" : error.field,
        provider,
        message: `tool ${tool.name}: field ${error.field === "" ? "(input)" : error.field} cannot be sent to ${provider} ` +
          `in its strict mode: ${error.message}`
      })
    )
  }
}

/** The form already lets the field be `null` (the tool's Schema takes `null` there itself). */
const acceptsNull = (schema: Json, defs: Record<string, Json>): boolean => {
  if (schema.type === "null" || (Array.isArray(schema.type) && schema.type.includes("null"))) return true
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Array<Json>).some((branch) => acceptsNull(branch, defs))
  return false
}

/** The schema without its description, which goes on the `anyOf` around it. */
const withoutDescription = (schema: Json): Json => {
  const { description: _description, ...rest } = schema
  return rest
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
