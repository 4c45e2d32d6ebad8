/**
 * Anthropic Messages API (`POST {base}/v1/messages`) as a `LanguageModel`. Tools go out as
 * `{ name, description, input_schema }`; `tool_use` blocks come back as tool calls; tool results go
 * back as `tool_result` blocks (with `is_error`), consecutive ones in one user message.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import { Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import { optionalSecret, optionalString } from "../internal/util/settings.js"
import { endpoint, layerModel, MissingApiKey, turnFromBody } from "./Http.js"

/** How to reach the API. */
export interface Options {
  readonly model: string
  readonly apiKey: Redacted.Redacted<string>
  /** Default `https://api.anthropic.com`. */
  readonly baseUrl?: string | undefined
  /** Output token limit per turn. Default 4096. */
  readonly maxTokens?: number | undefined
  /** Per-request timeout. Default 2 minutes. */
  readonly timeout?: Duration.DurationInput | undefined
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
    timeout: options.timeout,
    toBody: (request) => toBody(options.model, maxTokens, request),
    fromBody
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

type Block =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly type: "tool_result"; readonly tool_use_id: string; readonly content: string; readonly is_error?: boolean }

interface WireMessage {
  readonly role: "user" | "assistant"
  readonly content: Array<Block>
}

/** The request body of the Messages API. */
export const toBody = (model: string, maxTokens: number, request: LanguageModel.ModelRequest): unknown => {
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
  return {
    model,
    max_tokens: maxTokens,
    ...(request.instructions === undefined ? {} : { system: request.instructions }),
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        input_schema: tool.parameters
      }))
    }),
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

const ResponseBody = Schema.Struct({
  content: Schema.Array(Schema.Union(
    Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
    Schema.Struct({ type: Schema.Literal("tool_use"), id: Schema.String, name: Schema.String, input: Schema.Unknown }),
    // Other blocks (thinking, server tools) carry nothing the loop uses.
    Schema.Struct({ type: Schema.String })
  )),
  stop_reason: Schema.NullOr(Schema.String),
  usage: Schema.Struct({ input_tokens: Schema.Number, output_tokens: Schema.Number })
})

const finishReasons: Record<string, LanguageModel.FinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  tool_use: "tool_calls",
  max_tokens: "length",
  refusal: "content_filter"
}

/** A Messages API response as a turn. */
export const fromBody = turnFromBody("anthropic", ResponseBody, ({ content, stop_reason, usage }) => {
  const texts: Array<string> = []
  const toolCalls: Array<LanguageModel.ToolCall> = []
  for (const block of content) {
    if (block.type === "text" && "text" in block) texts.push(block.text)
    else if (block.type === "tool_use" && "input" in block) {
      toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) })
    }
  }
  return {
    text: texts.length === 0 ? undefined : texts.join(""),
    toolCalls,
    finishReason: (stop_reason === null ? undefined : finishReasons[stop_reason]) ?? "other",
    usage: { inputTokens: usage.input_tokens, outputTokens: usage.output_tokens }
  }
})
