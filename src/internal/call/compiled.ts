/**
 * Per-tool compiled parts, made once on first use: the tool's decoders and encoders (its failure's too),
 * its timeout and its span's name; and the flat input, whose check of unexpected keys is made far cheaper
 * than Effect's.
 */
import { Duration, type Either, ParseResult, Schema, type SchemaAST } from "effect"
import type * as Tool from "../../Tool.js"
import * as Plain from "../util/plain.js"

/** A tool's parts as the pipeline reads them on every call. */
export interface Compiled {
  readonly decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
  /** For a flat input (`flatInput`): its keys, and `decode` without the check of unexpected keys. */
  readonly flat: FlatInput | undefined
  readonly encode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
  readonly timeoutMillis: number
  readonly spanName: string
  /** `Schema.Struct({})`: Effect's `{}` accepts any value, so its strictness is checked here. */
  readonly emptyInput: boolean
  /** The tool's `failure` Schema compiled (design: Error text), or undefined when it has none. */
  readonly failure: FailureCodec | undefined
  /** `Invocation.call`'s: its input encoded for the pipeline, compiled on its first use. */
  readonly encodeInput: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
  /** `Invocation.call`'s: the result's value decoded back to the output, compiled on its first use. */
  readonly decodeOutput: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
}

/** A `failure` Schema's parts: whether a value is of its type, and its encoding (the JSON the model reads). */
export interface FailureCodec {
  readonly is: (u: unknown) => boolean
  readonly encode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
}

const compiledTools = new WeakMap<Tool.Any, Compiled>()

/** The compiled parts of `tool`, made on its first call and kept for the next. */
export const compile = (tool: Tool.Any): Compiled => {
  const known = compiledTools.get(tool)
  if (known !== undefined) return known
  const compiled: Compiled = {
    decode: ParseResult.decodeUnknownEither(tool.input, { onExcessProperty: "error", errors: "all" }),
    flat: flatInput(tool),
    encode: ParseResult.encodeUnknownEither(tool.output, { errors: "all" }),
    timeoutMillis: Duration.toMillis(tool.timeout),
    spanName: `execute_tool ${tool.name}`,
    emptyInput: tool.input.ast._tag === "TypeLiteral" && tool.input.ast.propertySignatures.length === 0 &&
      tool.input.ast.indexSignatures.length === 0,
    // Only a Schema is compiled: a `failure` of another kind (untyped code) is as good as none.
    failure: !Schema.isSchema(tool.failure)
      ? undefined
      : { is: ParseResult.is(tool.failure), encode: ParseResult.encodeUnknownEither(tool.failure) },
    encodeInput: onFirstUse(() => ParseResult.encodeUnknownEither(tool.input, { errors: "all" })),
    decodeOutput: onFirstUse(() => ParseResult.decodeUnknownEither(tool.output, { errors: "all" }))
  }
  compiledTools.set(tool, compiled)
  return compiled
}

/** The function `make` makes, made when it is first called: what only some callers use costs the others nothing. */
const onFirstUse = <A, B>(make: () => (a: A) => B): (a: A) => B => {
  let made: ((a: A) => B) | undefined
  return (a) => (made ??= make())(a)
}

/**
 * A flat input: a struct with no index signature, and no struct below it. Effect's check of
 * unexpected keys (`onExcessProperty: "error"`) parses each key against a union of the expected ones;
 * for a flat input, the only struct that reads the option is the top one, so when the value has no
 * key but the expected ones (`onlyKeysIn`), `decode` without the option gives the same result.
 */
export interface FlatInput {
  readonly keys: ReadonlySet<PropertyKey>
  readonly decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
}

const flatInput = (tool: Tool.Any): FlatInput | undefined => {
  const ast = tool.input.ast
  if (ast._tag !== "TypeLiteral" || ast.indexSignatures.length > 0) return undefined
  for (const ps of ast.propertySignatures) if (!isFlat(ps.type)) return undefined
  return {
    keys: new Set(ast.propertySignatures.map((ps) => ps.name)),
    // A plain input (every property a check of its value alone) without Effect's parser, unless a check fails.
    decode: Plain.orParse(Plain.plainStruct(ast), ParseResult.decodeUnknownEither(tool.input, { errors: "all" }))
  }
}

/**
 * No struct, class, transformation or suspended Schema anywhere in `ast`: nothing that reads
 * `onExcessProperty` or hands the options to user code (a refinement's filter is given them too; the
 * built-in filters do not read them).
 */
const isFlat = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "TypeLiteral":
    case "Declaration":
    case "Transformation":
    case "Suspend":
      return false
    case "Union":
      return ast.types.every(isFlat)
    case "Refinement":
      return isFlat(ast.from)
    case "TupleType":
      return ast.elements.every((e) => isFlat(e.type)) && ast.rest.every((r) => isFlat(r.type))
    default:
      // Keywords, literals, enums, template literals: a check of the value alone.
      return true
  }
}

/**
 * True when every own key of `value` is one of `keys`: the keys Effect's check of unexpected keys
 * looks at (`Reflect.ownKeys`). Parsed JSON has only enumerable string keys: `Object.keys`, much cheaper.
 */
export const onlyKeysIn = (value: object, keys: ReadonlySet<PropertyKey>, parsed: boolean): boolean => {
  const own: ReadonlyArray<PropertyKey> = parsed ? Object.keys(value) : Reflect.ownKeys(value)
  for (let i = 0; i < own.length; i++) if (!keys.has(own[i]!)) return false
  return true
}
