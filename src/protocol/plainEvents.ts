/**
 * The two task events that are not plain (internal/util/plain.ts), encoded and decoded by hand on the way
 * every delivered call takes: `ToolCallCompleted` (its result a `ToolResult`, `cached` a default) and
 * `TaskCompleted` (`steps` and `usage` defaults); and the payload of the calls' answers (`CompleteToolCall`,
 * a `ToolResult` each), decoded by the platform. Only their common shape is taken: a successful result, the
 * fields of their types; anything else (a failed result, a field of another type) gives undefined and goes to
 * Effect's parser, for its words. `test/PlainSchema.test.ts` holds them to what Effect's encode and decode give.
 */
import { hasOwn, isRecord, type PlainCodec } from "../internal/util/plain.js"
import { ToolResult } from "../ToolResult.js"
import { eventDefaults } from "./Protocol.js"

type Fields = Record<PropertyKey, unknown>

/** An optional number (`Schema.optional`, as `offset`): absent, undefined or a number. */
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
  if (checked === undefined || !optionalNumber(value, "offset")) return undefined
  const out: Fields = { _tag: "TaskCompleted", taskId: value.taskId, output: value.output, steps, usage: checked }
  if (hasOwn(value, "value")) out.value = value.value
  return withOffset(out, value)
}

/** An event as its stream carries it (the platform's side): these two, by tag. */
export const encoders: ReadonlyMap<string, PlainCodec> = new Map<string, PlainCodec>([
  ["ToolCallCompleted", (value) => {
    if (!isRecord(value) || !namesOk(value) || typeof value.cached !== "boolean" || !optionalNumber(value, "offset")) return undefined
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

/** A call's result as the wire carries it (`TypedToolResultFromJson`), when successful; a failed one is Effect's to decode. */
const successResult = (result: unknown): ToolResult | undefined =>
  !isRecord(result) || hasOwn(result, "error") || hasOwn(result, "failure") ? undefined : ToolResult.success(result.value)

/** An event from its stream (a serving process's side): these two, by tag, their defaults filled in. */
export const decoders: ReadonlyMap<string, PlainCodec> = new Map<string, PlainCodec>([
  ["ToolCallCompleted", (value) => {
    if (!isRecord(value) || !namesOk(value) || !optionalNumber(value, "offset")) return undefined
    const cached = value.cached === undefined ? eventDefaults.cached() : value.cached
    const result = successResult(value.result)
    if (typeof cached !== "boolean" || result === undefined) return undefined
    return withOffset({
      _tag: "ToolCallCompleted",
      taskId: value.taskId,
      toolCallId: value.toolCallId,
      name: value.name,
      result,
      cached
    }, value)
  }],
  ["TaskCompleted", (value) =>
    isRecord(value)
      ? taskCompleted(
        value,
        value.steps === undefined ? eventDefaults.steps() : value.steps,
        value.usage === undefined ? eventDefaults.usage() : value.usage
      )
      : undefined]
])

/**
 * `CompleteToolCall`'s payload (the platform's side): the answers of delivered calls, each successful; a failed one, or
 * a field of another type, gives undefined (Effect's parser then decodes it, for its words).
 */
export const decodeAnswers: PlainCodec = (value) => {
  if (!isRecord(value) || typeof value.agentId !== "string" || typeof value.processId !== "string") return undefined
  const given = value.results
  if (!Array.isArray(given)) return undefined
  const results: Array<Fields> = []
  for (const answer of given) {
    if (!isRecord(answer) || typeof answer.taskId !== "string" || typeof answer.toolCallId !== "string") return undefined
    const result = successResult(answer.result)
    if (result === undefined) return undefined
    results.push({ taskId: answer.taskId, toolCallId: answer.toolCallId, result })
  }
  return { agentId: value.agentId, processId: value.processId, results }
}
