/**
 * Plain Schemas decoded and encoded without Effect's parser, as it decodes and encodes them. A plain struct's
 * every property is a check of its value alone that gives the value back: a string, number or boolean, a
 * literal, unknown, undefined, a union of these, or a filter of one (`Schema.Int`, a pattern): `{ a: Schema.Number }`,
 * most tools' inputs, the task events that carry no result or default, a submit's payload. Decoding or encoding
 * one is a check of each property and a copy: the struct's keys in its order, an optional key absent stays
 * absent, any other key dropped (Effect's default). A value that fails a check gives undefined: the caller asks
 * Effect's parser, for its words.
 */
import { Either, Option, SchemaAST } from "effect"

/** `value` decoded (and so encoded) by a plain struct, or undefined: not a record, or a property fails its check. */
export type PlainCodec = (value: unknown) => object | undefined

const isString = (u: unknown): boolean => typeof u === "string"
const isNumber = (u: unknown): boolean => typeof u === "number"
const isBoolean = (u: unknown): boolean => typeof u === "boolean"
const isUndefined = (u: unknown): boolean => u === undefined
const isAnything = (): boolean => true

/** Whether `value` has `key` of its own (an optional key absent stays absent). */
export const hasOwn = (value: object, key: PropertyKey): boolean => Object.prototype.hasOwnProperty.call(value, key)

/** A record: an object, not null, not an array. */
export const isRecord = (value: unknown): value is Record<PropertyKey, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The check Effect's parser makes of a value of type `ast` when it gives the value back as it is, else undefined. */
const checkOf = (ast: SchemaAST.AST): ((u: unknown) => boolean) | undefined => {
  switch (ast._tag) {
    case "StringKeyword":
      return isString
    case "NumberKeyword":
      return isNumber
    case "BooleanKeyword":
      return isBoolean
    case "UndefinedKeyword":
      return isUndefined
    case "UnknownKeyword":
    case "AnyKeyword":
      return isAnything
    case "Literal": {
      const literal = ast.literal
      return (u) => u === literal
    }
    case "Union": {
      const checks = ast.types.map(checkOf)
      if (checks.some((check) => check === undefined)) return undefined
      return (u) => checks.some((check) => check!(u))
    }
    // A filter of a plain type (`Schema.Int`, `pattern`, `between`): its check, then the filter Effect runs on it.
    case "Refinement": {
      const from = checkOf(ast.from)
      if (from === undefined) return undefined
      return (u) => from(u) && Option.isNone(ast.filter(u, SchemaAST.defaultParseOption, ast))
    }
    default:
      return undefined
  }
}

/**
 * The codec of `ast` when it is a plain struct (no index signature, every required property plain), else
 * undefined. A value with an optional property that is not plain gives undefined (the parser's).
 */
export const plainStruct = (ast: SchemaAST.AST): PlainCodec | undefined => {
  if (ast._tag !== "TypeLiteral" || ast.indexSignatures.length > 0) return undefined
  // An optional property that is not plain (a nested struct, a transformation) leaves the value to the parser
  // only when it is there: absent, it stays absent, as Effect leaves it.
  const properties: Array<{ readonly name: PropertyKey; readonly optional: boolean; readonly is: ((u: unknown) => boolean) | undefined }> = []
  for (const ps of ast.propertySignatures) {
    const is = checkOf(ps.type)
    if (is === undefined && !ps.isOptional) return undefined
    properties.push({ name: ps.name, optional: ps.isOptional, is })
  }
  return (value) => {
    if (!isRecord(value)) return undefined
    const input = value
    const output: Record<PropertyKey, unknown> = {}
    for (let i = 0; i < properties.length; i++) {
      const { is, name, optional } = properties[i]!
      if (optional && !hasOwn(input, name)) continue
      const item = input[name]
      if (is === undefined || !is(item)) return undefined
      output[name] = item
    }
    return output
  }
}

/**
 * For a union of tagged structs (a `_tag` literal each, as `Schema.TaggedStruct` makes them): the codec of the
 * member `value`'s `_tag` names when that member is plain or `byHand` has one for it (one direction of a member
 * that is not plain), else undefined (a member that is not plain, or a tag the union does not have: Effect's
 * parser decides).
 */
export const plainTagged = (ast: SchemaAST.AST, byHand: ReadonlyMap<string, PlainCodec> = new Map()): PlainCodec => {
  const byTag = new Map<unknown, PlainCodec | undefined>()
  for (const member of ast._tag === "Union" ? ast.types : [ast]) {
    // A member that is not a struct (a transformation: a default, a class) has its tag on each side.
    const sides = member._tag === "Transformation" ? [member.from, member.to] : [member]
    for (const side of sides) {
      const tag = side._tag === "TypeLiteral" ? side.propertySignatures.find((ps) => ps.name === "_tag")?.type : undefined
      if (tag?._tag !== "Literal") continue
      // A tag two members have, or a member that is not plain: Effect's parser decides.
      byTag.set(tag.literal, byTag.has(tag.literal) || side !== member ? undefined : plainStruct(member))
    }
  }
  // Members that are not plain, given a codec of their own for one direction (protocol/plainEvents.ts).
  for (const [tag, codec] of byHand) byTag.set(tag, codec)
  return (value) => {
    if (typeof value !== "object" || value === null) return undefined
    return byTag.get((value as { readonly _tag?: unknown })._tag)?.(value)
  }
}

/**
 * `parse` (Effect's decode or encode of the same Schema) with `codec` first: what the codec takes, copied; what it
 * does not (or every value, with no codec), parsed.
 */
export const orParse = <A, E>(
  codec: PlainCodec | undefined,
  parse: (u: unknown) => Either.Either<A, E>
): (u: unknown) => Either.Either<A, E> =>
  codec === undefined ? parse : (u) => {
    const plain = codec(u)
    // The codec gives what `parse` would (property-tested against it), so of its type.
    return plain === undefined ? parse(u) : Either.right(plain as A)
  }
