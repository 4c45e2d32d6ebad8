/**
 * The two task events that are not plain (internal/util/plain.ts), encoded and decoded by hand on the way
 * every delivered call takes: `ToolCallCompleted` (its result a `ToolResult`, `cached` a default) and
 * `TaskCompleted` (`steps` and `usage` defaults). Only their common shape is taken: a successful result, the
 * fields of their types; anything else (a failed result, a field of another type) gives undefined and goes to
 * Effect's parser, for its words. `test/PlainSchema.test.ts` holds them to what Effect's encode and decode give.
 */
import { ToolResult } from "../ToolResult.js"
import type { PlainCodec } from "../internal/util/plain.js"

type Fields = Record<string, unknown>

const hasOwn = (value: object, key: string): boolean => Object.prototype.hasOwnProperty.call(value, key)

const isRecord = (value: unknown): value is Fields =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** `offset` (`Schema.optional(Schema.Number)`): absent stays absent; present, a number or undefined. */
const offsetOk = (value: Fields): boolean =>
  !hasOwn(value, "offset") || value.offset === undefined || typeof value.offset === "number"

/** An optional number (`Schema.optional`): absent, undefined or a number. */
const optionalNumber = (value: Fields, key: string): boolean =>
  !hasOwn(value, key) || value[key] === undefined || typeof value[key] === "number"

/** The event's `offset` added as it came, when it came. */
const withOffset = (out: Fields, value: Fields): Fields => {
  if (hasOwn(value, "offset")) out.offset = value.offset
  return out
}

/** The common fields of a `ToolCallCompleted`: its task, call and tool names. */
const namesOk = (value: Fields): boolean =>
  typeof value.taskId === "string" && typeof value.toolCallId === "string" && typeof value.name === "string"

/** A task's token usage, its known fields in the Schema's order; undefined if one is not a number. */
const usageOf = (usage: unknown): Fields | undefined => {
  if (!isRecord(usage) || typeof usage.inputTokens !== "number" || typeof usage.outputTokens !== "number") return undefined
  if (!optionalNumber(usage, "cacheReadTokens") || !optionalNumber(usage, "cacheWriteTokens")) return undefined
  const out: Fields = { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens }
  if (hasOwn(usage, "cacheReadTokens")) out.cacheReadTokens = usage.cacheReadTokens
  if (hasOwn(usage, "cacheWriteTokens")) out.cacheWriteTokens = usage.cacheWriteTokens
  return out
}

/** `TaskCompleted`'s fields after its `output`, `steps` and `usage` given (by the encoder or the decoder's defaults). */
const taskCompleted = (value: Fields, steps: unknown, usage: unknown): Fields | undefined => {
  if (typeof value.taskId !== "string" || typeof value.output !== "string" || typeof steps !== "number") return undefined
  const checked = usageOf(usage)
  if (checked === undefined || !offsetOk(value)) return undefined
  const out: Fields = { _tag: "TaskCompleted", taskId: value.taskId, output: value.output, steps, usage: checked }
  if (hasOwn(value, "value")) out.value = value.value
  return withOffset(out, value)
}

/** An event as its stream carries it (the platform's side): these two, by tag. */
export const encoders: ReadonlyMap<string, PlainCodec> = new Map<string, PlainCodec>([
  ["ToolCallCompleted", (value) => {
    if (!isRecord(value) || !namesOk(value) || typeof value.cached !== "boolean" || !offsetOk(value)) return undefined
    const result = value.result
    if (!(result instanceof ToolResult) || result.error !== undefined) return undefined
    return withOffset({
      _tag: "ToolCallCompleted",
      taskId: value.taskId,
      toolCallId: value.toolCallId,
      name: value.name,
      result: { value: result.value },
      cached: value.cached
    }, value)
  }],
  ["TaskCompleted", (value) => isRecord(value) ? taskCompleted(value, value.steps, value.usage) : undefined]
])

/** An event from its stream (a serving process's side): these two, by tag, their defaults filled in. */
export const decoders: ReadonlyMap<string, PlainCodec> = new Map<string, PlainCodec>([
  ["ToolCallCompleted", (value) => {
    if (!isRecord(value) || !namesOk(value) || !offsetOk(value)) return undefined
    const cached = value.cached === undefined ? false : value.cached
    const result = value.result
    // A failed result (its error, its kind) is Effect's to decode.
    if (typeof cached !== "boolean" || !isRecord(result) || hasOwn(result, "error") || hasOwn(result, "failure")) return undefined
    return withOffset({
      _tag: "ToolCallCompleted",
      taskId: value.taskId,
      toolCallId: value.toolCallId,
      name: value.name,
      result: ToolResult.success(result.value),
      cached
    }, value)
  }],
  ["TaskCompleted", (value) =>
    isRecord(value)
      ? taskCompleted(
        value,
        value.steps === undefined ? 0 : value.steps,
        value.usage === undefined ? { inputTokens: 0, outputTokens: 0 } : value.usage
      )
      : undefined]
])
