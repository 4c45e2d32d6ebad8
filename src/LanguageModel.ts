/**
 * The model seam: a request (instructions, messages, tool definitions) in, one assistant turn out.
 * Everything here is a Schema, because providers and the platform send it over the wire. Providers
 * implement the `LanguageModel` service; `LanguageModel.layerScripted` is the deterministic one for
 * tests and the offline demo.
 */
import { Context, Effect, Layer, Schema } from "effect"

/** One tool call the model asked for; `arguments` is JSON text, exactly as the model wrote it. */
export const ToolCall = Schema.Struct({ id: Schema.String, name: Schema.String, arguments: Schema.String })
/** One tool call the model asked for. */
export type ToolCall = typeof ToolCall.Type

/** Token counts of one turn, or summed over a run. */
export const Usage = Schema.Struct({ inputTokens: Schema.Number, outputTokens: Schema.Number })
/** Token counts. */
export type Usage = typeof Usage.Type

/** Why the model stopped this turn. */
export const FinishReason = Schema.Literal("stop", "tool_calls", "length", "content_filter", "error", "other")
/** Why the model stopped this turn. */
export type FinishReason = typeof FinishReason.Type

/** One assistant turn. */
export const ModelTurn = Schema.Struct({
  text: Schema.optional(Schema.String),
  toolCalls: Schema.Array(ToolCall),
  finishReason: FinishReason,
  usage: Usage
})
/** One assistant turn. */
export type ModelTurn = typeof ModelTurn.Type

/** What the user said. */
export const UserMessage = Schema.TaggedStruct("UserMessage", { text: Schema.String })
/** What the assistant said and which tools it called. */
export const AssistantMessage = Schema.TaggedStruct("AssistantMessage", {
  text: Schema.optional(Schema.String),
  toolCalls: Schema.Array(ToolCall)
})
/** The result of one tool call: the JSON of its value, or its error text with `isError`. */
export const ToolResultMessage = Schema.TaggedStruct("ToolResultMessage", {
  toolCallId: Schema.String,
  name: Schema.String,
  content: Schema.String,
  isError: Schema.Boolean
})
/** A message of the conversation. */
export const Message = Schema.Union(UserMessage, AssistantMessage, ToolResultMessage)
/** A message of the conversation. */
export type Message = typeof Message.Type

/** A tool as the model sees it (`Tool.jsonSchema`). */
export const ToolDefinition = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  parameters: Schema.Unknown
})
/** A tool as the model sees it. */
export type ToolDefinition = typeof ToolDefinition.Type

/** Everything the model is asked with. `tools` is the toolkit's list, built once, not per request. */
export const ModelRequest = Schema.Struct({
  instructions: Schema.optional(Schema.String),
  messages: Schema.Array(Message),
  tools: Schema.Array(ToolDefinition)
})
/** Everything the model is asked with. */
export type ModelRequest = typeof ModelRequest.Type

/**
 * A model call that failed. `transient` ones (429, 5xx, overloaded, a reset connection, no answer in
 * time) are worth retrying, after `retryAfterMillis` when the provider said how long to wait.
 */
export class ModelError extends Schema.TaggedError<ModelError>("agent-tools/ModelError")("ModelError", {
  message: Schema.String,
  transient: Schema.Boolean,
  status: Schema.optional(Schema.Number),
  retryAfterMillis: Schema.optional(Schema.Number)
}) {}

/** The provider refused the credentials (401, 403): retrying will not help. */
export class ModelAuthError extends Schema.TaggedError<ModelAuthError>("agent-tools/ModelAuthError")("ModelAuthError", {
  message: Schema.String,
  status: Schema.Number
}) {}

/** The provider rejected the request itself (400, 404, 413, 422), with its own message. */
export class ModelRequestRejected extends Schema.TaggedError<ModelRequestRejected>("agent-tools/ModelRequestRejected")(
  "ModelRequestRejected",
  { message: Schema.String, status: Schema.Number }
) {}

/** Every way a model call can fail. */
export type ModelFailure = ModelError | ModelAuthError | ModelRequestRejected

/** True for a failure worth retrying. */
export const isTransient = (failure: ModelFailure): failure is ModelError =>
  failure._tag === "ModelError" && failure.transient

/** The model: one request in, one assistant turn out. */
export class LanguageModel extends Context.Tag("agent-tools/LanguageModel")<LanguageModel, {
  readonly generate: (request: ModelRequest) => Effect.Effect<ModelTurn, ModelFailure>
  /** Who serves it, as OpenTelemetry's `gen_ai.provider.name` says it (`anthropic`, `openai`), for the `chat` span. */
  readonly provider?: string | undefined
  /** The model asked for (`gen_ai.request.model`): the `chat` span is named after it. */
  readonly model?: string | undefined
}>() {}

// ---------------------------------------------------------------------------------------------
// The scripted model.

/** A scripted reply: any part left out takes its default (no text, no calls, no usage). */
export interface ScriptedReply {
  readonly text?: string | undefined
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  readonly finishReason?: FinishReason | undefined
  readonly usage?: Usage | undefined
}

/** A turn of a script: a fixed reply, or one computed from the request (to react to tool results). */
export type ScriptedTurn =
  | ScriptedReply
  | ((request: ModelRequest) => ScriptedReply | Effect.Effect<ScriptedReply, ModelFailure>)

/** What a scripted model saw, for assertions. */
export class Scripted extends Context.Tag("agent-tools/LanguageModel/Scripted")<Scripted, {
  /** The requests received so far (empty when `keepRequests` is false). */
  readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
}>() {}

/** Options of the scripted model. */
export interface ScriptedOptions {
  /** Start over after the last turn instead of failing (a script that serves many runs). Default false. */
  readonly repeat?: boolean | undefined
  /** Keep every request for `Scripted.requests`. Default true; turn off for long benchmarks and servers. */
  readonly keepRequests?: boolean | undefined
  /**
   * Each conversation follows the script from its start: turn n answers a request carrying n - 1
   * assistant messages, whatever other conversations asked (a platform's many tasks). Default false:
   * turn n answers the n-th request the layer received.
   */
  readonly perConversation?: boolean | undefined
}

const noUsage: Usage = { inputTokens: 0, outputTokens: 0 }
const noCalls: ReadonlyArray<ToolCall> = []

const toTurn = (reply: ScriptedReply): ModelTurn => {
  const toolCalls = reply.toolCalls ?? noCalls
  return {
    text: reply.text,
    toolCalls,
    finishReason: reply.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    usage: reply.usage ?? noUsage
  }
}

/**
 * A scripted model, for tests and the offline demo: not a real model. Turn n of the script answers
 * the n-th request; past the end it fails with a `ModelError` that says so (or starts over, with
 * `repeat`). Also provides `Scripted`, to read the requests it received.
 */
export const layerScripted = (
  turns: ReadonlyArray<ScriptedTurn>,
  options?: ScriptedOptions
): Layer.Layer<LanguageModel | Scripted> =>
  Layer.effectContext(Effect.sync(() => {
    const received: Array<ModelRequest> = []
    const keep = options?.keepRequests ?? true
    let next = 0
    const stepOf = (request: ModelRequest): number => {
      let assistant = 0
      for (const message of request.messages) if (message._tag === "AssistantMessage") assistant++
      return assistant
    }
    const generate = (request: ModelRequest): Effect.Effect<ModelTurn, ModelFailure> =>
      Effect.suspend(() => {
        if (keep) received.push(request)
        if (options?.perConversation === true) next = stepOf(request)
        if (next >= turns.length && options?.repeat === true && turns.length > 0) next = next % turns.length
        const index = next++
        const turn = turns[index]
        if (turn === undefined) {
          return Effect.fail(
            new ModelError({
              message: `scripted model: the script has ${turns.length} turn(s) and request ${index + 1} came in`,
              transient: false
            })
          )
        }
        if (typeof turn !== "function") return Effect.succeed(toTurn(turn))
        const reply = turn(request)
        return Effect.isEffect(reply) ? Effect.map(reply, toTurn) : Effect.succeed(toTurn(reply))
      })
    return Context.make(LanguageModel, LanguageModel.of({ generate, provider: "scripted", model: "scripted" })).pipe(
      Context.add(Scripted, Scripted.of({ requests: Effect.sync(() => received.slice()) }))
    )
  }))
