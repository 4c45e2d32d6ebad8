/**
 * OpenAI's Responses API (`POST {base}/responses`, streamed) as a `LanguageModel`, beside Chat
 * Completions (`OpenAi.ts`): the model string `openai-responses:<model>`. The conversation goes out
 * as `input` items (messages, `function_call` and `function_call_output`), statelessly
 * (`store: false`); tools as `{ type: "function", name, description, parameters }`; a typed final
 * output as `text.format` `json_schema`. A reasoning model's reasoning items come back encrypted
 * (`include: ["reasoning.encrypted_content"]`) and are kept with the turn, and sent back before the
 * calls they led to, as the API requires of a stateless conversation (design: The model side).
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import { type Layer, type Redacted, Schema } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import { endpoint, eventDecoder, layerModel, type LimitOptions, type StreamReader, turnFromBody } from "./Http.js"
import { usageFrom } from "./httpBody.js"
import { bearer, defaultBaseUrl, fromEnvironment } from "./OpenAi.js"

/** How to reach the API, and what to ask of a reasoning model. */
export interface Options extends LimitOptions {
  readonly model: string
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Default `https://api.openai.com/v1`. */
  readonly baseUrl?: string | undefined
  /** Output token limit per turn (`max_output_tokens`). Default: the server's. */
  readonly maxTokens?: number | undefined
  /**
   * A reasoning model's `reasoning` settings, sent as they are (`{ effort: "low", summary: "auto" }`).
   * With it, or for a model named like a reasoning one (`o1`..., `o3`..., `o4`..., `gpt-5`...), the
   * encrypted reasoning is asked for and kept across turns.
   */
  readonly reasoning?: { readonly effort?: string | undefined; readonly summary?: string | undefined } | undefined
}

/** The Responses API as a `LanguageModel`, on the `HttpClient` in context. */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, HttpClient.HttpClient> =>
  layerModel({
    name: "openai",
    model: options.model,
    url: endpoint(options.baseUrl ?? defaultBaseUrl, "/responses"),
    headers: { "content-type": "application/json" },
    secretHeaders: bearer(options.apiKey),
    limits: options,
    toBody: (request) => toBody(options, request),
    fromBody,
    reader
  })

/** `layer` from the environment, as Chat Completions reads it: `OPENAI_API_KEY`, `OPENAI_BASE_URL`. */
export const layerConfig = fromEnvironment(layer)

// ---------------------------------------------------------------------------------------------
// Wire format.

const reasoningModel = /^(o\d|gpt-5|codex)/

/** The request body: the conversation as input items, asking for a stream. */
const toBody = (options: Options, request: LanguageModel.ModelRequest): unknown => {
  const input: Array<unknown> = []
  for (const message of request.messages) {
    switch (message._tag) {
      case "UserMessage":
        input.push({ role: "user", content: message.text })
        break
      case "AssistantMessage":
        // Reasoning first, as it came: the calls after it are what it led to.
        for (const block of message.reasoning ?? []) {
          if (block._tag !== "EncryptedReasoning") continue
          input.push({
            type: "reasoning",
            id: block.id,
            summary: block.summary === undefined ? [] : [{ type: "summary_text", text: block.summary }],
            encrypted_content: block.data
          })
        }
        if (message.text !== undefined && message.text !== "") input.push({ role: "assistant", content: message.text })
        for (const call of message.toolCalls) {
          input.push({ type: "function_call", call_id: call.id, name: call.name, arguments: call.arguments })
        }
        break
      case "ToolResultMessage":
        input.push({ type: "function_call_output", call_id: message.toolCallId, output: message.content })
        break
    }
  }
  const keepReasoning = options.reasoning !== undefined || reasoningModel.test(options.model)
  return {
    model: options.model,
    ...(request.instructions === undefined ? {} : { instructions: request.instructions }),
    input,
    stream: true,
    store: false,
    ...(keepReasoning ? { include: ["reasoning.encrypted_content"] } : {}),
    ...(options.reasoning === undefined ? {} : { reasoning: options.reasoning }),
    ...(options.maxTokens === undefined ? {} : { max_output_tokens: options.maxTokens }),
    ...(request.output === undefined ? {} : {
      text: { format: { type: "json_schema", name: request.output.name, schema: request.output.schema, strict: false } }
    }),
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((tool) => ({
        type: "function",
        name: tool.name,
        description: tool.description,
        parameters: tool.parameters,
        strict: false
      }))
    })
  }
}

const WireUsage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  input_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({
    cached_tokens: Schema.optional(Schema.NullOr(Schema.Number))
  })))
})

const usageOf = (usage: typeof WireUsage.Type | null | undefined): LanguageModel.Usage =>
  usageFrom(usage?.input_tokens, usage?.output_tokens, usage?.input_tokens_details?.cached_tokens)

const ReasoningItem = Schema.Struct({
  type: Schema.Literal("reasoning"),
  id: Schema.String,
  summary: Schema.optional(Schema.Array(Schema.Struct({ text: Schema.String }))),
  encrypted_content: Schema.optional(Schema.NullOr(Schema.String))
})

/** An output item: the ones a turn is made of, and any other kind (kept out). */
const OutputItem = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("message"),
    content: Schema.Array(Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) }))
  }),
  Schema.Struct({ type: Schema.Literal("function_call"), call_id: Schema.String, name: Schema.String, arguments: Schema.String }),
  ReasoningItem,
  Schema.Struct({ type: Schema.String })
)
type OutputItem = typeof OutputItem.Type

const Response = Schema.Struct({
  status: Schema.optional(Schema.String),
  output: Schema.Array(OutputItem),
  usage: Schema.optional(Schema.NullOr(WireUsage)),
  incomplete_details: Schema.optional(Schema.NullOr(Schema.Struct({ reason: Schema.optional(Schema.String) }))),
  error: Schema.optional(Schema.NullOr(Schema.Struct({ message: Schema.String })))
})
type Response = typeof Response.Type

/** A reasoning item as the block kept with the turn. */
const reasoningBlock = (item: typeof ReasoningItem.Type): LanguageModel.ReasoningBlock => {
  const summary = (item.summary ?? []).map((part) => part.text).join("\n")
  return {
    _tag: "EncryptedReasoning",
    id: item.id,
    data: item.encrypted_content ?? "",
    ...(summary === "" ? {} : { summary })
  }
}

/** What a finished response says of its end. */
const finishOf = (response: Response, calls: number): LanguageModel.FinishReason => {
  const reason = response.incomplete_details?.reason
  if (reason === "max_output_tokens") return "length"
  if (reason === "content_filter") return "content_filter"
  if (response.status === "failed") return "error"
  return calls > 0 ? "tool_calls" : "stop"
}

/** A whole response (a server that did not stream) as a turn. */
const fromBody = turnFromBody("openai", Response, (response) => {
  let text: string | undefined
  const toolCalls: Array<LanguageModel.ToolCall> = []
  const reasoning: Array<LanguageModel.ReasoningBlock> = []
  for (const item of response.output) {
    if (item.type === "message" && "content" in item) {
      for (const part of item.content) if (part.type === "output_text") text = (text ?? "") + (part.text ?? "")
    } else if (item.type === "function_call" && "call_id" in item) {
      toolCalls.push({ id: item.call_id, name: item.name, arguments: item.arguments })
    } else if (item.type === "reasoning" && "id" in item) {
      reasoning.push(reasoningBlock(item as typeof ReasoningItem.Type))
    }
  }
  const turn = { text, toolCalls, finishReason: finishOf(response, toolCalls.length), usage: usageOf(response.usage) }
  return reasoning.length === 0 ? turn : { ...turn, reasoning }
})

// ---------------------------------------------------------------------------------------------
// The stream: typed events; text and reasoning-summary deltas as they come, each output item once it
// is done (a call with its whole arguments, a reasoning item with its encrypted content), and the
// response at `response.completed` (or `.incomplete`, `.failed`).

const Event = Schema.Struct({
  type: Schema.String,
  delta: Schema.optional(Schema.String),
  item: Schema.optional(OutputItem),
  response: Schema.optional(Response),
  message: Schema.optional(Schema.String)
})

const decodeEvent = eventDecoder("openai", Event)

/** Reads one streamed response. */
const reader = (): StreamReader => {
  let calls = 0
  let done = false
  return {
    event: ({ data }) => {
      const event = decodeEvent(data)
      if (event instanceof LanguageModel.ModelError) return event
      switch (event.type) {
        case "response.output_text.delta":
          return event.delta === undefined || event.delta === "" ? [] : [LanguageModel.ModelPart.TextDelta({ text: event.delta })]
        case "response.reasoning_summary_text.delta":
          return event.delta === undefined || event.delta === "" ? [] : [LanguageModel.ModelPart.ReasoningDelta({ text: event.delta })]
        case "response.output_item.done": {
          const item = event.item
          if (item?.type === "function_call" && "call_id" in item) {
            calls++
            return [LanguageModel.ModelPart.ToolCall({ call: { id: item.call_id, name: item.name, arguments: item.arguments } })]
          }
          if (item?.type === "reasoning" && "id" in item) {
            return [LanguageModel.ModelPart.Reasoning({ block: reasoningBlock(item as typeof ReasoningItem.Type) })]
          }
          return []
        }
        case "response.completed":
        case "response.incomplete": {
          done = true
          const response = event.response
          return [
            LanguageModel.ModelPart.Usage({ usage: usageOf(response?.usage) }),
            LanguageModel.ModelPart.Finish({ finishReason: response === undefined ? "other" : finishOf(response, calls) })
          ]
        }
        case "response.failed":
        case "error":
          // The server had answered 200: worth asking again.
          return new LanguageModel.ModelError({
            message: `openai: ${event.response?.error?.message ?? event.message ?? "the response failed"}`,
            transient: true
          })
        default:
          return []
      }
    },
    end: () =>
      done ? undefined : new LanguageModel.ModelError({
        message: "openai: the stream ended before response.completed",
        transient: true
      })
  }
}
