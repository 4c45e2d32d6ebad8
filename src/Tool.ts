/**
 * A tool: a name, a description the model reads, Schema-typed input and output, a timeout, and a
 * handler (design: Tools, What the model sees). A tool is plain data plus a function; `Invocation` runs it.
 */
import { Duration, Effect, Either, JSONSchema, Schema } from "effect"
import { withDefaultsOrSame } from "./internal/inputDefaults.js"
import * as JsonSchemaCheck from "./internal/jsonSchema.js"
import { type Call, CallContext, type CallServices, makeCallEffect, ToolContext } from "./ToolContext.js"
import type { Scope } from "effect"

/** Identifies a `Tool` value at run time. */
export const TypeId: unique symbol = Symbol.for("agent-tools/Tool")

/** The JSON Schema shape we hand to models and MCP clients. */
export type JsonSchema = JSONSchema.JsonSchema7Root

/** What the model sees of a tool (design: What the model sees). */
export interface Definition {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema
}

/** Why a tool's Schemas cannot be shown to a model; `Toolkit.make` reports these as limit violations. */
export interface SchemaProblem {
  readonly rule: "input-json" | "output-json" | "input-object"
  readonly message: string
}

/** Turns a handler failure or defect into the text the model reads instead of the default error text. */
export type ErrorTransform = (error: unknown) => string

/** Says whether a handler failure may be retried: only `true` retries; a throw counts as `false` (design: Retries). */
export type Retryable<E> = (error: E) => boolean

/**
 * A tool whose handler takes `Input`, yields `Output`, fails with `E` and needs `R`; `Body` is what
 * the handler returns: an Effect, a `PromiseLike` (an async function) or the output itself (design: Handler shapes).
 */
export interface Tool<Name extends string, Input, Output, E = never, R = never, Body = Effect.Effect<Output, E, R>> {
  readonly [TypeId]: typeof TypeId
  readonly name: Name
  readonly description: string
  /** Decodes the model's arguments (JSON) into `Input`. */
  readonly input: Schema.Schema<Input, unknown>
  /** Encodes `Output` into the JSON value the caller receives. */
  readonly output: Schema.Schema<Output, unknown>
  readonly timeout: Duration.Duration
  readonly retries: number
  /** `_tag`s of failures and defects that are never retried (design: Retries). Default empty. */
  readonly permanent: ReadonlyArray<string>
  /**
   * Which failures of the error channel may be retried (design: Retries); `undefined`: all but `permanent`. Typed
   * over `unknown` so that a tool stays covariant in `E`: it is only ever given the handler's failures.
   */
  readonly retryable: Retryable<unknown> | undefined
  readonly idempotent: boolean
  /** Each call runs only once approved (`Hooks.approval`, a journal, the platform); else refused (design: Hooks). */
  readonly needsApproval: boolean
  readonly errorTransform: ErrorTransform | undefined
  /**
   * The Schema of the handler's failures (`make`'s `failure`), or undefined: a failure of its type is read
   * by the model as its encoded JSON, and `Invocation.call` fails with it as it is. Typed loosely here, as
   * `retryable` is; `WithFailure` types it.
   */
  readonly failure: Schema.Schema<any, any, never> | undefined
  /**
   * The module that defines (and exports) this tool, when its body runs on a worker thread
   * (`worker: import.meta.url`): the workers load it and find the tool there by its name.
   */
  readonly worker: URL | undefined
  /**
   * The body as given to `make`: `(input, call) => body`. The pipeline calls it; a unit test calls
   * `Tool.test(tool, input)`, which gives it a `call` and tells by its type whether the body needs
   * the `ToolContext` service (design: Call context).
   */
  readonly handler: (input: Input, call: Call) => Body
  /** Phantom, never set: keeps `E` and `R` in the type whatever `Body` is (`Requirements` reads it). */
  readonly "~types"?: { readonly error: E; readonly requirements: R } | undefined
  /** The JSON Schemas, computed once when the tool is made, or why they could not be. */
  readonly schemas: Either.Either<Schemas, ReadonlyArray<SchemaProblem>>
}

/** The input and output JSON Schemas of a tool. */
export interface Schemas {
  readonly parameters: JsonSchema
  readonly output: JsonSchema
}

/**
 * A tool made with a `failure` Schema (design: Error text): its handler's failures are of that Schema's type
 * `E`, which the model reads encoded as JSON and `Invocation.call` fails with, for `Effect.catchTag`.
 */
export interface WithFailure<Name extends string, Input, Output, E, R = never>
  extends Tool<Name, Input, Output, E, R, Effect.Effect<Output, E, R>>
{
  readonly failure: Schema.Schema<E, any, never>
}

/** The `_tag`s of `E`'s members, or `string` when none has one. */
export type TagOf<E> = [TagsOf<E>] extends [never] ? string : TagsOf<E>
type TagsOf<E> = E extends { readonly _tag: infer T extends string } ? T : never

/** Any tool, for collections. */
export interface Any extends Tool<string, any, any, any, any, any> {}

/**
 * What the type of a tool made by `make` says of `needsApproval`: `false` when the options have none (or a
 * literal `false`), `true` for a literal `true`, `boolean` when not known. An agent whose tools are all
 * `false` cannot suspend for approvals (`Agent.make`); a tool typed `Any` (or a sub-agent's) may.
 */
export interface Approval<N extends boolean> {
  readonly needsApproval: N
}

/** What the handlers of a union of tools need. */
export type Requirements<T> = T extends Tool<any, any, any, any, infer R> ? R : never

/** The input Schema's decoded type, from a Schema or a record of Struct fields. */
export type InputOf<I> = I extends Schema.Schema.Any ? Schema.Schema.Type<I>
  : I extends Schema.Struct.Fields ? Schema.Struct.Type<I>
  : never

/** Options of `Tool.make` (design: Tools); `E` is the handler's failure type, which `retryable` is given. */
export interface Options<I, O, E = unknown> {
  /** What the tool does and when to use it: the model reads this (1..1024 characters). */
  readonly description: string
  /** A `Schema.Struct` (without requirements) or its fields. */
  readonly input: I
  /** Defaults to `Schema.Unknown`: any JSON value. */
  readonly output?: Schema.Schema<O, any> | undefined
  /** Required: how long one call may run (at most 3600 s). */
  readonly timeout: Duration.DurationInput
  /** Re-runs of a failed handler, inside the deadline (design: Retries). Default 0. */
  readonly retries?: number | undefined
  /**
   * `_tag`s of failures never retried, like `["NotFound", "Declined"]`: such a failure ends the call
   * at once whatever `retries` says. Also matches a defect with that `_tag` (an `orDie`d error).
   */
  readonly permanent?: ReadonlyArray<string> | undefined
  /**
   * Which failures of the error channel (`Effect.fail`) may be retried; asked only when `retries` > 0,
   * not for `permanent` tags nor for defects. Only `true` retries; a predicate that throws does not.
   * Default: every failure is retryable. With a handler that takes its input untyped, annotate the
   * parameter (`(error: NotFound | Busy) => ...`): TypeScript types the options before the handler.
   */
  readonly retryable?: Retryable<NoInfer<E>> | undefined
  /** The same input may reuse an earlier outcome instead of running again (design: Per-run reuse, Delivery dedupe). Default false. */
  readonly idempotent?: boolean | undefined
  /** Each call runs only once approved (`Hooks.approval`, a journal, the platform); else refused. Default false. */
  readonly needsApproval?: boolean | undefined
  /** Replaces the text of handler failures and defects; fails closed to `tool <name> failed`. */
  readonly errorTransform?: ErrorTransform | undefined
  /** None here: a tool with a Schema of its failures is made with `FailureOptions`. */
  readonly failure?: undefined
  /**
   * Runs the body on a worker thread, off the event loop: `worker: import.meta.url`, the module
   * that defines the tool, which must export it (design: Worker threads). The workers load that
   * module and find the tool by its name, so the module must do nothing at load but define (no
   * server started, no program run). The body gets its input and a `Call` without `signal` use
   * (the worker is stopped at the deadline) and returns a value or a promise; input and output
   * cross threads by structured clone.
   */
  readonly worker?: string | URL | undefined
}

/**
 * Options of `Tool.make` with a `failure` Schema (design: Error text): the handler's failures must be of its
 * type, which `retryable` is given and whose `_tag`s `permanent` lists.
 */
export interface FailureOptions<I, O, F extends Schema.Schema<any, any, never>>
  extends Omit<Options<I, O, Schema.Schema.Type<F>>, "failure" | "permanent" | "retryable">
{
  /**
   * The Schema of the handler's failures (a `Schema.TaggedError`, a union of them): a failure of its type
   * reads, for the model, as its encoded JSON (`{"_tag":"OrderNotFound","orderId":"42"}`) unless
   * `errorTransform` is given, and `Invocation.call` fails with it as it is. A defect reads as before.
   */
  readonly failure: F
  /** `_tag`s of the failure Schema's type never retried (`Options.permanent`). */
  readonly permanent?: ReadonlyArray<TagOf<Schema.Schema.Type<NoInfer<F>>>> | undefined
  /** Which failures may be retried (`Options.retryable`); its parameter is the failure Schema's type. */
  readonly retryable?: Retryable<Schema.Schema.Type<NoInfer<F>>> | undefined
}

/**
 * Makes a tool. Never throws: a Schema that JSON cannot express, a bad timeout, a handler that is
 * not a function and the like are kept on the tool and reported, all at once, by `Toolkit.make`.
 *
 * The handler is `(input, call) => body` whatever its shape (design: Handler shapes): an Effect (which reads
 * `ToolContext`), a `PromiseLike` (an async function: `call.signal` aborts at the deadline; a
 * rejection is the call's failure), or the output itself (a plain function, run inline; a throw is
 * a defect). `call` is the `ToolContext.Call`: ids, attempt, deadline, `signal`, `remaining()`.
 *
 * With a `failure` Schema the handler is an Effect whose failures are of that Schema's type (a type
 * error otherwise), and the tool is a `WithFailure`.
 */
export function make<
  const Name extends string,
  I extends Schema.Struct.Fields | Schema.Schema<any, any, never>,
  O = unknown,
  E = never,
  R = never,
  const N extends boolean = false
>(
  name: Name,
  options: Options<I, O, E> & { readonly needsApproval?: N | undefined },
  // The output type comes from the output Schema alone (unknown without one), never from the handler.
  handler: (input: InputOf<I>, call: Call) => Effect.Effect<NoInfer<O>, E, R>
): Tool<Name, InputOf<I>, O, E, R> & Approval<N>
export function make<
  const Name extends string,
  I extends Schema.Struct.Fields | Schema.Schema<any, any, never>,
  O = unknown,
  const N extends boolean = false
>(
  name: Name,
  options: Options<I, O, unknown> & { readonly needsApproval?: N | undefined },
  handler: (input: InputOf<I>, call: Call) => PromiseLike<NoInfer<O>>
): Tool<Name, InputOf<I>, O, unknown, never, PromiseLike<O>> & Approval<N>
export function make<
  const Name extends string,
  I extends Schema.Struct.Fields | Schema.Schema<any, any, never>,
  O = unknown,
  const N extends boolean = false
>(
  name: Name,
  options: Options<I, O, unknown> & { readonly needsApproval?: N | undefined },
  handler: (input: InputOf<I>, call: Call) => NoInfer<O>
): Tool<Name, InputOf<I>, O, unknown, never, O> & Approval<N>
export function make<
  const Name extends string,
  I extends Schema.Struct.Fields | Schema.Schema<any, any, never>,
  F extends Schema.Schema<any, any, never>,
  O = unknown,
  R = never,
  const N extends boolean = false
>(
  name: Name,
  options: FailureOptions<I, O, F> & { readonly needsApproval?: N | undefined },
  handler: (input: InputOf<I>, call: Call) => Effect.Effect<NoInfer<O>, Schema.Schema.Type<NoInfer<F>>, R>
): WithFailure<Name, InputOf<I>, O, Schema.Schema.Type<F>, R> & Approval<N>
export function make(
  name: string,
  options: AnyOptions,
  handler: (input: any, call: Call) => unknown
): Any {
  return build(name, options, handler)
}

/** `make`'s options, with or without a `failure` Schema, as `build` reads them. */
type AnyOptions =
  & Omit<Options<Schema.Struct.Fields | Schema.Schema<any, any, never>, unknown, unknown>, "failure" | "permanent">
  & { readonly permanent?: ReadonlyArray<string> | undefined; readonly failure?: Schema.Schema<any, any, never> | undefined }

/** A tool from `make`'s options; its schemas as `schemas` gives them (`fromJsonSchema`), else rendered from its Schemas. */
const build = (
  name: string,
  options: AnyOptions,
  handler: (input: any, call: Call) => unknown,
  schemas?: (input: Schema.Schema.Any, output: Schema.Schema.Any) => Either.Either<Schemas, ReadonlyArray<SchemaProblem>>
): Any => {
  const input = (Schema.isSchema(options.input) ? options.input : Schema.Struct(options.input)) as Schema.Schema<
    unknown,
    unknown
  >
  const output = (options.output ?? Schema.Unknown) as Schema.Schema<unknown, unknown>
  return {
    [TypeId]: TypeId,
    name,
    description: options.description,
    input,
    output,
    timeout: Duration.decodeUnknown(options.timeout).pipe((o) => o._tag === "Some" ? o.value : Duration.zero),
    retries: options.retries ?? 0,
    // Kept as given (null included): Toolkit.make reports a wrong one instead of it vanishing here.
    permanent: options.permanent === undefined ? [] : options.permanent,
    retryable: options.retryable as Retryable<unknown> | undefined,
    idempotent: options.idempotent ?? false,
    needsApproval: options.needsApproval ?? false,
    errorTransform: options.errorTransform,
    failure: options.failure,
    worker: workerModule(options.worker),
    handler: handler as Any["handler"],
    schemas: (schemas ?? computeSchemas)(input, output)
  }
}

/** Options of `Tool.fromJsonSchema`: `Tool.make`'s, with JSON Schemas for the input and the output. */
export interface JsonSchemaOptions<E = unknown> extends Omit<Options<never, unknown, E>, "input" | "output"> {
  /** The input's JSON Schema (`type: "object"`): what the model sees, as given. */
  readonly parameters: JsonSchemaCheck.JsonSchemaObject
  /** The output's JSON Schema, as given; default: any JSON value. */
  readonly output?: JsonSchemaCheck.JsonSchemaObject | undefined
  /**
   * Where values are checked against the schemas: `"here"` (the default: each call's arguments and
   * output, by ajv, each failure an issue at its path) or `"elsewhere"`: the arguments need only be a
   * JSON object and the output is taken as it comes (the process that serves the tool checks both).
   */
  readonly checked?: "here" | "elsewhere" | undefined
  /** How error texts name the two schemas. Default `its input JSON Schema`, `its output JSON Schema`. */
  readonly schemaNames?: { readonly input: string; readonly output: string } | undefined
  /** The compiled checks of tools made together (one per distinct schema); default: the tool's own. */
  readonly validators?: JsonSchemaCheck.Validators | undefined
}

const anyObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * Makes a tool whose input and output are given as JSON Schemas (a remote MCP server's tools, a
 * served tool as the platform sees it): the model sees them as given; values are checked against them
 * (ajv) unless `checked: "elsewhere"`. Never throws: a schema that cannot be compiled (or is nested
 * deeper than 64 levels, or is over 256 KiB) is kept on the tool and reported by `Toolkit.make`, and
 * the tool cannot be called. The handler takes the arguments as a JSON object.
 */
export function fromJsonSchema<const Name extends string, E = never, R = never>(
  name: Name,
  options: JsonSchemaOptions<E>,
  handler: (input: Record<string, unknown>, call: Call) => Effect.Effect<unknown, E, R>
): Tool<Name, Record<string, unknown>, unknown, E, R>
export function fromJsonSchema<const Name extends string>(
  name: Name,
  options: JsonSchemaOptions,
  handler: (input: Record<string, unknown>, call: Call) => PromiseLike<unknown>
): Tool<Name, Record<string, unknown>, unknown, unknown, never, PromiseLike<unknown>>
export function fromJsonSchema(
  name: string,
  options: JsonSchemaOptions,
  handler: (input: Record<string, unknown>, call: Call) => unknown
): Any {
  const { checked, output: outputSchema, parameters, schemaNames, validators: given, ...rest } = options
  const names = schemaNames ?? { input: "its input JSON Schema", output: "its output JSON Schema" }
  const problems: Array<SchemaProblem> = []
  let input: Schema.Schema<any, any, never> = anyObject
  let output: Schema.Schema<unknown, any> = Schema.Unknown
  if (checked !== "elsewhere") {
    const validators = given ?? new JsonSchemaCheck.Validators()
    const compiledInput = validators.compile(parameters)
    if (Either.isRight(compiledInput)) input = JsonSchemaCheck.checkedBy(compiledInput.right, parameters)
    else {
      input = JsonSchemaCheck.refusing(names.input, compiledInput.left)
      problems.push({ rule: "input-json", message: `${names.input} cannot be checked: ${compiledInput.left}` })
    }
    const compiledOutput = outputSchema === undefined ? undefined : validators.compile(outputSchema)
    if (compiledOutput !== undefined && Either.isRight(compiledOutput)) {
      output = JsonSchemaCheck.checkedBy(compiledOutput.right, outputSchema!)
    } else if (compiledOutput !== undefined) {
      problems.push({ rule: "output-json", message: `${names.output} cannot be checked: ${compiledOutput.left}` })
    }
  }
  return build(name, { ...rest, input, output }, handler, (input, output) => {
    if (problems.length > 0) return Either.left(problems)
    // Checked here, the Schemas render as the JSON Schemas they check; else the model sees the given ones.
    if (checked !== "elsewhere") return computeSchemas(input, output)
    return Either.map(computeSchemas(input, output), (rendered) => ({
      parameters: parameters as unknown as JsonSchema,
      output: outputSchema === undefined ? rendered.output : outputSchema as unknown as JsonSchema
    }))
  })
}

// A string that is not a URL is kept as an invalid one: `Toolkit.make` reports it (`workerProblem`).
const workerModule = (module: string | URL | undefined): URL | undefined => {
  if (module === undefined || module instanceof URL) return module
  try {
    return new URL(module)
  } catch {
    return new URL(`invalid:${encodeURIComponent(String(module))}`)
  }
}

/**
 * Why `tool`'s handler cannot run, naming the tool and the fix, or undefined when it is a function.
 * `Toolkit.make` reports it before any call; a tool run without one gets it as its failure text.
 */
export const handlerProblem = (tool: Any): string | undefined => {
  const handler: unknown = tool.handler
  if (typeof handler === "function") return undefined
  const got = handler === null ? "null" : Schema.isSchema(handler) ? "a Schema" :
    typeof handler === "object" && "pipe" in handler ? "an Effect (wrap it: () => effect)" : typeof handler
  return `${JSON.stringify(tool.name)}: the handler must be a function, (input, call) => Effect, ` +
    `async (input, call) => output or (input, call) => output; got ${got}`
}

/** What `permanent` must be: an array of non-empty strings (`Toolkit.make` reports anything else). */
export const isPermanentList = (u: unknown): u is ReadonlyArray<string> =>
  Array.isArray(u) && u.every((tag) => typeof tag === "string" && tag.length > 0)

/**
 * Runs `tool`'s body on `input` with no pipeline, platform or agent: for a unit test of its logic
 * (design: Call context). The input is taken as it is (not decoded), the output not encoded; every
 * body shape is an Effect here (a rejection is a failure, a throw a defect). The body gets `call` as
 * its second argument, by default `ToolContext.makeCallEffect()` (ids `"local"`, a deadline a minute
 * away on the fiber's `Clock`: under `TestClock` its `remaining` moves with the test's clock). The
 * call's log lines go through the test's logger, a given call's too. The body's `Scope` (a call's,
 * `ToolContext.CallServices`) closes when the body ends.
 *
 * Without `call`, the `ToolContext` service is absent, as outside any call: `ToolContext.current` is
 * `None`, and a body that reads `ToolContext.ToolContext` without checking still needs it in its
 * type, so running it does not compile. With `call`, that call is the service too.
 */
export function test<Input, Output, E, R, Body>(
  tool: Tool<string, Input, Output, E, R, Body>,
  input: NoInfer<Input>
): Effect.Effect<Output, Body extends Effect.Effect<any, any, any> ? E : unknown, Exclude<R, Scope.Scope>>
export function test<Input, Output, E, R, Body>(
  tool: Tool<string, Input, Output, E, R, Body>,
  input: NoInfer<Input>,
  call: Call
): Effect.Effect<Output, Body extends Effect.Effect<any, any, any> ? E : unknown, Exclude<R, CallServices>>
export function test(tool: Any, input: unknown, call?: Call): Effect.Effect<unknown, unknown, unknown> {
  return Effect.withFiberRuntime((fiber) => {
    // A call made outside any fiber (`makeCall`) writes its lines through this one's logger here.
    const given = call instanceof CallContext && call.calling === undefined
      ? new CallContext(call.info, call.clock, { context: fiber.currentContext, fiber })
      : call
    return Effect.flatMap(given === undefined ? makeCallEffect() : Effect.succeed(given), (made) => {
      const body: unknown = tool.handler(input, made)
      const effect: Effect.Effect<unknown, unknown, unknown> = Effect.isEffect(body)
        ? Effect.scoped(body)
        : isPromiseLike(body)
        ? Effect.async<unknown, unknown>((resume) => {
          body.then((value) => resume(Effect.succeed(value)), (error) => resume(Effect.fail(error)))
        })
        : Effect.succeed(body)
      return given === undefined ? effect : Effect.provideService(effect, ToolContext, made)
    })
  })
}

const isPromiseLike = (u: unknown): u is PromiseLike<unknown> =>
  typeof u === "object" && u !== null && typeof (u as { then?: unknown }).then === "function"

/** True for values made by `Tool.make`. */
export const isTool = (u: unknown): u is Any => typeof u === "object" && u !== null && TypeId in u

/**
 * What the model sees: `{ name, description, parameters }` (design: What the model sees). Computed once, when the tool was
 * made. Throws for a tool whose Schemas JSON cannot express; `Toolkit.make` reports those first.
 */
export const jsonSchema = (tool: Any): Definition => {
  if (Either.isLeft(tool.schemas)) {
    throw new Error(`tool ${tool.name}: ${tool.schemas.left.map((p) => p.message).join("; ")}`)
  }
  return { name: tool.name, description: tool.description, parameters: tool.schemas.right.parameters }
}

/** The JSON Schema of the tool's encoded output (for MCP's `outputSchema`). Throws like `jsonSchema`. */
export const outputJsonSchema = (tool: Any): JsonSchema => {
  if (Either.isLeft(tool.schemas)) {
    throw new Error(`tool ${tool.name}: ${tool.schemas.left.map((p) => p.message).join("; ")}`)
  }
  return tool.schemas.right.output
}

const emptyObject: JsonSchema = { type: "object", properties: {}, required: [], additionalProperties: false }

const computeSchemas = (
  input: Schema.Schema.Any,
  output: Schema.Schema.Any
): Either.Either<Schemas, ReadonlyArray<SchemaProblem>> => {
  const problems: Array<SchemaProblem> = []
  let parameters = toJsonSchema(input, "input", problems)
  if (parameters !== undefined) {
    if (isEmptyStruct(parameters)) {
      // Effect renders `{}` as object-or-array; a model needs an object (design: What the model sees).
      parameters = emptyObject
    } else if (!("type" in parameters) || parameters.type !== "object") {
      problems.push({ rule: "input-object", message: "input must be a Schema.Struct (JSON Schema type object)" })
    }
  }
  const out = toJsonSchema(output, "output", problems)
  return problems.length === 0 ? Either.right({ parameters: parameters!, output: out! }) : Either.left(problems)
}

const isEmptyStruct = (schema: JsonSchema): boolean => "$id" in schema && schema.$id === "/schemas/%7B%7D"

/** JSON Schema of the encoded side, definitions inlined under `$defs`, no top-level `$ref`. */
const toJsonSchema = (
  schema: Schema.Schema.Any,
  side: "input" | "output",
  problems: Array<SchemaProblem>
): JsonSchema | undefined => {
  const definitions: Record<string, JsonSchema> = {}
  try {
    const ast = side === "input" ? withDefaultsOrSame(schema.ast) : schema.ast
    const out = JSONSchema.fromAST(ast, { definitions, topLevelReferenceStrategy: "skip" })
    return Object.keys(definitions).length === 0 ? out : { ...out, $defs: definitions }
  } catch (error) {
    problems.push({ rule: side === "input" ? "input-json" : "output-json", message: describeJsonSchemaError(side, error) })
    return undefined
  }
}

// Effect's message spans lines ("Missing annotation / at path: ["a"]["b"] / schema (Declaration): Map<..>"):
// fold it into one line that names the field and the type.
const describeJsonSchemaError = (side: "input" | "output", error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  const path = /at path: (.*)/.exec(text)?.[1]
  const field = path === undefined || path === "" ? "" :
    " field " + Array.from(path.matchAll(/\[(?:"((?:[^"\\]|\\.)*)"|([^\]]*))\]/g), (m) => m[1] ?? m[2]).join(".")
  const schemaLine = /schema \((\w+)\): (.*)/.exec(text)
  const what = schemaLine === null ? "" : ` (${schemaLine[2]})`
  const reason = text.split("\n")[0]
  return `${side}${field}${what} is not JSON-representable: ${reason}`
}
