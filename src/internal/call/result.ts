/**
 * Outcome -> ToolResult, and the error texts: stage `toResult` (design: Error text, Limits). An output is
 * encoded by the tool's Schema and held to the JSON limits (`checkResult`, which the platform applies
 * to a served answer too); a failure becomes its kind, its text cut to `maxErrorLength`.
 */
import { Cause, Either, Exit, type ParseResult } from "effect"
import { formatIssues } from "../util/issues.js"
import * as Json from "../util/json.js"
import type * as Tool from "../../Tool.js"
import {
  errorText,
  HandlerFailed,
  Interrupted,
  InvalidOutput,
  TimedOut,
  type ToolFailure,
  ToolResult
} from "../../ToolResult.js"
import { type Outcome, ReachedDeadline } from "./attempt.js"
import { type Compiled, compile } from "./compiled.js"
import { type Config, defaultConfig, derived } from "./config.js"

const succeeded = (value: unknown): ToolResult => new ToolResult(value, undefined)
/** A failed result, its text cut to the limit of `config`. */
export const failed = (failure: ToolFailure, config: Config): ToolResult =>
  new ToolResult(undefined, failure, config.maxErrorLength)

/**
 * A handler's value that is the call's result as it is, neither encoded nor checked again: the
 * platform's remote tools give a served answer so (it was checked on arrival, and its failure keeps
 * its kind: a served `TimedOut` stays `TimedOut`). Not exported by the package.
 */
export class Verbatim {
  constructor(readonly result: ToolResult) {}
}

/** The reason a value is refused for its nesting, or undefined. */
export const tooDeep = (value: unknown, config: Config): string | undefined =>
  Json.deeperThan(value, config.maxDepth) ? `the value is nested deeper than ${config.maxDepth} levels` : undefined

/** The output limits of `config`. */
const outputLimits = (config: Config): Json.Limits => derived(config).limits

/**
 * `result` as the platform may accept it from a serving process for a call of `toolName`: a value
 * past `config`'s output limits becomes the invalid-output result, an error text is cut.
 */
export const checkResult = (toolName: string, result: ToolResult, config: Config = defaultConfig): ToolResult => {
  if (result.failure !== undefined) {
    return result.error!.length <= config.maxErrorLength ? result : failed(result.failure, config)
  }
  const problem = Json.problemIn(result.value, outputLimits(config))
  return problem === undefined ? result : failed(new InvalidOutput({ toolName, reason: problem }), config)
}

/**
 * Stage 7, `toResult`: the outcome as the caller gets it: the output encoded by the tool's Schema and
 * checked against the limits, or the failure by its kind, its text cut to `maxErrorLength`.
 */
export const toResult = (
  tool: Tool.Any,
  compiled: Compiled,
  outcome: Outcome,
  config: Config,
  allowedMillis: number
): ToolResult => {
  if (outcome === ReachedDeadline) return failed(new TimedOut({ toolName: tool.name, allowedMillis }), config)
  if (Exit.isFailure(outcome)) return failed(handlerFailure(tool, outcome.cause), config)
  if (outcome.value instanceof Verbatim) return outcome.value.result
  const value = outcome.value === undefined ? null : outcome.value
  let encoded: Either.Either<unknown, ParseResult.ParseIssue>
  try {
    encoded = compiled.encode(value)
    if (Either.isLeft(encoded)) {
      return failed(new InvalidOutput({ toolName: tool.name, reason: formatIssues(encoded.left) }), config)
    }
  } catch (error) {
    // A recursive Schema or the issue formatter on a deeply nested value can exhaust the stack.
    const reason = tooDeep(value, config) ?? `the output could not be encoded (${errorMessage(error)})`
    return failed(new InvalidOutput({ toolName: tool.name, reason }), config)
  }
  // Bounded in depth and size, so a served answer always fits the platform's frames (design: Hostile clients).
  return checkResult(tool.name, succeeded(encoded.right), config)
}

/** The failure of a handler that failed, died or was interrupted (by itself: not at its deadline). */
export const handlerFailure = (tool: Tool.Any, cause: Cause.Cause<unknown>): HandlerFailed | Interrupted => {
  const failure = Cause.failureOption(cause)
  if (failure._tag === "Some") {
    return new HandlerFailed({ toolName: tool.name, cause, text: failureText(tool, failure.value, true) })
  }
  const defect = Cause.dieOption(cause)
  if (defect._tag === "None") return new Interrupted({ toolName: tool.name })
  return new HandlerFailed({ toolName: tool.name, cause, text: failureText(tool, defect.value, false) })
}

/**
 * The error text of a handler's failure (`typed`: of its error channel) or defect `error` (design: Error
 * text): the tool's `errorTransform`'s; else a failure of the tool's `failure` Schema reads as its encoded
 * JSON; else `errorText`'s.
 */
const failureText = (tool: Tool.Any, error: unknown, typed: boolean): string => {
  if (tool.errorTransform !== undefined) {
    try {
      const text: unknown = tool.errorTransform(error)
      if (typeof text === "string") return text
    } catch {
      // fail closed below
    }
    return `tool ${tool.name} failed`
  }
  return (typed ? encodedFailure(tool, error) : undefined) ?? errorText(error)
}

/** `error` encoded by the tool's `failure` Schema, as JSON text; undefined without one or when it does not encode. */
const encodedFailure = (tool: Tool.Any, error: unknown): string | undefined => {
  const codec = compile(tool).failure
  if (codec === undefined) return undefined
  try {
    const encoded = codec.encode(error)
    if (Either.isLeft(encoded)) return undefined
    const text: unknown = JSON.stringify(tagFirst(encoded.right))
    return typeof text === "string" ? text : undefined
  } catch {
    // Not JSON (a bigint, a cycle): the text of the error as it is.
    return undefined
  }
}

/** An encoded tagged value with its `_tag` first (a class encodes it last): the model reads the kind first. */
const tagFirst = (encoded: unknown): unknown =>
  typeof encoded === "object" && encoded !== null && !Array.isArray(encoded) && "_tag" in encoded
    ? Object.assign({ _tag: encoded._tag }, encoded)
    : encoded

/** The message of a thrown `error`, or its text. */
export const errorMessage = (error: unknown): string => error instanceof Error ? error.message : String(error)
