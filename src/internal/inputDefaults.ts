/**
 * What the model sees of a tool's defaults (design: What the model sees): the encoded side of an input
 * Schema with each field that decoding fills when it is missing annotated with that default, so that
 * its JSON Schema shows it. `Tool` renders its input through it.
 */
import { JSONSchema, Option, ParseResult, Schema, SchemaAST as AST } from "effect"

/**
 * `ast` with each field that decoding fills when it is missing (`optionalWith(..., { default })`,
 * `withDecodingDefault`) annotated with that default, at every depth, so Effect shows it encoded as the
 * property's `default` (design: What the model sees). Only the encoded side is walked: that is what is rendered.
 */
const withDefaults = (ast: AST.AST, seen: Map<AST.AST, AST.AST>): AST.AST => {
  switch (ast._tag) {
    case "TypeLiteral": {
      const fields = ast.propertySignatures.map((ps) => withType(ps, withDefaults(ps.type, seen)))
      const records = ast.indexSignatures.map((is) => {
        const type = withDefaults(is.type, seen)
        return type === is.type ? is : new AST.IndexSignature(is.parameter, type, is.isReadonly)
      })
      return same(fields, ast.propertySignatures) && same(records, ast.indexSignatures)
        ? ast
        : new AST.TypeLiteral(fields, records, ast.annotations)
    }
    case "Transformation": {
      let from = withDefaults(ast.from, seen)
      if (ast.transformation._tag === "TypeLiteralTransformation" && AST.isTypeLiteral(from)) {
        from = withFilledKeys(from, ast.transformation.propertySignatureTransformations)
      }
      return from === ast.from ? ast : new AST.Transformation(from, ast.to, ast.transformation, ast.annotations)
    }
    case "Union": {
      const types = ast.types.map((type) => withDefaults(type, seen))
      return same(types, ast.types) ? ast : AST.Union.make(types, ast.annotations)
    }
    case "TupleType": {
      const elements = ast.elements.map((e) => {
        const type = withDefaults(e.type, seen)
        return type === e.type ? e : new AST.OptionalType(type, e.isOptional, e.annotations)
      })
      const rest = ast.rest.map((r) => {
        const type = withDefaults(r.type, seen)
        return type === r.type ? r : new AST.Type(type, r.annotations)
      })
      return same(elements, ast.elements) && same(rest, ast.rest)
        ? ast
        : new AST.TupleType(elements, rest, ast.isReadonly, ast.annotations)
    }
    case "Refinement": {
      const from = withDefaults(ast.from, seen)
      return from === ast.from ? ast : new AST.Refinement(from, ast.filter, ast.annotations)
    }
    case "Suspend": {
      // A recursive Schema comes back to the same Suspend: the one made for it the first time ends the walk.
      const known = seen.get(ast)
      if (known !== undefined) return known
      let inner: AST.AST | undefined
      const out = new AST.Suspend(() => inner ??= withDefaults(ast.f(), seen), ast.annotations)
      seen.set(ast, out)
      return out
    }
    default:
      return ast
  }
}

// Showing defaults is a courtesy: a Schema this walk cannot rebuild is rendered as it is.
export const withDefaultsOrSame = (ast: AST.AST): AST.AST => {
  try {
    return withDefaults(ast, new Map())
  } catch {
    return ast
  }
}

const same = <A>(next: ReadonlyArray<A>, prev: ReadonlyArray<A>): boolean => next.every((a, i) => a === prev[i])

const withType = (ps: AST.PropertySignature, type: AST.AST): AST.PropertySignature =>
  type === ps.type ? ps : new AST.PropertySignature(ps.name, type, ps.isOptional, ps.isReadonly, ps.annotations)

/** `from` with a `default` annotation on each key that `transformations` fill when it is missing. */
const withFilledKeys = (
  from: AST.TypeLiteral,
  transformations: ReadonlyArray<AST.PropertySignatureTransformation>
): AST.TypeLiteral => {
  let changed = false
  const fields = from.propertySignatures.map((ps) => {
    const t = transformations.find((t) => t.from === ps.name)
    if (t === undefined || typeof ps.name !== "string" || hasOwnDefault(ps)) return ps
    const value = filledValue(t, ps.type)
    if (Option.isNone(value)) return ps
    changed = true
    return new AST.PropertySignature(ps.name, ps.type, ps.isOptional, ps.isReadonly, {
      ...ps.annotations,
      [AST.DefaultAnnotationId]: value.value
    })
  })
  return changed ? new AST.TypeLiteral(fields, from.indexSignatures, from.annotations) : from
}

/**
 * The value decoding puts in place of the missing key, on the field's encoded side (Effect encodes it
 * for the `default`); none when nothing is put there, when the default function throws, or when its
 * encoded value is not plain JSON (a `NaN`, a class instance, an `Option`).
 */
const filledValue = (t: AST.PropertySignatureTransformation, type: AST.AST): Option.Option<unknown> => {
  try {
    const decoded = t.decode(Option.none())
    if (Option.isNone(decoded)) return Option.none()
    const value = t.encode(decoded)
    if (Option.isNone(value) || value.value === undefined) return Option.none()
    const encoded = ParseResult.encodeUnknownOption(Schema.make<unknown, unknown, never>(type))(value.value)
    return Option.isSome(encoded) && isPlainJson(encoded.value, 0) ? value : Option.none()
  } catch {
    return Option.none()
  }
}

/** True when the property already shows a `default` of the user's (a `default` or `jsonSchema` annotation). */
const hasOwnDefault = (ps: AST.PropertySignature): boolean => {
  try {
    const definitions: Record<string, JSONSchema.JsonSchema7> = {}
    const rendered = JSONSchema.fromAST(new AST.TypeLiteral([ps], []), {
      definitions,
      topLevelReferenceStrategy: "skip"
    })
    const property: unknown = "properties" in rendered ? rendered.properties[ps.name as string] : undefined
    if (typeof property !== "object" || property === null) return false
    if ("default" in property) return true
    const ref = "$ref" in property && typeof property.$ref === "string" ? property.$ref : undefined
    const target = ref === undefined ? undefined : definitions[unescapeRef(ref)]
    return target !== undefined && "default" in target
  } catch {
    // The whole Schema fails the same way; that failure is reported, not this one.
    return false
  }
}

// "#/$defs/a~1b" names the definition "a/b" (JSON Pointer escapes).
const unescapeRef = (ref: string): string => ref.slice(ref.lastIndexOf("/") + 1).replace(/~1/g, "/").replace(/~0/g, "~")

const isPlainJson = (u: unknown, depth: number): boolean => {
  if (depth > 64) return false
  if (u === null || typeof u === "string" || typeof u === "boolean") return true
  if (typeof u === "number") return Number.isFinite(u)
  if (Array.isArray(u)) return u.every((item) => isPlainJson(item, depth + 1))
  if (typeof u !== "object") return false
  const proto = Object.getPrototypeOf(u)
  return (proto === Object.prototype || proto === null) && Object.getOwnPropertySymbols(u).length === 0 &&
    Object.values(u).every((item) => isPlainJson(item, depth + 1))
}
