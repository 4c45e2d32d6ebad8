/**
 * Any `@effect/ai` language model as our `LanguageModel` (design: Providers): Google Gemini,
 * Amazon Bedrock and OpenRouter through Effect's maintained clients, and any other model a user
 * builds on `@effect/ai`. Our conversation goes out as its `Prompt`; our tools as tools whose JSON
 * Schema is the provider's strict form of ours (`StrictSchema`), their calls coming back unresolved
 * (the pipeline runs them); its answer comes back as our turn, usage counted; its errors as ours:
 * 429, 408, 409 and 5xx transient (after the `retry-after` the provider gave), 401/403 an auth
 * failure, other statuses a rejected request, a transport failure transient.
 */
import * as AiError from "@effect/ai/AiError"
import { IdGenerator } from "@effect/ai/IdGenerator"
import * as AiLanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as AiTool from "@effect/ai/Tool"
import type * as AiToolkit from "@effect/ai/Toolkit"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Chunk, Clock, Effect, Either, Layer, Option, ParseResult, Schema, Stream } from "effect"
import * as LanguageModel from "../LanguageModel.js"
import * as RateLimit from "../RateLimit.js"
import { loadPeer } from "../internal/util/optionalPeer.js"
import { optionalSecret, optionalString } from "../internal/util/settings.js"
import { failureFromStatus, MissingApiKey } from "./Http.js"
import { outputText, outputTool } from "./outputTool.js"
import * as StrictSchema from "./StrictSchema.js"

/** Options of `layer`. */
export interface Options {
  /** The provider's name, for errors and spans (`gen_ai.provider.name`): `google`, `bedrock`, `openrouter`, ... */
  readonly provider: string
  /** The model asked for. */
  readonly model: string
  /**
   * Refuse a tool the provider's strict mode has no form for (`StrictSchema`), rather than send it as
   * Effect renders it. Always so for Google (its schema subset has no other form). Default false.
   */
  readonly strict?: boolean | undefined
  /**
   * A watched run reads the model's stream as it comes (default true). False: it asks for the whole
   * answer and tells its parts after (for a client whose stream loses something its whole answer
   * has: Bedrock's, below).
   */
  readonly streams?: boolean | undefined
}

/**
 * Our `LanguageModel` on the `@effect/ai` `LanguageModel` in context. A provider with a strict form
 * (`StrictSchema.Provider`) gets each tool's schema in that form where there is one; a tool with none
 * goes as Effect renders it, or, `strict` (and always for Google), fails the request with
 * `ModelRequestRejected` naming the tool, the field and the provider, before any call.
 */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, AiLanguageModel.LanguageModel> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.map(AiLanguageModel.LanguageModel, (model) => {
      const required = options.provider === "google" || options.strict === true
      const forms = StrictSchema.isProvider(options.provider) ? StrictSchema.preparer(options.provider, required) : undefined
      const toolkits = new WeakMap<ReadonlyArray<LanguageModel.ToolDefinition>, Prepared>()
      const prepared = (tools: ReadonlyArray<LanguageModel.ToolDefinition>): Prepared => {
        let done = toolkits.get(tools)
        if (done === undefined) {
          const formed = forms === undefined ? Either.right({ tools, restore: (_: string, args: string) => args }) : forms(tools)
          done = Either.map(formed, ({ restore, tools }) => ({ tools, toolkit: toolkitOf(tools), restore }))
          toolkits.set(tools, done)
        }
        return done
      }
      // Under the process's rate limits, when it has them (`RateLimit`; the provider's headers are not read here).
      return LanguageModel.LanguageModel.of(RateLimit.limited({
        provider: options.provider,
        model: options.model,
        streams: options.streams ?? true,
        ...(required && StrictSchema.isProvider(options.provider) ? { strictSchemas: options.provider } : {}),
        stream: (request) => {
          const tools = prepared(request.tools)
          if (Either.isLeft(tools)) {
            return Stream.fail(new LanguageModel.ModelRequestRejected({ message: tools.left.message, status: 400 }))
          }
          const state = { calls: 0 }
          const toolkit = withOutput(tools.right, request.output)
          return model.streamText({ prompt: toPrompt(request), toolkit, disableToolCallResolution: true }).pipe(
            Stream.provideService(IdGenerator, idGenerator),
            Stream.mapConcat((part) => toParts(part, tools.right.restore, state, request.output)),
            Stream.catchAll((error) => {
              // A call of a tool the agent does not have: the model reads "no such tool", as with our providers.
              const parts = unknownToolParts(error, tools.right, "stream")
              if (parts === undefined) return Stream.fromEffect(Effect.flatMap(asFailure(options.provider, error), Effect.fail))
              const ours = parts.flatMap((part) => toParts(part as Response.AnyPart, tools.right.restore, state, request.output))
              if (ours.some((part) => part._tag === "Finish")) return Stream.fromIterable(ours)
              // Its stream ended at that part: the turn ends with its calls, its usage not known.
              return Stream.concat(
                Stream.fromIterable(ours),
                Stream.fromEffect(Effect.as(
                  Effect.logWarning(`${options.provider}: a streamed turn called a tool the agent does not have; its usage is not known`),
                  LanguageModel.ModelPart.Finish({ finishReason: "tool_calls" })
                ))
              )
            })
          )
        },
        generate: (request) =>
          Effect.gen(function*() {
            const tools = prepared(request.tools)
            if (Either.isLeft(tools)) {
              return yield* new LanguageModel.ModelRequestRejected({ message: tools.left.message, status: 400 })
            }
            const content = yield* model.generateText({
              prompt: toPrompt(request),
              toolkit: withOutput(tools.right, request.output),
              disableToolCallResolution: true
            }).pipe(
              Effect.provideService(IdGenerator, idGenerator),
              Effect.map((response): ReadonlyArray<Response.AnyPart> => response.content),
              // A call of a tool the agent does not have: the model reads "no such tool", as with our providers.
              Effect.catchAll((error) => {
                const parts = unknownToolParts(error, tools.right, "whole")
                return parts === undefined ? Effect.fail(error) : Effect.succeed(parts as ReadonlyArray<Response.AnyPart>)
              })
            )
            return toTurn(content, tools.right.restore, request.output)
          }).pipe(Effect.catchAll((error) => Effect.flatMap(asFailure(options.provider, error), Effect.fail)))
      }))
    })
  )

type Prepared = Either.Either<{
  readonly tools: ReadonlyArray<{ readonly name: string; readonly description: string; readonly parameters: unknown }>
  readonly toolkit: AiToolkit.WithHandler<Record<string, AiTool.Any>>
  readonly restore: (name: string, args: string) => string
}, StrictSchema.ToolSchemaRefused>

/**
 * The tools as `@effect/ai` tools: each one's parameters any JSON (our pipeline decodes them, with
 * the tool's own Schema), its JSON Schema the one given (the provider's form). Never resolved here.
 */
const toolkitOf = (
  tools: ReadonlyArray<{ readonly name: string; readonly description: string; readonly parameters: unknown }>
): AiToolkit.WithHandler<Record<string, AiTool.Any>> => {
  const byName: Record<string, AiTool.Any> = {}
  for (const tool of tools) {
    const made = AiTool.make(tool.name, { description: tool.description })
    byName[tool.name] = Object.assign(Object.create(Object.getPrototypeOf(made)), made, {
      parametersSchema: Schema.Unknown.annotations({ jsonSchema: tool.parameters as object })
    })
  }
  return {
    tools: byName,
    handle: (name: string) => Effect.dieMessage(`tool ${name}: the pipeline runs tools, not @effect/ai`)
  } as unknown as AiToolkit.WithHandler<Record<string, AiTool.Any>>
}

/**
 * The answer `@effect/ai` refused to decode because the model called a tool the request did not offer (its
 * response schema knows only the toolkit's names): decoded again with those names added, so that the call reaches
 * the loop, which answers "no such tool". Undefined when `error` is not that (any other decoding failure).
 */
const unknownToolParts = (
  error: unknown,
  prepared: { readonly tools: Parameters<typeof toolkitOf>[0] },
  mode: "whole" | "stream"
): ReadonlyArray<unknown> | undefined => {
  // As `@effect/ai` gives it: the ParseError, or its `MalformedOutput` around it.
  const cause = typeof error === "object" && error !== null && "cause" in error ? (error as { cause: unknown }).cause : undefined
  const parse = ParseResult.isParseError(error) ? error : ParseResult.isParseError(cause) ? cause : undefined
  if (parse === undefined) return undefined
  const actual: unknown = parse.issue.actual
  const raw: ReadonlyArray<unknown> | undefined = Array.isArray(actual)
    ? actual
    : Chunk.isChunk(actual)
    ? Chunk.toReadonlyArray(actual as Chunk.Chunk<unknown>)
    : undefined
  if (raw === undefined) return undefined
  const known = new Set(prepared.tools.map((tool) => tool.name))
  const unknown = new Set<string>()
  for (const part of raw) {
    const p = part as { readonly type?: unknown; readonly name?: unknown }
    if (p?.type === "tool-call" && typeof p.name === "string" && !known.has(p.name)) unknown.add(p.name)
  }
  if (unknown.size === 0) return undefined
  const toolkit = toolkitOf([...prepared.tools, ...[...unknown].map((name) => ({ name, description: "", parameters: {} }))])
  const schema = Schema.Array(mode === "whole" ? Response.Part(toolkit) : Response.StreamPart(toolkit))
  return Either.getOrUndefined(Schema.decodeUnknownEither(schema)(raw))
}

/** The toolkit, with the typed output's tool when the request asks for one (the answer is its input). */
const withOutput = (
  prepared: { readonly tools: Parameters<typeof toolkitOf>[0]; readonly toolkit: AiToolkit.WithHandler<Record<string, AiTool.Any>> },
  output: LanguageModel.OutputFormat | undefined
): AiToolkit.WithHandler<Record<string, AiTool.Any>> =>
  output === undefined ? prepared.toolkit : toolkitOf([...prepared.tools, outputTool(output)])

/** Our conversation as `@effect/ai`'s prompt. */
const toPrompt = (request: LanguageModel.ModelRequest): Prompt.RawInput => {
  const messages: Array<Prompt.MessageEncoded> = []
  if (request.instructions !== undefined) messages.push({ role: "system", content: request.instructions })
  const names = new Map<string, string>()
  for (const message of request.messages) {
    switch (message._tag) {
      case "UserMessage":
        messages.push({ role: "user", content: [{ type: "text", text: message.text }] })
        break
      case "AssistantMessage": {
        const content: Array<Prompt.AssistantMessagePartEncoded> = []
        if (message.text !== undefined && message.text !== "") content.push({ type: "text", text: message.text })
        for (const call of message.toolCalls) {
          names.set(call.id, call.name)
          content.push({ type: "tool-call", id: call.id, name: call.name, params: parseArguments(call.arguments), providerExecuted: false })
        }
        messages.push({ role: "assistant", content })
        break
      }
      case "ToolResultMessage": {
        const part: Prompt.ToolMessagePartEncoded = {
          type: "tool-result",
          id: message.toolCallId,
          name: message.name,
          isFailure: message.isError,
          result: message.isError ? message.content : parseArguments(message.content),
          providerExecuted: false
        }
        // Results of one turn's calls go back in one tool message, as the providers want them.
        const last = messages[messages.length - 1]
        if (last !== undefined && last.role === "tool") (last.content as Array<Prompt.ToolMessagePartEncoded>).push(part)
        else messages.push({ role: "tool", content: [part] })
        break
      }
    }
  }
  return messages
}

/** JSON text as its value; text that is not JSON as itself (a model's arguments can be cut short). */
const parseArguments = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const finishReasons: Record<Response.FinishReason, LanguageModel.FinishReason> = {
  "stop": "stop",
  "length": "length",
  "content-filter": "content_filter",
  "tool-calls": "tool_calls",
  "error": "error",
  "pause": "other",
  "other": "other",
  "unknown": "other"
}

/** `@effect/ai`'s response parts as our turn: texts joined, tool calls in order, usage and finish reason. */
const toTurn = (
  content: ReadonlyArray<Response.AnyPart>,
  restore: (name: string, args: string) => string,
  output: LanguageModel.OutputFormat | undefined
): LanguageModel.ModelTurn => {
  let text: string | undefined
  const toolCalls: Array<LanguageModel.ToolCall> = []
  let finishReason: LanguageModel.FinishReason = "stop"
  let usage: LanguageModel.Usage = { inputTokens: 0, outputTokens: 0 }
  for (const part of content) {
    if (part.type === "text") text = (text ?? "") + part.text
    else if (part.type === "tool-call" && output !== undefined && part.name === output.name) {
      text = (text ?? "") + outputText(output, JSON.stringify(part.params))
    } else if (part.type === "tool-call" && !part.providerExecuted) {
      toolCalls.push({ id: part.id, name: part.name, arguments: restore(part.name, JSON.stringify(part.params)) })
    } else if (part.type === "finish") {
      finishReason = finishReasons[part.reason]
      usage = { inputTokens: part.usage.inputTokens ?? 0, outputTokens: part.usage.outputTokens ?? 0 }
    }
  }
  if (toolCalls.length > 0 && finishReason === "stop") finishReason = "tool_calls"
  return { ...(text === undefined ? {} : { text }), toolCalls, finishReason, usage }
}

/** One streamed `@effect/ai` part as ours: deltas, each call once complete, the usage and the finish. */
const toParts = (
  part: Response.AnyPart,
  restore: (name: string, args: string) => string,
  state: { calls: number },
  output: LanguageModel.OutputFormat | undefined
): ReadonlyArray<LanguageModel.ModelPart> => {
  switch (part.type) {
    case "text-delta":
      return part.delta === "" ? [] : [LanguageModel.ModelPart.TextDelta({ text: part.delta })]
    case "reasoning-delta":
      return part.delta === "" ? [] : [LanguageModel.ModelPart.ReasoningDelta({ text: part.delta })]
    case "tool-call":
      if (output !== undefined && part.name === output.name) {
        return [LanguageModel.ModelPart.TextDelta({ text: outputText(output, JSON.stringify(part.params)) })]
      }
      if (part.providerExecuted) return []
      state.calls++
      return [LanguageModel.ModelPart.ToolCall({
        call: { id: part.id, name: part.name, arguments: restore(part.name, JSON.stringify(part.params)) }
      })]
    case "finish": {
      const reason = finishReasons[part.reason]
      return [
        LanguageModel.ModelPart.Usage({ usage: { inputTokens: part.usage.inputTokens ?? 0, outputTokens: part.usage.outputTokens ?? 0 } }),
        LanguageModel.ModelPart.Finish({ finishReason: state.calls > 0 && reason === "stop" ? "tool_calls" : reason })
      ]
    }
    default:
      return []
  }
}

/** Tool call ids where a provider gives none (Gemini): unique in a process. */
let nextCallId = 0
const idGenerator = { generateId: () => Effect.sync(() => `call_${(++nextCallId).toString(36)}_${Date.now().toString(36)}`) }

/** An `@effect/ai` failure as ours, with the same classes and texts our own providers use. */
const asFailure = (
  provider: string,
  error: unknown
): Effect.Effect<LanguageModel.ModelFailure> => {
  if (error instanceof LanguageModel.ModelRequestRejected) return Effect.succeed(error)
  if (AiError.isAiError(error)) {
    switch (error._tag) {
      case "HttpResponseError":
        if (error.reason === "StatusCode") {
          return Effect.map(
            Clock.currentTimeMillis,
            (now) => failureFromStatus(provider, error.response.status, error.response.headers, error.body ?? "", now)
          )
        }
        return Effect.succeed(
          new LanguageModel.ModelError({
            message: `${provider}: HTTP ${error.response.status}: reading the body failed (${error.reason})`,
            transient: true,
            status: error.response.status
          })
        )
      case "HttpRequestError":
        return Effect.succeed(
          new LanguageModel.ModelError({
            message: `${provider}: the request failed (${error.description ?? error.reason})`,
            transient: error.reason === "Transport"
          })
        )
      default:
        return Effect.succeed(new LanguageModel.ModelError({ message: `${provider}: ${error.message}`, transient: false }))
    }
  }
  const message = error instanceof Error ? error.message : String(error)
  return Effect.succeed(new LanguageModel.ModelError({ message: `${provider}: ${message}`, transient: false }))
}

// ---------------------------------------------------------------------------------------------
// The providers Effect's AI packages keep, each from its documented variables. Each provider's package
// is the app's to install (it is not a dependency of agent-tools): loaded here on first use, and a
// missing one is a defect whose text names it.

/** A provider's client and model modules, loaded now; a missing package dies naming it. */
const providerModules = <A>(load: () => Promise<A>, name: string, feature: string): Effect.Effect<A> =>
  Effect.orDie(loadPeer(load, [name], feature))

/**
 * Google Gemini (`generateContent`): `GEMINI_API_KEY` (or `GOOGLE_API_KEY`), and `GEMINI_BASE_URL`
 * for another address (default `https://generativelanguage.googleapis.com`; `/v1beta/...` follows it).
 */
export const layerGoogle = (model: string): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const gemini = yield* optionalSecret("GEMINI_API_KEY")
    const key = Option.isSome(gemini) ? gemini : yield* optionalSecret("GOOGLE_API_KEY")
    if (Option.isNone(key)) return yield* new MissingApiKey({ variable: "GEMINI_API_KEY", provider: "google" })
    const apiUrl = Option.getOrUndefined(yield* optionalString("GEMINI_BASE_URL"))
    const [GoogleClient, GoogleLanguageModel] = yield* providerModules(
      () => Promise.all([import("@effect/ai-google/GoogleClient"), import("@effect/ai-google/GoogleLanguageModel")]),
      "@effect/ai-google",
      "Google's models (layerGoogle)"
    )
    return layer({ provider: "google", model }).pipe(
      Layer.provide(GoogleLanguageModel.layer({ model })),
      Layer.provide(GoogleClient.layer({ apiKey: key.value, apiUrl })),
      Layer.provide(NodeHttpClient.layer)
    )
  }))

/**
 * Amazon Bedrock (`Converse`; `ConverseStream` for `stream`, which counts no usage: a watched run asks
 * `Converse`), each request signed (AWS Signature Version 4): `AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` (temporary credentials), `AWS_REGION` (default
 * `us-east-1`), and `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` for another address.
 */
export const layerBedrock = (model: string): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const accessKeyId = yield* optionalString("AWS_ACCESS_KEY_ID")
    if (Option.isNone(accessKeyId)) return yield* new MissingApiKey({ variable: "AWS_ACCESS_KEY_ID", provider: "bedrock" })
    const secretAccessKey = yield* optionalSecret("AWS_SECRET_ACCESS_KEY")
    if (Option.isNone(secretAccessKey)) {
      return yield* new MissingApiKey({ variable: "AWS_SECRET_ACCESS_KEY", provider: "bedrock" })
    }
    const sessionToken = Option.getOrUndefined(yield* optionalSecret("AWS_SESSION_TOKEN"))
    const region = Option.getOrUndefined(yield* optionalString("AWS_REGION"))
    const apiUrl = Option.getOrUndefined(yield* optionalString("AWS_ENDPOINT_URL_BEDROCK_RUNTIME"))
    const [BedrockClient, BedrockLanguageModel] = yield* providerModules(
      () =>
        Promise.all([
          import("@effect/ai-amazon-bedrock/AmazonBedrockClient"),
          import("@effect/ai-amazon-bedrock/AmazonBedrockLanguageModel")
        ]),
      "@effect/ai-amazon-bedrock",
      "Amazon Bedrock's models (layerBedrock)"
    )
    // Effect's Bedrock client ends a streamed turn at `messageStop`, before Bedrock's `metadata` event
    // carries the usage: a watched run asks for whole answers, whose usage is counted.
    return layer({ provider: "bedrock", model, streams: false }).pipe(
      Layer.provide(BedrockLanguageModel.layer({ model })),
      Layer.provide(BedrockClient.layer({
        accessKeyId: accessKeyId.value,
        secretAccessKey: secretAccessKey.value,
        sessionToken,
        region,
        apiUrl
      })),
      Layer.provide(NodeHttpClient.layer)
    )
  }))

/** OpenRouter: `OPENROUTER_API_KEY`, and `OPENROUTER_BASE_URL` for another address (default `https://openrouter.ai/api/v1`). */
export const layerOpenRouter = (model: string): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const apiKey = yield* optionalSecret("OPENROUTER_API_KEY")
    if (Option.isNone(apiKey)) return yield* new MissingApiKey({ variable: "OPENROUTER_API_KEY", provider: "openrouter" })
    const apiUrl = Option.getOrUndefined(yield* optionalString("OPENROUTER_BASE_URL"))
    const [OpenRouterClient, OpenRouterLanguageModel] = yield* providerModules(
      () =>
        Promise.all([import("@effect/ai-openrouter/OpenRouterClient"), import("@effect/ai-openrouter/OpenRouterLanguageModel")]),
      "@effect/ai-openrouter",
      "OpenRouter's models (layerOpenRouter)"
    )
    return layer({ provider: "openrouter", model }).pipe(
      Layer.provide(OpenRouterLanguageModel.layer({ model })),
      Layer.provide(OpenRouterClient.layer({ apiKey: apiKey.value, apiUrl })),
      Layer.provide(NodeHttpClient.layer)
    )
  }))
