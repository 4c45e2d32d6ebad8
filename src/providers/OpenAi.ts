/**
 * OpenAI Chat Completions (`POST {base}/chat/completions`) as a `LanguageModel`, for OpenAI and any
 * compatible server (Ollama, vLLM, llama.cpp's server) through the base URL. Tools go out as
 * `{ type: "function", function: { name, description, parameters } }`; `tool_calls` come back;
 * results go back as `role: "tool"` messages with `tool_call_id`.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import { Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import { optionalSecret, optionalString } from "../internal/util/settings.js"
import { endpoint, layerModel, MissingApiKey, turnFromBody } from "./Http.js"

/** How to reach the API. */
export interface Options {
  readonly model: string
  /** Sent as a bearer token; a local server may need none. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Default `https://api.openai.com/v1`. */
  readonly baseUrl?: string | undefined
  /** Output token limit per turn (`max_completion_tokens`). Default: the server's. */
  readonly maxTokens?: number | undefined
  /** Per-request timeout. Default 2 minutes. */
  readonly timeout?: Duration.DurationInput | undefined
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
    secretHeaders: options.apiKey === undefined
      ? {}
      : { authorization: Redacted.make(`Bearer ${Redacted.value(options.apiKey)}`) },
    timeout: options.timeout,
    toBody: (request) => toBody(options, request),
    fromBody
  })

/**
 * `layer` from the environment: `OPENAI_API_KEY` and `OPENAI_BASE_URL`. The key is required for the
 * default (OpenAI's) address; with a base URL of your own, it is sent only when set.
 */
export const layerConfig = (
  model: string,
  options?: Omit<Options, "model" | "apiKey" | "baseUrl">
): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const key = yield* optionalSecret("OPENAI_API_KEY")
    const baseUrl = yield* optionalString("OPENAI_BASE_URL")
    if (Option.isNone(key) && Option.isNone(baseUrl)) {
      return yield* new MissingApiKey({ variable: "OPENAI_API_KEY", provider: "openai" })
    }
    return layer({ ...options, model, apiKey: Option.getOrUndefined(key), baseUrl: Option.getOrUndefined(baseUrl) })
  }))

// ---------------------------------------------------------------------------------------------
// Wire format.

/** The request body of Chat Completions. */
export const toBody = (options: Options, request: LanguageModel.ModelRequest): unknown => {
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
    ...(options.maxTokens === undefined ? {} : { max_completion_tokens: options.maxTokens }),
    ...(request.tools.length === 0 ? {} : {
      tools: request.tools.map((tool) => ({
        type: "function",
        function: { name: tool.name, description: tool.description, parameters: tool.parameters }
      }))
    })
  }
}

const ResponseBody = Schema.Struct({
  choices: Schema.NonEmptyArray(Schema.Struct({
    message: Schema.Struct({
      content: Schema.optional(Schema.NullOr(Schema.String)),
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
        id: Schema.optional(Schema.String),
        function: Schema.Struct({ name: Schema.String, arguments: Schema.Unknown })
      }))))
    }),
    finish_reason: Schema.optional(Schema.NullOr(Schema.String))
  })),
  usage: Schema.optional(Schema.NullOr(Schema.Struct({ prompt_tokens: Schema.Number, completion_tokens: Schema.Number })))
})

const finishReasons: Record<string, LanguageModel.FinishReason> = {
  stop: "stop",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  length: "length",
  content_filter: "content_filter"
}

/** A Chat Completions response (its first choice) as a turn. */
export const fromBody = turnFromBody("openai", ResponseBody, ({ choices: [choice], usage }) => ({
    text: choice.message.content ?? undefined,
    toolCalls: (choice.message.tool_calls ?? []).map((call, i) => ({
      // Some compatible servers leave out the id, or send the arguments as an object.
      id: call.id ?? `call_${i}`,
      name: call.function.name,
      arguments: typeof call.function.arguments === "string"
        ? call.function.arguments
        : JSON.stringify(call.function.arguments ?? {})
    })),
    finishReason: finishReasons[choice.finish_reason ?? ""] ?? "other",
    usage: { inputTokens: usage?.prompt_tokens ?? 0, outputTokens: usage?.completion_tokens ?? 0 }
}))
