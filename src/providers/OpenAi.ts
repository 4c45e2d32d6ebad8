/**
 * OpenAI Chat Completions (`POST {base}/chat/completions`, streamed: `stream: true` with
 * `stream_options.include_usage`) as a `LanguageModel`, for OpenAI and any compatible server (Ollama,
 * vLLM, llama.cpp's server) through the base URL. Tools go out as
 * `{ type: "function", function: { name, description, parameters } }`; `tool_calls` come back, each
 * once its arguments are complete; results go back as `role: "tool"` messages with `tool_call_id`.
 * A typed final output is asked with `response_format: { type: "json_schema" }`. Reasoning text a
 * compatible server streams (`reasoning_content`, `reasoning`) is kept with the turn, not sent back:
 * Chat Completions has no field for it (OpenAI keeps its own models' reasoning on its side).
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import { Effect, Layer, Option, Redacted, Schema } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import { usageFrom } from "./httpBody.js"
import { optionalSecret, optionalString } from "../internal/util/settings.js"
import { endpoint, eventDecoder, layerModel, type LimitOptions, MissingApiKey, type StreamReader, turnFromBody } from "./Http.js"

/** How to reach the API. */
export interface Options extends LimitOptions {
  readonly model: string
  /** Sent as a bearer token; a local server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Default `https://api.openai.com/v1`. */
  readonly baseUrl?: string | undefined
  /** Output token limit per turn (`max_completion_tokens`). Default: the server's. */
  readonly maxTokens?: number | undefined
  /**
   * Strict mode for tools (`strict: true` on each function): each tool's schema goes in OpenAI's strict
   * form (`StrictSchema`: every field required, an optional one `null`, taken out again before
   * decoding), and a toolkit with a tool that has none (a map, a tuple) is refused before the request
   * (on the platform, at registration). Default false: tools go as Effect renders them.
   */
  readonly strict?: boolean | undefined
}

/** The API's default address. */
export const defaultBaseUrl = "https://api.openai.com/v1"

/** Chat Completions as a `LanguageModel`, on the `HttpClient` in context. */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, HttpClient.HttpClient> =>
  layerModel({
    name: "openai",
    model: options.model,
    url: endpoint(options.baseUrl ?? defaultBaseUrl, "/chat/completions"),
    headers: { "content-type": "application/json" },
    secretHeaders: bearer(options.apiKey),
    limits: options,
    toBody: (request) => toBody(options, request),
    fromBody,
    reader,
    strict: options.strict === true ? "openai" : undefined
  })

/** The `authorization` header of a key, when there is one (both OpenAI APIs). */
export const bearer = (apiKey: Redacted.Redacted<string> | undefined): Record<string, Redacted.Redacted<string>> =>
  apiKey === undefined ? {} : { authorization: Redacted.make(`Bearer ${Redacted.value(apiKey)}`) }

/**
 * An OpenAI API's layer from the environment: `OPENAI_API_KEY` and `OPENAI_BASE_URL`. The key is
 * required for the default (OpenAI's) address; with a base URL of your own, it is sent only when set.
 */
export const fromEnvironment = <O extends { readonly model: string; readonly apiKey?: unknown; readonly baseUrl?: unknown }>(
  make: (options: O) => Layer.Layer<LanguageModel.LanguageModel, never, HttpClient.HttpClient>
) =>
(
  model: string,
  options?: Omit<O, "model" | "apiKey" | "baseUrl">
): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const key = yield* optionalSecret("OPENAI_API_KEY")
    const baseUrl = yield* optionalString("OPENAI_BASE_URL")
    if (Option.isNone(key) && Option.isNone(baseUrl)) {
      return yield* new MissingApiKey({ variable: "OPENAI_API_KEY", provider: "openai" })
    }
    return make({ ...options, model, apiKey: Option.getOrUndefined(key), baseUrl: Option.getOrUndefined(baseUrl) } as unknown as O)
  }))

/** `layer` from the environment (`fromEnvironment`). */
export const layerConfig = fromEnvironment(layer)

// ---------------------------------------------------------------------------------------------
// Wire format.

/** The request body of Chat Completions, asking for a stream with its usage at the end. */
const toBody = (options: Options, request: LanguageModel.ModelRequest): unknown => {
  const messages: Array<unknown> = []
  if (request.instructions !== undefined) messages.push({ role: "system", content: request.instructions })
  for (const message of request.messages) {
    switch (message._tag) {
      case "UserMessage":
        messages.push({ role: "user", content: message.text })
        break
      case "AssistantMessage":
        messages.push({
          role: "assistant",
          content: message.text === undefined || message.text === "" ? null : message.text,
          ...(message.toolCalls.length === 0 ? {} : {
            tool_calls: message.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: call.arguments }
            }))
          })
        })
        break
      case "ToolResultMessage":
        // Chat Completions has no error flag: the error text says what went wrong.
        messages.push({ role: "tool", tool_call_id: message.toolCallId, content: message.content })
        break
    }
  }
  return {
    model: options.model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    ...(request.output === undefined ? {} : {
      // Not strict: strict mode wants every field required; our Schema checks the answer either way.
      response_format: {
        type: "json_schema",
        json_schema: { name: request.output.name, schema: request.output.schema, strict: false }
      }
    }),
    ...(options.maxTokens === undefined ? {} : { max_completion_tokens: options.maxTokens }),
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((tool) => ({
        type: "function",
        function: {
          name: tool.name,
          description: tool.description,
          parameters: tool.parameters,
          ...(options.strict === true ? { strict: true } : {})
        }
      }))
    })
  }
}

const WireUsage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  prompt_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({
    cached_tokens: Schema.optional(Schema.NullOr(Schema.Number))
  })))
})

const usageOf = (usage: typeof WireUsage.Type | null | undefined): LanguageModel.Usage =>
  usageFrom(usage?.prompt_tokens, usage?.completion_tokens, usage?.prompt_tokens_details?.cached_tokens)

const ResponseBody = Schema.Struct({
  choices: Schema.NonEmptyArray(Schema.Struct({
    message: Schema.Struct({
      content: Schema.optional(Schema.NullOr(Schema.String)),
      reasoning_content: Schema.optional(Schema.NullOr(Schema.String)),
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
        id: Schema.optional(Schema.String),
        function: Schema.Struct({ name: Schema.String, arguments: Schema.Unknown })
      }))))
    }),
    finish_reason: Schema.optional(Schema.NullOr(Schema.String))
  })),
  usage: Schema.optional(Schema.NullOr(WireUsage))
})

const finishReasons: Record<string, LanguageModel.FinishReason> = {
  stop: "stop",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  length: "length",
  content_filter: "content_filter"
}

// Some compatible servers leave out the id, or send the arguments as an object.
const argumentsText = (args: unknown): string => typeof args === "string" ? args : JSON.stringify(args ?? {})

/** A Chat Completions response (its first choice; a server that did not stream) as a turn. */
const fromBody = turnFromBody("openai", ResponseBody, ({ choices: [choice], usage }) => {
  const turn = {
    text: choice.message.content ?? undefined,
    toolCalls: (choice.message.tool_calls ?? []).map((call, i) => ({
      id: call.id ?? `call_${i}`,
      name: call.function.name,
      arguments: argumentsText(call.function.arguments)
    })),
    finishReason: finishReasons[choice.finish_reason ?? ""] ?? "other",
    usage: usageOf(usage)
  }
  const reasoning = choice.message.reasoning_content
  return reasoning == null || reasoning === "" ? turn : { ...turn, reasoning: [{ _tag: "Thinking" as const, text: reasoning }] }
})

// ---------------------------------------------------------------------------------------------
// The stream: `chat.completion.chunk`s, each a delta of the first choice (text, reasoning, pieces of
// tool calls by index), the one with `finish_reason`, then one with no choices and the usage, then `[DONE]`.

const Chunk = Schema.Struct({
  choices: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    delta: Schema.optional(Schema.NullOr(Schema.Struct({
      content: Schema.optional(Schema.NullOr(Schema.String)),
      reasoning_content: Schema.optional(Schema.NullOr(Schema.String)),
      reasoning: Schema.optional(Schema.NullOr(Schema.String)),
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
        index: Schema.optional(Schema.Number),
        id: Schema.optional(Schema.NullOr(Schema.String)),
        function: Schema.optional(Schema.NullOr(Schema.Struct({
          name: Schema.optional(Schema.NullOr(Schema.String)),
          arguments: Schema.optional(Schema.Unknown)
        })))
      }))))
    }))),
    finish_reason: Schema.optional(Schema.NullOr(Schema.String))
  })))),
  usage: Schema.optional(Schema.NullOr(WireUsage)),
  error: Schema.optional(Schema.Struct({ message: Schema.String }))
})

const decodeChunk = eventDecoder("openai", Chunk)

interface OpenCall {
  readonly index: number
  id: string
  name: string
  args: string
}

/** Reads one streamed Chat Completions answer. */
const reader = (): StreamReader => {
  let open: OpenCall | undefined
  let calls = 0
  let reasoning = ""
  let finishReason: LanguageModel.FinishReason | undefined
  let usage: LanguageModel.Usage | undefined
  let done = false
  // A call is complete once the next one starts, or the choice finishes.
  const close = (parts: Array<LanguageModel.ModelPart>) => {
    if (open === undefined) return
    const call = { id: open.id === "" ? `call_${calls}` : open.id, name: open.name, arguments: open.args === "" ? "{}" : open.args }
    calls++
    open = undefined
    parts.push(LanguageModel.ModelPart.ToolCall({ call }))
  }
  const finish = (parts: Array<LanguageModel.ModelPart>) => {
    close(parts)
    if (reasoning !== "") {
      parts.push(LanguageModel.ModelPart.Reasoning({ block: { _tag: "Thinking", text: reasoning } }))
      reasoning = ""
    }
  }
  return {
    event: ({ data }) => {
      if (data.trim() === "[DONE]") {
        done = true
        const parts: Array<LanguageModel.ModelPart> = []
        finish(parts)
        parts.push(
          LanguageModel.ModelPart.Usage({ usage: usage ?? usageOf(undefined) }),
          LanguageModel.ModelPart.Finish({ finishReason: finishReason ?? (calls > 0 ? "tool_calls" : "stop") })
        )
        return parts
      }
      const chunk = decodeChunk(data)
      if (chunk instanceof LanguageModel.ModelError) return chunk
      // An error mid-stream is the server's (it had answered 200): worth asking again.
      if (chunk.error !== undefined) {
        return new LanguageModel.ModelError({ message: `openai: ${chunk.error.message}`, transient: true })
      }
      const parts: Array<LanguageModel.ModelPart> = []
      if (chunk.usage != null) usage = usageOf(chunk.usage)
      const choice = chunk.choices?.[0]
      if (choice === undefined) return parts
      const delta = choice.delta
      const thought = delta?.reasoning_content ?? delta?.reasoning
      if (thought != null && thought !== "") {
        reasoning += thought
        parts.push(LanguageModel.ModelPart.ReasoningDelta({ text: thought }))
      }
      if (delta?.content != null && delta.content !== "") parts.push(LanguageModel.ModelPart.TextDelta({ text: delta.content }))
      for (const piece of delta?.tool_calls ?? []) {
        const index = piece.index ?? 0
        // A new index starts a new call; so does a new id (some compatible servers send no index).
        const another = piece.id != null && open !== undefined && open.id !== "" && piece.id !== open.id
        if (open !== undefined && (open.index !== index || another)) close(parts)
        if (open === undefined) open = { index, id: "", name: "", args: "" }
        if (piece.id != null) open.id = piece.id
        if (piece.function?.name != null) open.name += piece.function.name
        const args = piece.function?.arguments
        if (args != null) open.args += argumentsText(args)
      }
      if (choice.finish_reason != null) {
        finishReason = finishReasons[choice.finish_reason] ?? "other"
        finish(parts)
      }
      return parts
    },
    end: () =>
      done ? undefined : new LanguageModel.ModelError({ message: "openai: the stream ended before [DONE]", transient: true })
  }
}
