/**
 * THE pipeline that runs one tool call (design: Input, Error text, Deadlines, Retries, Call context), and its
 * door: agent runs, served calls and MCP all go through a dispatcher over their toolkit (`dispatcher`, the door
 * of design: The call pipeline); none of them decodes, times out, retries or formats errors on its own.
 *
 * Arguments -> size and key checks -> strict decode -> hooks -> handler (own fiber, deadline,
 * retries, `ToolContext`) -> output encode -> JSON check -> `ToolResult`. Every failure on the way
 * becomes a failed result, its kind in `failure` and its text in `error`; nothing escapes as a defect.
 */
import { Cause, Effect, Either, Layer, type ParseResult } from "effect"
import type * as EffectConfig from "effect/Config"
import type { ConfigError } from "effect/ConfigError"
import { type Compiled, compile } from "./internal/call/compiled.js"
import * as Door from "./internal/call/door.js"
import * as Pipeline from "./internal/call/pipeline.js"
import { tooDeep } from "./internal/call/result.js"
import { formatIssues } from "./internal/util/issues.js"
import type * as Tool from "./Tool.js"
import type { CallServices } from "./ToolContext.js"
import type * as Toolkit from "./Toolkit.js"
import { InvalidInput, InvalidOutput, type ToolFailure, type ToolResult } from "./ToolResult.js"

export type { CallOptions, Dispatcher, DispatcherOptions, ReusePolicy } from "./internal/call/door.js"

export {
  checkResult,
  type Config,
  defaultConfig,
  InvocationConfig,
  InvocationObserver,
  type RetryEvent
} from "./internal/call/pipeline.js"

/**
 * Who is calling, by when the call must be done, and where an earlier outcome may answer it: a delivery
 * store's (`dedupe`, such as the `Idempotency` service). A run's own outcomes (design: Per-run reuse) are a
 * dispatcher's (`dispatcher`'s `reuse`).
 */
export type Options = Omit<Pipeline.Options, "gate" | "reuse">

/** The limits: those `config` gives, the rest their defaults (`defaultConfig`). */
export const layer = (config: Partial<Pipeline.Config>): Layer.Layer<Pipeline.InvocationConfig> =>
  Layer.succeed(Pipeline.InvocationConfig, { ...Pipeline.defaultConfig, ...config })

/**
 * The limits read through an Effect `Config` (from the environment, or the `ConfigProvider` in force): those
 * it gives, the rest their defaults. A setting missing or malformed fails the layer with its `ConfigError`.
 */
export const layerConfig = (
  config: EffectConfig.Config<Partial<Pipeline.Config>>
): Layer.Layer<Pipeline.InvocationConfig, ConfigError> =>
  Layer.effect(Pipeline.InvocationConfig, Effect.map(config, (given) => ({ ...Pipeline.defaultConfig, ...given })))

/**
 * Runs one call of `tool` with `args` (JSON text or an already-parsed value). Never fails and never
 * dies: every problem is a failed `ToolResult`. Interrupting it interrupts the handler.
 * With tracing on and a tracer installed, the call is a span `execute_tool <name>`, parent of the
 * handler's spans; with no tracer installed no span is made (nobody would read it).
 */
export const run = <R>(
  tool: Tool.Tool<string, any, any, any, R, any>,
  args: unknown,
  options?: Options
): Effect.Effect<ToolResult, never, Exclude<R, CallServices>> => Door.runTool(tool, args, options)

/**
 * What `call` of a tool with a `failure` Schema of type `E` fails with: a handler failure of that Schema's
 * type, as the handler failed with it (so `Effect.catchTag("OrderNotFound", ...)` recovers it), or else the
 * call's `ToolFailure`: a defect (or a failure not of the Schema's type) is `HandlerFailed`, its `cause` kept;
 * a timeout `TimedOut`, refused input `InvalidInput`, and so on.
 */
export type CallError<E> = E | ToolFailure<E>

/**
 * Runs one call of `tool` with its `input`, typed: the same call as `run` (the same door and pipeline: decode,
 * hooks, deadline, retries), its `input` encoded by the tool's input Schema first and its result's value
 * decoded back by the output Schema. It fails with the typed failure of a tool made with a `failure` Schema
 * (`CallError`); otherwise with the call's `ToolFailure`, whose `HandlerFailed` has the handler's failures in
 * its `cause`. Input the Schema cannot encode fails with `InvalidInput` without a call.
 */
export function call<Input, Output, E, R>(
  tool: Tool.WithFailure<string, Input, Output, E, R>,
  input: NoInfer<Input>,
  options?: Options
): Effect.Effect<Output, CallError<E>, Exclude<R, CallServices>>
export function call<Input, Output, E, R, Body>(
  tool: Tool.Tool<string, Input, Output, E, R, Body>,
  input: NoInfer<Input>,
  options?: Options
): Effect.Effect<Output, ToolFailure<Body extends Effect.Effect<any, any, any> ? E : unknown>, Exclude<R, CallServices>>
export function call(tool: Tool.Any, input: unknown, options?: Options): Effect.Effect<unknown, unknown, unknown> {
  return Effect.flatMap(Pipeline.InvocationConfig, (config) => {
    const compiled = compile(tool)
    // A value nested past the stack says so, as the pipeline's own check of arguments does.
    const encoded = Either.orElse(attempt(() => compiled.encodeInput(input)), (reason) => {
      const deep = tooDeep(input, config)
      return Either.left(deep ?? reason)
    })
    if (Either.isLeft(encoded)) return Effect.fail(new InvalidInput({ toolName: tool.name, reason: encoded.left }))
    return Effect.flatMap(Door.runTool(tool, encoded.right, options), (result) => typedOutcome(tool, compiled, result))
  })
}

/** `result` as `call` gives it: its value decoded by the output Schema, or its failure, typed when it is the tool's. */
const typedOutcome = (tool: Tool.Any, compiled: Compiled, result: ToolResult): Effect.Effect<unknown, unknown> => {
  const failure = result.failure
  if (failure === undefined) {
    const decoded = attempt(() => compiled.decodeOutput(result.value))
    return Either.isRight(decoded)
      ? Effect.succeed(decoded.right)
      : Effect.fail(new InvalidOutput({ toolName: tool.name, reason: decoded.left }))
  }
  if (failure._tag === "HandlerFailed" && compiled.failure !== undefined) {
    const error = Cause.failureOption(failure.cause)
    if (error._tag === "Some" && compiled.failure.is(error.value)) return Effect.fail(error.value)
  }
  return Effect.fail(failure)
}

/** A codec's outcome, its issues (or what it threw: a recursive Schema can exhaust the stack) as a text. */
const attempt = (run: () => Either.Either<unknown, ParseResult.ParseIssue>): Either.Either<unknown, string> => {
  try {
    return Either.mapLeft(run(), formatIssues)
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : String(error))
  }
}

/**
 * A dispatcher over `toolkit` (the door every face goes through, design: The call pipeline): it runs a call by
 * tool name (an unknown name is the `UnknownTool` result every face gives), with the state of one run, session
 * or task: the hook state (`state`, else one of its own, of `kind`), an idempotent tool's outcomes reused by
 * `reuse` (`joinInFlight` for calls that start together, `maxBytes` to bound them), each delivery run once in
 * `dedupe`. A call's `traceparent` continues the caller's trace. `prepare` starts the worker threads of its
 * tools, once before the first call.
 */
export const dispatcher = <R>(toolkit: Toolkit.Toolkit<R>, options?: Door.DispatcherOptions): Door.Dispatcher<R> =>
  Door.make(toolkit, options)
