/**
 * Anthropic Messages API (`POST {base}/v1/messages`, streamed: `stream: true`) as a `LanguageModel`.
 * Tools go out as `{ name, description, input_schema }`; `tool_use` blocks come back as tool calls;
 * tool results go back as `tool_result` blocks (with `is_error`), consecutive ones in one user message.
 * Thinking blocks (with their signatures) and redacted ones go back first in their assistant message,
 * byte for byte. Prompt caching: `cache_control` breakpoints on the system prompt, the last tool and
 * the conversation's last block. A typed final output is asked as a tool the model calls with its answer.
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import { outputText, outputTool } from "./outputTool.js"
import { optionalSecret, optionalString } from "../internal/util/settings.js"
import { endpoint, eventDecoder, layerModel, type LimitOptions, MissingApiKey, type StreamReader, turnFromBody } from "./Http.js"

/** How to reach the API. */
export interface Options extends LimitOptions {
  readonly model: string
  readonly apiKey: Redacted.Redacted<string>
  /** Default `https://api.anthropic.com`. */
  readonly baseUrl?: string | undefined
  /** Output token limit per turn. Default 4096. */
  readonly maxTokens?: number | undefined
  /**
   * Prompt caching: `cache_control: { type: "ephemeral" }` on the system prompt, the last tool
   * definition and the conversation's last block, so each turn reads the prefix the turn before
   * wrote. Default true.
   */
  readonly cache?: boolean | undefined
  /** Extended thinking with this budget of tokens (below `maxTokens`). Default: off. */
  readonly thinking?: { readonly budgetTokens: number } | undefined
}

/** The API's default address. */
export const defaultBaseUrl = "https://api.anthropic.com"

/** The Messages API as a `LanguageModel`, on the `HttpClient` in context. */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, HttpClient.HttpClient> => {
  const maxTokens = options.maxTokens ?? 4096
  return layerModel({
    name: "anthropic",
    model: options.model,
    url: endpoint(options.baseUrl ?? defaultBaseUrl, "/v1/messages"),
    headers: { "anthropic-version": "2023-06-01", "content-type": "application/json" },
    secretHeaders: { "x-api-key": options.apiKey },
    limits: options,
    toBody: (request) => toBody(options.model, maxTokens, request, options),
    fromBody,
    reader
  })
}

/** `layer` from the environment: `ANTHROPIC_API_KEY` (required) and `ANTHROPIC_BASE_URL`. */
export const layerConfig = (
  model: string,
  options?: Omit<Options, "model" | "apiKey" | "baseUrl">
): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const apiKey = yield* optionalSecret("ANTHROPIC_API_KEY")
    if (Option.isNone(apiKey)) return yield* new MissingApiKey({ variable: "ANTHROPIC_API_KEY", provider: "anthropic" })
    const baseUrl = Option.getOrElse(yield* optionalString("ANTHROPIC_BASE_URL"), () => defaultBaseUrl)
    return layer({ ...options, model, apiKey: apiKey.value, baseUrl })
  }))

// ---------------------------------------------------------------------------------------------
// Wire format.

const ephemeral = { type: "ephemeral" } as const

type Block = (
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
  | { readonly type: "redacted_thinking"; readonly data: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly type: "tool_result"; readonly tool_use_id: string; readonly content: string; readonly is_error?: boolean }
) & { readonly cache_control?: typeof ephemeral }

interface WireMessage {
  readonly role: "user" | "assistant"
  readonly content: Array<Block>
}

/** The request body of the Messages API, asking for a stream. */
const toBody = (
  model: string,
  maxTokens: number,
  request: LanguageModel.ModelRequest,
  options?: Pick<Options, "cache" | "thinking">
): unknown => {
  const cache = options?.cache ?? true
  const messages: Array<WireMessage> = []
  const push = (role: WireMessage["role"], blocks: ReadonlyArray<Block>) => {
    const last = messages[messages.length - 1]
    // The API wants user and assistant turns to alternate: consecutive user content is one message.
    if (last !== undefined && last.role === role && role === "user") last.content.push(...blocks)
    else messages.push({ role, content: [...blocks] })
  }
  for (const message of request.messages) {
    switch (message._tag) {
      case "UserMessage":
        push("user", [{ type: "text", text: message.text }])
        break
      case "AssistantMessage": {
        const blocks: Array<Block> = []
        // Thinking first, as it came, signature and all: the API checks them (a block without a
        // signature came from another provider and is not sent).
        for (const block of message.reasoning ?? []) {
          if (block._tag === "RedactedThinking") blocks.push({ type: "redacted_thinking", data: block.data })
          else if (block._tag === "Thinking" && block.signature !== undefined) {
            blocks.push({ type: "thinking", thinking: block.text, signature: block.signature })
          }
        }
        if (message.text !== undefined && message.text !== "") blocks.push({ type: "text", text: message.text })
        for (const call of message.toolCalls) {
          blocks.push({ type: "tool_use", id: call.id, name: call.name, input: argumentsObject(call.arguments) })
        }
        push("assistant", blocks)
        break
      }
      case "ToolResultMessage":
        push("user", [{
          type: "tool_result",
          tool_use_id: message.toolCallId,
          content: message.content,
          ...(message.isError ? { is_error: true } : {})
        }])
        break
    }
  }
  const tools: Array<Record<string, unknown>> = request.tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.parameters
  }))
  if (request.output !== undefined) tools.push(anthropicOutputTool(request.output))
  if (cache) {
    // The conversation's prefix: its last block, so the next turn reads all of this one from the cache.
    const last = messages[messages.length - 1]
    const block = last?.content[last.content.length - 1]
    if (last !== undefined && block !== undefined) {
      last.content[last.content.length - 1] = { ...block, cache_control: ephemeral }
    }
    const lastTool = tools[tools.length - 1]
    if (lastTool !== undefined) tools[tools.length - 1] = { ...lastTool, cache_control: ephemeral }
  }
  return {
    model,
    max_tokens: maxTokens,
    stream: true,
    ...(options?.thinking === undefined
      ? {}
      : { thinking: { type: "enabled", budget_tokens: options.thinking.budgetTokens } }),
    ...(request.instructions === undefined ? {} : {
      system: cache ? [{ type: "text", text: request.instructions, cache_control: ephemeral }] : request.instructions
    }),
    ...(tools.length === 0 ? {} : { tools }),
    messages
  }
}

// tool_use.input must be an object; arguments the model wrote badly are sent back as {}.
const argumentsObject = (text: string): unknown => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : {}
  } catch {
    return {}
  }
}

const WireUsage = Schema.Struct({
  input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  output_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  cache_creation_input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  cache_read_input_tokens: Schema.optional(Schema.NullOr(Schema.Number))
})
type WireUsage = typeof WireUsage.Type

/** Our usage from the API's: `input_tokens` (the prompt not read from the cache), and the cache's two counts when it gave them. */
const usageOf = (usage: WireUsage): LanguageModel.Usage => {
  const out: { -readonly [K in keyof LanguageModel.Usage]: LanguageModel.Usage[K] } = {
    inputTokens: usage.input_tokens ?? 0,
    outputTokens: usage.output_tokens ?? 0
  }
  if (usage.cache_read_input_tokens != null) out.cacheReadTokens = usage.cache_read_input_tokens
  if (usage.cache_creation_input_tokens != null) out.cacheWriteTokens = usage.cache_creation_input_tokens
  return out
}

const ResponseBody = Schema.Struct({
  content: Schema.Array(Schema.Union(
    Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
    Schema.Struct({ type: Schema.Literal("thinking"), thinking: Schema.String, signature: Schema.String }),
    Schema.Struct({ type: Schema.Literal("redacted_thinking"), data: Schema.String }),
    Schema.Struct({ type: Schema.Literal("tool_use"), id: Schema.String, name: Schema.String, input: Schema.Unknown }),
    // Other blocks (server tools) carry nothing the loop uses.
    Schema.Struct({ type: Schema.String })
  )),
  stop_reason: Schema.NullOr(Schema.String),
  usage: WireUsage
})

const finishReasons: Record<string, LanguageModel.FinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  refusal: "content_filter"
}

/** Our finish reason; a turn that only gave the typed output stopped, it did not call tools. */
const finishOf = (stopReason: string | null | undefined, calls: number): LanguageModel.FinishReason => {
  const reason = (stopReason == null ? undefined : finishReasons[stopReason]) ?? "other"
  return reason === "tool_calls" && calls === 0 ? "stop" : reason
}

/** A Messages API response (a server that did not stream) as a turn. */
const fromBody = turnFromBody("anthropic", ResponseBody, ({ content, stop_reason, usage }, request) => {
  const texts: Array<string> = []
  const toolCalls: Array<LanguageModel.ToolCall> = []
  const reasoning: Array<LanguageModel.ReasoningBlock> = []
  for (const block of content) {
    if (block.type === "text" && "text" in block) texts.push(block.text)
    else if (block.type === "thinking" && "thinking" in block) {
      reasoning.push({ _tag: "Thinking", text: block.thinking, signature: block.signature })
    } else if (block.type === "redacted_thinking" && "data" in block) {
      reasoning.push({ _tag: "RedactedThinking", data: block.data })
    } else if (block.type === "tool_use" && "input" in block) {
      const args = JSON.stringify(block.input ?? {})
      if (request.output !== undefined && block.name === request.output.name) texts.push(outputText(request.output, args))
      else toolCalls.push({ id: block.id, name: block.name, arguments: args })
    }
  }
  const turn = {
    text: texts.length === 0 ? undefined : texts.join(""),
    toolCalls,
    finishReason: finishOf(stop_reason, toolCalls.length),
    usage: usageOf(usage)
  }
  return reasoning.length === 0 ? turn : { ...turn, reasoning }
})

// ---------------------------------------------------------------------------------------------
// The stream: message_start, then per content block content_block_start, its deltas and
// content_block_stop, then message_delta (stop reason, output tokens) and message_stop; ping between.

const StreamEvent = Schema.Union(
  Schema.Struct({ type: Schema.Literal("message_start"), message: Schema.Struct({ usage: WireUsage }) }),
  Schema.Struct({
    type: Schema.Literal("content_block_start"),
    index: Schema.Number,
    content_block: Schema.Struct({
      type: Schema.String,
      id: Schema.optional(Schema.String),
      name: Schema.optional(Schema.String),
      data: Schema.optional(Schema.String)
    })
  }),
  Schema.Struct({
    type: Schema.Literal("content_block_delta"),
    index: Schema.Number,
    delta: Schema.Struct({
      type: Schema.String,
      text: Schema.optional(Schema.String),
      partial_json: Schema.optional(Schema.String),
      thinking: Schema.optional(Schema.String),
      signature: Schema.optional(Schema.String)
    })
  }),
  Schema.Struct({ type: Schema.Literal("content_block_stop"), index: Schema.Number }),
  Schema.Struct({
    type: Schema.Literal("message_delta"),
    delta: Schema.Struct({ stop_reason: Schema.optional(Schema.NullOr(Schema.String)) }),
    usage: Schema.optional(WireUsage)
  }),
  Schema.Struct({ type: Schema.Literal("message_stop") }),
  Schema.Struct({
    type: Schema.Literal("error"),
    error: Schema.Struct({ type: Schema.String, message: Schema.String })
  }),
  // ping, and events added later: nothing the loop uses.
  Schema.Struct({ type: Schema.String })
)

const decodeEvent = eventDecoder("anthropic", StreamEvent)

/** Errors the API reports mid-stream that are worth asking again for. */
const transientErrors = new Set(["overloaded_error", "api_error", "rate_limit_error", "timeout_error"])

interface OpenBlock {
  readonly type: string
  readonly id: string
  readonly name: string
  text: string
  signature: string
  json: string
  readonly data: string
}

/** The part a content block makes once complete: a tool call (or the typed output), a reasoning block. */
const completed = (block: OpenBlock, request: LanguageModel.ModelRequest): LanguageModel.ModelPart | undefined => {
  switch (block.type) {
    case "tool_use": {
      const args = block.json === "" ? "{}" : block.json
      if (request.output !== undefined && block.name === request.output.name) {
        return LanguageModel.ModelPart.TextDelta({ text: outputText(request.output, args) })
      }
      return LanguageModel.ModelPart.ToolCall({ call: { id: block.id, name: block.name, arguments: args } })
    }
    case "thinking":
      return LanguageModel.ModelPart.Reasoning({ block: { _tag: "Thinking", text: block.text, signature: block.signature } })
    case "redacted_thinking":
      return LanguageModel.ModelPart.Reasoning({ block: { _tag: "RedactedThinking", data: block.data } })
    default:
      return undefined
  }
}

/** Reads one streamed Messages answer. */
const reader = (request: LanguageModel.ModelRequest): StreamReader => {
  const blocks = new Map<number, OpenBlock>()
  let usage: WireUsage = {}
  let stopReason: string | null | undefined
  let calls = 0
  let stopped = false
  return {
    event: ({ data }) => {
      const event = decodeEvent(data)
      if (event instanceof LanguageModel.ModelError) return event
      switch (event.type) {
        case "message_start":
          if ("message" in event) usage = event.message.usage
          return []
        case "content_block_start":
          if ("content_block" in event) {
            const block = event.content_block
            blocks.set(event.index, {
              type: block.type,
              id: block.id ?? "",
              name: block.name ?? "",
              data: block.data ?? "",
              text: "",
              signature: "",
              json: ""
            })
          }
          return []
        case "content_block_delta": {
          if (!("delta" in event)) return []
          const block = blocks.get(event.index)
          const delta = event.delta
          if (delta.type === "text_delta" && delta.text !== undefined) {
            return [LanguageModel.ModelPart.TextDelta({ text: delta.text })]
          }
          if (block === undefined) return []
          if (delta.type === "input_json_delta" && delta.partial_json !== undefined) block.json += delta.partial_json
          else if (delta.type === "thinking_delta" && delta.thinking !== undefined) {
            block.text += delta.thinking
            return [LanguageModel.ModelPart.ReasoningDelta({ text: delta.thinking })]
          } else if (delta.type === "signature_delta" && delta.signature !== undefined) block.signature += delta.signature
          return []
        }
        case "content_block_stop": {
          if (!("index" in event)) return []
          const block = blocks.get(event.index)
          blocks.delete(event.index)
          const part = block === undefined ? undefined : completed(block, request)
          if (part?._tag === "ToolCall") calls++
          return part === undefined ? [] : [part]
        }
        case "message_delta":
          if ("delta" in event) {
            stopReason = event.delta.stop_reason
            // Its counts are the message's so far: they replace message_start's where given.
            if (event.usage !== undefined) {
              usage = Object.fromEntries(
                [...Object.entries(usage), ...Object.entries(event.usage).filter(([, v]) => v != null)]
              ) as WireUsage
            }
          }
          return []
        case "message_stop":
          stopped = true
          return [
            LanguageModel.ModelPart.Usage({ usage: usageOf(usage) }),
            LanguageModel.ModelPart.Finish({ finishReason: finishOf(stopReason, calls) })
          ]
        case "error":
          if (!("error" in event)) return []
          return new LanguageModel.ModelError({
            message: `anthropic: ${event.error.type}: ${event.error.message}`,
            transient: transientErrors.has(event.error.type)
          })
        default:
          return []
      }
    },
    end: () =>
      stopped ? undefined : new LanguageModel.ModelError({
        message: "anthropic: the stream ended before message_stop",
        transient: true
      })
  }
}

/** The output tool as Anthropic's tool definition. */
const anthropicOutputTool = (output: LanguageModel.OutputFormat) => {
  const { description, name, parameters } = outputTool(output)
  return { name, description, input_schema: parameters }
}

