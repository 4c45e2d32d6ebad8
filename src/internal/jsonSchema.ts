/**
 * The check of JSON values against a JSON Schema (ajv), for the tools whose schemas come as JSON
 * Schema (`Tool.fromJsonSchema`: a remote MCP server's tools, the platform's view of a served tool)
 * and a task's typed final output: each failure an issue at its path, in the words of the pipeline's
 * strict decode. A schema too deep or too big, or one ajv cannot compile, is refused with why.
 */
import type { Ajv, ErrorObject, Options as AjvOptions, ValidateFunction } from "ajv"
import { Either, Schema } from "effect"
import { createRequire } from "node:module"
import * as Json from "./util/json.js"

/**
 * ajv's constructor for a dialect, loaded on the first schema compiled (not when the package is
 * imported: most apps make their tools from Schemas).
 */
const ajvFor = (dialect: "07" | "2019-09" | "2020-12"): new(options: AjvOptions) => Ajv => {
  const require = createRequire(import.meta.url)
  if (dialect === "2020-12") return (require("ajv/dist/2020.js") as { Ajv2020: new(options: AjvOptions) => Ajv }).Ajv2020
  if (dialect === "2019-09") return (require("ajv/dist/2019.js") as { Ajv2019: new(options: AjvOptions) => Ajv }).Ajv2019
  return (require("ajv") as { Ajv: new(options: AjvOptions) => Ajv }).Ajv
}

/** A schema, at most: past either, it is refused (a tool with it cannot be called). */
const maxSchemaDepth = 64
const maxSchemaBytes = 256 * 1024


/** A JSON Schema object, as its author gave it. */
export type JsonSchemaObject = Record<string, unknown>

/**
 * The validators of tools made together (a server's listing): an ajv instance per dialect (the
 * schema's `$schema`: draft-07 unless it names 2019-09 or 2020-12), made on first use, and one
 * compiled function per distinct schema. Made afresh for each listing, so that a schema whose `$id`
 * comes back changed compiles, and the old ones go with the old tools.
 */
export class Validators {
  private readonly byDialect = new Map<string, Ajv>()
  private readonly bySchema = new Map<string, Either.Either<ValidateFunction, string>>()
  /** `refused`: why nothing of this listing is compiled. */
  constructor(private readonly refused?: string) {}
  compile(schema: JsonSchemaObject): Either.Either<ValidateFunction, string> {
    if (this.refused !== undefined) return Either.left(this.refused)
    // Bounded before anything walks it whole (the key's text, ajv): a schema a server made huge or deep
    // refuses that tool only, never the listing.
    if (Json.deeperThan(schema, maxSchemaDepth)) return Either.left(`it is nested deeper than ${maxSchemaDepth} levels`)
    const problem = Json.problemIn(schema, { maxDepth: maxSchemaDepth, maxBytes: maxSchemaBytes })
    if (problem !== undefined) return Either.left(problem)
    const text = Json.canonical(schema)
    const known = this.bySchema.get(text)
    if (known !== undefined) return known
    const declared = typeof schema.$schema === "string" ? schema.$schema : ""
    const dialect = declared.includes("2020-12") ? "2020-12" : declared.includes("2019-09") ? "2019-09" : "07"
    let ajv = this.byDialect.get(dialect)
    if (ajv === undefined) {
      // As the SDK's own validator: no check of the schema against its meta-schema (a draft-04 one compiles as
      // draft-07), and formats left to the server (the known ones need a package of their own).
      const options = {
        allErrors: true,
        strict: false,
        verbose: true,
        validateSchema: false,
        validateFormats: false,
        logger: false
      } as const
      ajv = new (ajvFor(dialect))(options)
      this.byDialect.set(dialect, ajv)
    }
    let compiled: Either.Either<ValidateFunction, string>
    try {
      compiled = Either.right(ajv.compile(schema))
    } catch (error) {
      compiled = Either.left(error instanceof Error ? error.message : String(error))
    }
    this.bySchema.set(text, compiled)
    return compiled
  }
}

/** A path segment of a JSON Pointer: an array index as a number (so that it reads `items[0]`), else the key. */
const pathOf = (pointer: string, value: unknown): Array<PropertyKey> => {
  const path: Array<PropertyKey> = []
  let at = value
  for (const raw of pointer === "" ? [] : pointer.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~")
    const index = Array.isArray(at) && /^\d+$/.test(key) ? Number(key) : undefined
    path.push(index ?? key)
    at = typeof at === "object" && at !== null ? (at as Record<PropertyKey, unknown>)[index ?? key] : undefined
  }
  return path
}

/** An issue of a value: where, and what was expected. */
interface Issue {
  readonly path: Array<PropertyKey>
  readonly message: string
}

/** One ajv error in the words of the pipeline's invalid-input texts: `<path>: <expected>, actual <value>`. */
const issueOf = (error: ErrorObject, value: unknown): Issue => {
  const path = pathOf(error.instancePath, value)
  const actual = `actual ${Json.preview(error.data, 60)}`
  const params = error.params as Record<string, unknown>
  switch (error.keyword) {
    case "additionalProperties": {
      const properties = (error.parentSchema as { properties?: unknown } | undefined)?.properties
      const known = typeof properties === "object" && properties !== null ? Object.keys(properties) : []
      const expected = known.length === 0 ? "" : `, expected: ${known.map((k) => JSON.stringify(k)).join(" | ")}`
      return { path: [...path, String(params.additionalProperty)], message: `is unexpected${expected}` }
    }
    case "unevaluatedProperties":
      return { path: [...path, String(params.unevaluatedProperty)], message: "is unexpected" }
    case "required":
      return { path: [...path, String(params.missingProperty)], message: "is missing" }
    case "type":
      return { path, message: `Expected ${String(params.type).split(",").join(" | ")}, ${actual}` }
    case "enum": {
      const allowed = Array.isArray(params.allowedValues) ? params.allowedValues : []
      return { path, message: `Expected ${allowed.map((v) => JSON.stringify(v)).join(" | ")}, ${actual}` }
    }
    case "const":
      return { path, message: `Expected ${JSON.stringify(params.allowedValue)}, ${actual}` }
    default:
      return { path, message: `${error.message ?? `fails ${error.keyword}`}, ${actual}` }
  }
}

/**
 * A Schema of any JSON value that `schema` accepts: ajv decides, each of its errors an issue at its
 * path. Its JSON Schema is `schema` itself, verbatim (Effect's `jsonSchema` annotation replaces the
 * generated one when it has a `type`, as MCP's `inputSchema` and `outputSchema` must).
 */
export const checkedBy = (validate: ValidateFunction, schema: JsonSchemaObject): Schema.Schema<unknown> =>
  Schema.Unknown.pipe(Schema.filter((value) => {
    if (validate(value)) return true
    const seen = new Set<string>()
    const issues: Array<Issue> = []
    for (const error of validate.errors ?? []) {
      const issue = issueOf(error, value)
      const key = JSON.stringify([issue.path.map(String), issue.message])
      if (seen.has(key)) continue
      seen.add(key)
      issues.push(issue)
    }
    return issues.length === 0 ? false : issues
  }, { jsonSchema: schema }))

/**
 * A Schema of the JSON values a JSON Schema accepts, or why it cannot be compiled: the platform checks
 * a task's typed final output with it (design: The model side).
 */
export const jsonSchemaChecked = (schema: JsonSchemaObject): Either.Either<Schema.Schema<unknown>, string> =>
  Either.map(new Validators().compile(schema), (validate) => checkedBy(validate, schema))

/**
 * The input Schema of a tool whose input JSON Schema could not be compiled (`described`, such as "the
 * server's inputSchema"): nothing passes, so the tool cannot be called (its input would go on
 * unchecked); `Toolkit.make` reports it too.
 */
export const refusing = (described: string, reason: string): Schema.Schema<unknown> =>
  Schema.Unknown.pipe(Schema.filter(() => `${described} cannot be checked (${reason}); the tool cannot be called`, {
    jsonSchema: { type: "object" }
  }))
