/**
 * The outcome of one tool call (design: Error text): the encoded output in `value`, or a failure,
 * known by its kind (`failure._tag`, for hooks and callers to match on) and by its text (`error`,
 * what the model reads). On the platform's wire a failure travels as its text and its kind
 * (`TypedToolResultFromJson`); in the stores only the text is kept (`ToolResultFromJson`).
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Schema from "effect/Schema"
import { formatDuration } from "./internal/util/duration.js"
import { clip } from "./internal/util/text.js"

/** The arguments were refused before anything ran (design: Input): too large, not JSON, a refused key, the Schema's issues. */
export class InvalidInput extends Data.TaggedClass("InvalidInput")<{
  readonly toolName: string
  readonly reason: string
}> {
  get text(): string {
    return `${this.toolName}: invalid input: ${this.reason}`
  }
}

/** The delivered deadline had passed when the call arrived (design: Deadlines): it did not run. */
export class DeadlinePassed extends Data.TaggedClass("DeadlinePassed")<{ readonly toolName: string }> {
  get text(): string {
    return `${this.toolName}: its deadline passed before it started; it did not run`
  }
}

/** The handler was stopped at the call's deadline, `allowedMillis` after it started (design: Deadlines). */
export class TimedOut extends Data.TaggedClass("TimedOut")<{
  readonly toolName: string
  readonly allowedMillis: number
}> {
  get text(): string {
    const allowed = formatDuration(this.allowedMillis)
    return `${this.toolName} timed out after ${allowed}; its outcome is unknown`
  }
}

/**
 * The handler failed or died; `text` is its error text (design: Error text), or the tool's `errorTransform` of it.
 * `E` is the type of the handler's failures, where the caller knows it (`Invocation.call`).
 */
export class HandlerFailed<E = unknown> extends Data.TaggedClass("HandlerFailed")<{
  readonly toolName: string
  readonly cause: Cause.Cause<E>
  readonly text: string
}> {}

/** The handler was interrupted by something other than the deadline (it interrupted itself): the outcome is unknown. */
export class Interrupted extends Data.TaggedClass("Interrupted")<{ readonly toolName: string }> {
  get text(): string {
    return `${this.toolName}: the call was interrupted; its outcome is unknown`
  }
}

/**
 * The output failed the tool's output Schema, or is not JSON, or is past the limits (design: Error
 * text, Hostile clients). `toolName` is absent where only the result is known (a serving process
 * cutting an answer too large for the platform's frames).
 */
export class InvalidOutput extends Data.TaggedClass("InvalidOutput")<{
  readonly toolName?: string
  readonly reason: string
}> {
  get text(): string {
    return this.toolName === undefined
      ? `invalid output: ${this.reason}`
      : `${this.toolName}: invalid output: ${this.reason}`
  }
}

/** A tool hook failed or died (design: Hooks); the call fails closed. */
export class HookFailed extends Data.TaggedClass("HookFailed")<{
  readonly toolName: string
  readonly cause: Cause.Cause<unknown>
}> {
  get text(): string {
    return `${this.toolName}: a hook failed: ${errorText(Cause.squash(this.cause))}`
  }
}

/**
 * A hook refused the call (no approval, no one to approve, a spent budget), or it needed an approval and none
 * was given (design: Hooks); it did not run.
 */
export class Denied extends Data.TaggedClass("Denied")<{ readonly toolName: string; readonly reason: string }> {
  get text(): string {
    return `${this.toolName}: ${this.reason}`
  }
}

/**
 * No tool of that name is here (design: Error text). Every face's door makes it with `Toolkit.unknownTool`,
 * `available` listing the tools there are; made without `available`, it reads that this process
 * does not serve the tool (the serving side's text before there was one text).
 */
export class UnknownTool extends Data.TaggedClass("UnknownTool")<{
  readonly toolName: string
  readonly available?: ReadonlyArray<string>
}> {
  get text(): string {
    if (this.available === undefined) return `${this.toolName}: this process does not serve this tool`
    return this.available.length === 0
      ? `${this.toolName}: no such tool; there are no tools`
      : `${this.toolName}: no such tool; the available tools are ${this.available.join(", ")}`
  }
}

/**
 * An earlier delivery of the call (design: Delivery dedupe, Interruption and shutdown) was
 * interrupted after its handler started, or died unfinished: whether it had its effect is unknown,
 * so an idempotent tool is not run again.
 */
export class OutcomeUnknown extends Data.TaggedClass("OutcomeUnknown")<{
  readonly toolName: string
  /**
   * `interrupted`, `unfinished`: an earlier attempt's; `stopped`: this attempt's, stopped because its
   * claim could not be kept (the dedupe store failed past the lease), so that it cannot run twice.
   */
  readonly earlierAttempt: "interrupted" | "unfinished" | "stopped"
}> {
  get text(): string {
    return this.earlierAttempt === "interrupted"
      ? `${this.toolName}: the earlier attempt was interrupted; its outcome is unknown`
      : this.earlierAttempt === "stopped"
      ? `${this.toolName}: the call was stopped when its claim could not be renewed (the dedupe store failed); its outcome is unknown`
      : `${this.toolName}: the earlier attempt did not finish; its outcome is unknown`
  }
}

/**
 * A failure known only by its text: a result decoded from the wire or read back from a store
 * (only the text travels), or made by a caller that has only a text.
 */
export class Unclassified extends Data.TaggedClass("Unclassified")<{ readonly text: string }> {}

/**
 * What went wrong in a call, by kind; `text` is the model-facing error text of each. `E` is the type of
 * the handler's failures in `HandlerFailed`'s cause, where the caller knows it (`Invocation.call`).
 */
export type ToolFailure<E = unknown> =
  | InvalidInput
  | DeadlinePassed
  | TimedOut
  | HandlerFailed<E>
  | Interrupted
  | InvalidOutput
  | HookFailed
  | Denied
  | UnknownTool
  | OutcomeUnknown
  | Unclassified

/** The outcome of one call: the encoded output in `value`, or the `failure` and its text in `error`. */
export class ToolResult {
  /** A successful result with the encoded output `value`. */
  static success(value: unknown): ToolResult {
    return new ToolResult(value, undefined)
  }

  /**
   * A failed result. A plain text (all a caller may have) is an `Unclassified` failure. `error` is
   * the failure's text, cut to `maxErrorLength` characters (the pipeline's limit; none by default).
   */
  static failure(failure: ToolFailure | string, maxErrorLength?: number): ToolResult {
    const known = typeof failure === "string" ? new Unclassified({ text: failure }) : failure
    return new ToolResult(undefined, known, maxErrorLength)
  }

  /** The error text the model reads, when the call failed: `failure.text`, cut to the limit it was made with. */
  readonly error: string | undefined

  constructor(
    /** The encoded output (plain JSON), when the call succeeded. */
    readonly value: unknown,
    /** What went wrong, when it did not. */
    readonly failure: ToolFailure | undefined,
    maxErrorLength?: number
  ) {
    this.error = failure === undefined ? undefined : cut(failure.text, maxErrorLength)
  }

  /** True when the call produced a value: derived, never set. */
  get success(): boolean {
    return this.failure === undefined
  }
}

/** `ToolResult` on the wire: `{ value }` or `{ error }`; a decoded failure is `Unclassified` (only the text travels). */
export const ToolResultFromJson: Schema.Schema<ToolResult, { readonly value?: unknown; readonly error?: string }> =
  Schema.transform(
    Schema.Struct({
      value: Schema.optionalWith(Schema.Unknown, { exact: true }),
      error: Schema.optionalWith(Schema.String, { exact: true })
    }),
    Schema.instanceOf(ToolResult),
    {
      strict: true,
      decode: ({ error, value }) => error === undefined ? ToolResult.success(value) : ToolResult.failure(error),
      encode: (result) => result.error === undefined ? { value: result.value } : { error: result.error }
    }
  )

/**
 * A failure's kind as it travels beside its text: the `_tag` and the fields the text is not made of
 * (a `Cause` stays with the process it happened in; its text travels).
 */
const FailureKind = Schema.Union(
  Schema.TaggedStruct("InvalidInput", { toolName: Schema.String }),
  Schema.TaggedStruct("DeadlinePassed", { toolName: Schema.String }),
  Schema.TaggedStruct("TimedOut", { toolName: Schema.String, allowedMillis: Schema.Number }),
  Schema.TaggedStruct("HandlerFailed", { toolName: Schema.String }),
  Schema.TaggedStruct("Interrupted", { toolName: Schema.String }),
  Schema.TaggedStruct("InvalidOutput", { toolName: Schema.optionalWith(Schema.String, { exact: true }) }),
  Schema.TaggedStruct("HookFailed", { toolName: Schema.String }),
  Schema.TaggedStruct("Denied", { toolName: Schema.String }),
  Schema.TaggedStruct("UnknownTool", {
    toolName: Schema.String,
    available: Schema.optionalWith(Schema.Array(Schema.String), { exact: true })
  }),
  Schema.TaggedStruct("OutcomeUnknown", { toolName: Schema.String, earlierAttempt: Schema.Literal("interrupted", "unfinished", "stopped") })
)
type FailureKind = typeof FailureKind.Type

const decodeKind = Schema.decodeUnknownOption(FailureKind)

/** The kind of `failure` as it travels; an `Unclassified` one has none (its text is all there is). */
const kindOf = (failure: ToolFailure): FailureKind | undefined => {
  switch (failure._tag) {
    case "TimedOut":
      return { _tag: failure._tag, toolName: failure.toolName, allowedMillis: failure.allowedMillis }
    case "InvalidOutput":
      return failure.toolName === undefined ? { _tag: failure._tag } : { _tag: failure._tag, toolName: failure.toolName }
    case "UnknownTool":
      return failure.available === undefined
        ? { _tag: failure._tag, toolName: failure.toolName }
        : { _tag: failure._tag, toolName: failure.toolName, available: failure.available }
    case "OutcomeUnknown":
      return { _tag: failure._tag, toolName: failure.toolName, earlierAttempt: failure.earlierAttempt }
    case "Unclassified":
      return undefined
    default:
      return { _tag: failure._tag, toolName: failure.toolName }
  }
}

/** An error that reads as `text` (`errorText` of it is `text`): the cause of a failure rebuilt from its text. */
class RemoteError {
  readonly _tag: string
  readonly message: string
  constructor(text: string) {
    const colon = text.indexOf(": ")
    this._tag = colon < 0 ? text : text.slice(0, colon)
    this.message = colon < 0 ? "" : text.slice(colon + 2)
  }
}

/** What follows `prefix` in `text`; undefined when `text` does not start with it. */
const after = (text: string, prefix: string): string | undefined =>
  text.startsWith(prefix) ? text.slice(prefix.length) : undefined

/** The failure of `kind` whose text is `text`, its text-made fields read back from it; undefined if `text` is not its text. */
const rebuild = (kind: FailureKind, text: string): ToolFailure | undefined => {
  switch (kind._tag) {
    case "InvalidInput": {
      const reason = after(text, `${kind.toolName}: invalid input: `)
      return reason === undefined ? undefined : new InvalidInput({ toolName: kind.toolName, reason })
    }
    case "DeadlinePassed":
      return new DeadlinePassed(kind)
    case "TimedOut":
      return new TimedOut(kind)
    case "HandlerFailed":
      return new HandlerFailed({ toolName: kind.toolName, cause: Cause.fail(new RemoteError(text)), text })
    case "Interrupted":
      return new Interrupted(kind)
    case "InvalidOutput": {
      const reason = after(text, kind.toolName === undefined ? "invalid output: " : `${kind.toolName}: invalid output: `)
      return reason === undefined ? undefined : new InvalidOutput({ ...kind, reason })
    }
    case "HookFailed": {
      const error = after(text, `${kind.toolName}: a hook failed: `)
      return error === undefined ? undefined : new HookFailed({ toolName: kind.toolName, cause: Cause.fail(new RemoteError(error)) })
    }
    case "Denied": {
      const reason = after(text, `${kind.toolName}: `)
      return reason === undefined ? undefined : new Denied({ toolName: kind.toolName, reason })
    }
    case "UnknownTool":
      return new UnknownTool(kind)
    case "OutcomeUnknown":
      return new OutcomeUnknown(kind)
  }
}

/** The failure an answer's `error` and `failure` (its kind) describe: that kind if its text is `error`, else `Unclassified`. */
const failureFrom = (error: string, failure: unknown): ToolFailure => {
  const kind = failure === undefined ? undefined : decodeKind(failure)
  const rebuilt = kind === undefined || kind._tag === "None" ? undefined : rebuild(kind.value, error)
  // A kind whose text is not the one sent (a cut text, another version's wording) keeps the text, unclassified.
  return rebuilt !== undefined && rebuilt.text === error ? rebuilt : new Unclassified({ text: error })
}

/**
 * `ToolResult` on the platform's wire: `{ value }`, or `{ error, failure }` where `failure` is the
 * failure's kind (`_tag` and the fields its text is not made of), so the other side rebuilds the same
 * `ToolFailure` (a `TimedOut` stays `TimedOut`; design: Error text). An answer without a kind, or one
 * whose kind does not match its text, decodes as `Unclassified` with the text, as `ToolResultFromJson`.
 */
export const TypedToolResultFromJson: Schema.Schema<
  ToolResult,
  { readonly value?: unknown; readonly error?: string; readonly failure?: unknown }
> = Schema.transform(
  Schema.Struct({
    value: Schema.optionalWith(Schema.Unknown, { exact: true }),
    error: Schema.optionalWith(Schema.String, { exact: true }),
    failure: Schema.optionalWith(Schema.Unknown, { exact: true })
  }),
  Schema.instanceOf(ToolResult),
  {
    strict: true,
    decode: ({ error, failure, value }) =>
      error === undefined ? ToolResult.success(value) : new ToolResult(undefined, failureFrom(error, failure)),
    encode: (result) => {
      if (result.error === undefined) return { value: result.value }
      const kind = kindOf(result.failure!)
      return kind === undefined ? { error: result.error } : { error: result.error, failure: kind }
    }
  }
)

/** Cuts `text` to at most `max` characters, marking the cut (`clip`). */
const cut = (text: string, max: number | undefined): string => max === undefined ? text : clip(text, max)

/** The error text of an error value or defect: `<Name>: <message>`. */
export const errorText = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return `Error: ${String(error)}`
  const record = error as Record<string, unknown>
  const ctor = (error as { constructor?: { name?: unknown } }).constructor
  const name = typeof record._tag === "string" ? record._tag
    : typeof ctor?.name === "string" && ctor.name !== "" && ctor !== Object ? ctor.name
    : "Error"
  const message = typeof record.message === "string" ? record.message : ""
  if (message !== "") return `${name}: ${message}`
  const fields = fieldsJson(record)
  return fields === undefined ? name : `${name}: ${fields}`
}

// A tagged error with no message still says something useful through its fields.
const fieldsJson = (record: Record<string, unknown>): string | undefined => {
  const fields: Record<string, unknown> = {}
  let any = false
  for (const key of Object.keys(record)) {
    if (key === "_tag" || key === "message" || key === "stack" || key === "name" || key === "cause") continue
    fields[key] = record[key]
    any = true
  }
  if (!any) return undefined
  try {
    return JSON.stringify(fields)
  } catch {
    return undefined
  }
}
