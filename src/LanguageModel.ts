/**
 * The model seam: a request (instructions, messages, tool definitions) in, one assistant turn out,
 * as a stream of parts (design: The model side) or collected. Everything here is a Schema, because
 * providers and the platform send it over the wire. Providers implement the `LanguageModel` service;
 * `LanguageModel.layerScripted` is the deterministic one for tests and the offline demo.
 */
import { Context, Data, Effect, Layer, Schema, Stream } from "effect"

/** One tool call the model asked for; `arguments` is JSON text, exactly as the model wrote it. */
export const ToolCall = Schema.Struct({ id: Schema.String, name: Schema.String, arguments: Schema.String })
/** One tool call the model asked for. */
export type ToolCall = typeof ToolCall.Type

/**
 * Token counts of one turn, or summed over a run. `cacheReadTokens` (prompt tokens read from the
 * provider's prompt cache) and `cacheWriteTokens` (written to it) are there when the provider said.
 */
export const Usage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  cacheReadTokens: Schema.optional(Schema.Number),
  cacheWriteTokens: Schema.optional(Schema.Number)
})
/** Token counts. */
export type Usage = typeof Usage.Type

/**
 * `usage` with every count that is not a whole number from 0 up (negative, fractional, `1e999` read as
 * Infinity, `null`) counted as unknown: 0, or left out where the count is optional. `bad` names the fields
 * taken out, empty when every count held.
 */
export const checkUsage = (usage: Usage): { readonly usage: Usage; readonly bad: ReadonlyArray<string> } => {
  const bad: Array<string> = []
  const count = (name: keyof Usage): number | undefined => {
    const value = usage[name] as unknown
    if (value === undefined) return undefined
    if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value
    bad.push(`${name}: ${String(value)}`)
    return undefined
  }
  const checked: { -readonly [K in keyof Usage]: Usage[K] } = {
    inputTokens: count("inputTokens") ?? 0,
    outputTokens: count("outputTokens") ?? 0
  }
  const read = count("cacheReadTokens")
  const written = count("cacheWriteTokens")
  if (read !== undefined) checked.cacheReadTokens = read
  if (written !== undefined) checked.cacheWriteTokens = written
  return { usage: bad.length === 0 ? usage : checked, bad }
}

/** Why the model stopped this turn. */
export const FinishReason = Schema.Literal("stop", "tool_calls", "length", "content_filter", "error", "other")
/** Why the model stopped this turn. */
export type FinishReason = typeof FinishReason.Type

/**
 * A reasoning block of a turn, kept to be sent back as the provider requires (design: The model side):
 * Anthropic's `thinking` with its `signature`, byte for byte, and its `redacted_thinking` (`data`);
 * an OpenAI-compatible server's reasoning text (no signature); OpenAI Responses' reasoning item, its
 * `id` and `encrypted_content` (`data`) as they came, and its summary text.
 */
export const ReasoningBlock = Schema.Union(
  Schema.TaggedStruct("Thinking", { text: Schema.String, signature: Schema.optional(Schema.String) }),
  Schema.TaggedStruct("RedactedThinking", { data: Schema.String }),
  Schema.TaggedStruct("EncryptedReasoning", { id: Schema.String, data: Schema.String, summary: Schema.optional(Schema.String) })
)
/** A reasoning block of a turn. */
export type ReasoningBlock = typeof ReasoningBlock.Type

/** One assistant turn. `reasoning` is journaled with it, so a resumed run sends it back too. */
export const ModelTurn = Schema.Struct({
  text: Schema.optional(Schema.String),
  toolCalls: Schema.Array(ToolCall),
  reasoning: Schema.optional(Schema.Array(ReasoningBlock)),
  finishReason: FinishReason,
  usage: Usage,
  /**
   * The model that answered, as `provider:model`, when a fallback chain (`fallback`) asked: journaled with the
   * turn, so a resumed run knows it (and prices it) without asking again.
   */
  model: Schema.optional(Schema.String)
})
/** One assistant turn. */
export type ModelTurn = typeof ModelTurn.Type

/** What the user said. */
export const UserMessage = Schema.TaggedStruct("UserMessage", { text: Schema.String })
/** What the assistant said and which tools it called; its reasoning blocks, to send back. */
export const AssistantMessage = Schema.TaggedStruct("AssistantMessage", {
  text: Schema.optional(Schema.String),
  toolCalls: Schema.Array(ToolCall),
  reasoning: Schema.optional(Schema.Array(ReasoningBlock))
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

/**
 * A typed final output asked of the model (design: The model side): its answer is JSON that `schema`
 * (JSON Schema) describes. Providers use their structured-output mode: OpenAI's `response_format`
 * `json_schema`; Anthropic's a tool named `name` whose input is the answer.
 */
export const OutputFormat = Schema.Struct({ name: Schema.String, schema: Schema.Unknown })
/** A typed final output asked of the model. */
export type OutputFormat = typeof OutputFormat.Type

/** Everything the model is asked with. `tools` is the toolkit's list, built once, not per request. */
export const ModelRequest = Schema.Struct({
  instructions: Schema.optional(Schema.String),
  messages: Schema.Array(Message),
  tools: Schema.Array(ToolDefinition),
  output: Schema.optional(OutputFormat)
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

const contextLengthWords =
  /context[_ ]length|context window|maximum context|prompt is too long|input is too long|too many (input )?tokens|exceeds? the (model's )?(maximum|max) (number of )?tokens/i

/**
 * True when the provider rejected the request for its length (the conversation past the model's context
 * window): OpenAI's `context_length_exceeded`, Anthropic's "prompt is too long", a 413.
 */
export const isContextLength = (failure: ModelFailure): boolean =>
  failure._tag === "ModelRequestRejected" && (failure.status === 413 || contextLengthWords.test(failure.message))

/**
 * The default of `fallback`'s `on`: a failure the next model may not have. A transient one (429, 5xx, overloaded,
 * no answer in time) after the model's own retries, a rate limit of this process (`RateLimit`), or a
 * context-length rejection. Never a rejected request otherwise (a bad tool schema), an auth failure, or an answer
 * that did not decode: the next model would fail the same way, or the fault is ours.
 */
export const fallsBack = (failure: ModelFailure): boolean =>
  (failure._tag === "ModelError" && (failure.transient || failure.status === 429)) || isContextLength(failure)

/** A model's name as a turn, an event and the price table say it: `provider:model`. */
export const labelOf = (model: { readonly provider?: string | undefined; readonly model?: string | undefined }): string =>
  model.provider !== undefined && model.model !== undefined
    ? `${model.provider}:${model.model}`
    : model.model ?? model.provider ?? "model"

// ---------------------------------------------------------------------------------------------
// A turn as a stream of parts.

/**
 * A part of a streamed turn, in the order the model wrote it: text and reasoning deltas, a reasoning
 * block once complete (with its signature), each tool call once its arguments are complete, the
 * usage, and last the finish.
 */
export type ModelPart = Data.TaggedEnum<{
  TextDelta: { readonly text: string }
  ReasoningDelta: { readonly text: string }
  Reasoning: { readonly block: ReasoningBlock }
  ToolCall: { readonly call: ToolCall }
  Usage: { readonly usage: Usage }
  Finish: { readonly finishReason: FinishReason }
}>
/** Constructors and matchers of `ModelPart`. */
export const ModelPart = Data.taggedEnum<ModelPart>()

const noUsage: Usage = { inputTokens: 0, outputTokens: 0 }

/** Gathers a turn's parts into the turn: the one place a stream becomes a `ModelTurn`. */
export class TurnCollector {
  private text: string | undefined = undefined
  private readonly toolCalls: Array<ToolCall> = []
  private reasoning: Array<ReasoningBlock> | undefined = undefined
  private usage: Usage = noUsage
  private finishReason: FinishReason | undefined = undefined

  add(part: ModelPart): void {
    switch (part._tag) {
      case "TextDelta":
        this.text = this.text === undefined ? part.text : this.text + part.text
        return
      case "Reasoning":
        ;(this.reasoning ??= []).push(part.block)
        return
      case "ToolCall":
        this.toolCalls.push(part.call)
        return
      case "Usage":
        this.usage = part.usage
        return
      case "Finish":
        this.finishReason = part.finishReason
        return
    }
  }

  turn(): ModelTurn {
    const finishReason = this.finishReason ?? (this.toolCalls.length > 0 ? "tool_calls" : "stop")
    const turn = { text: this.text, toolCalls: this.toolCalls, finishReason, usage: this.usage }
    return this.reasoning === undefined ? turn : { ...turn, reasoning: this.reasoning }
  }
}

/** The turn parts already at hand make (a scripted model's): the same collector, without a stream. */
export const collectParts = (parts: Iterable<ModelPart>): ModelTurn => {
  const collector = new TurnCollector()
  for (const part of parts) collector.add(part)
  return collector.turn()
}

/** The turn a stream of parts makes, telling `onPart` each part as it comes. */
export const collect = <E, R>(
  parts: Stream.Stream<ModelPart, E, R>,
  onPart?: (part: ModelPart) => void
): Effect.Effect<ModelTurn, E, R> =>
  Effect.suspend(() => {
    const collector = new TurnCollector()
    const each = (part: ModelPart) =>
      Effect.sync(() => {
        collector.add(part)
        onPart?.(part)
      })
    return Effect.map(Stream.runForEach(parts, each), () => collector.turn())
  })

/**
 * The parts of a whole turn, in the order a stream would carry them: its text (and reasoning text)
 * in one delta, or in deltas of `chunk` characters (a scripted model that streams).
 */
export const partsOf = (turn: ModelTurn, chunk?: number): Array<ModelPart> => {
  const parts: Array<ModelPart> = []
  const deltas = (text: string, make: (text: string) => ModelPart) => {
    if (chunk === undefined) return void parts.push(make(text))
    for (let i = 0; i < text.length; i += chunk) parts.push(make(text.slice(i, i + chunk)))
  }
  for (const block of turn.reasoning ?? []) {
    if (block._tag === "Thinking") deltas(block.text, (text) => ModelPart.ReasoningDelta({ text }))
    parts.push(ModelPart.Reasoning({ block }))
  }
  if (turn.text !== undefined) deltas(turn.text, (text) => ModelPart.TextDelta({ text }))
  for (const call of turn.toolCalls) parts.push(ModelPart.ToolCall({ call }))
  parts.push(ModelPart.Usage({ usage: turn.usage }), ModelPart.Finish({ finishReason: turn.finishReason }))
  return parts
}

/** A `stream` for a model that answers whole: its turn's parts, once it has answered. */
export const streamOf = <E>(
  generate: (request: ModelRequest) => Effect.Effect<ModelTurn, E>
) =>
(request: ModelRequest): Stream.Stream<ModelPart, E> =>
  Stream.unwrap(Effect.map(generate(request), (turn) => Stream.fromIterable(partsOf(turn))))

/**
 * The model: one request in, one assistant turn out, as a stream of parts (`stream`) or collected
 * (`generate`, which is `collect(stream(request))` for a streaming provider).
 */
export class LanguageModel extends Context.Tag("agent-tools/LanguageModel")<LanguageModel, Service>() {}

/** What a `LanguageModel` is. */
export interface Service {
  readonly generate: (request: ModelRequest) => Effect.Effect<ModelTurn, ModelFailure>
  /**
   * The turn as its parts, as the model writes them. A failure before the first part is the
   * request's (retried like `generate`'s); one after it fails the turn the same way, and what came is
   * discarded: nothing resumes a broken stream.
   */
  readonly stream: (request: ModelRequest) => Stream.Stream<ModelPart, ModelFailure>
  /**
   * True when `stream` gives the parts as the model writes them (a provider). Otherwise its parts
   * come only once the whole turn is answered, so a watched run asks `generate` and tells the
   * answer's parts (no stream to run per turn).
   */
  readonly streams?: boolean | undefined
  /** Who serves it, as OpenTelemetry's `gen_ai.provider.name` says it (`anthropic`, `openai`), for the `chat` span. */
  readonly provider?: string | undefined
  /** The model asked for (`gen_ai.request.model`): the `chat` span is named after it. */
  readonly model?: string | undefined
  /**
   * The provider whose strict-mode schema form this model requires of every tool
   * (`StrictSchema.Provider`): a tool with none is refused, on the platform at registration. Absent:
   * any schema goes (the provider's non-strict mode takes it).
   */
  readonly strictSchemas?: string | undefined
  /**
   * A fallback chain's models, in order, and when the next is asked (`fallback`). The agent loop asks each with
   * its own retries, then the next on a failure `on` accepts; the turn records the model that answered.
   */
  readonly fallbacks?: {
    readonly models: ReadonlyArray<Service>
    readonly on: (failure: ModelFailure) => boolean
  } | undefined
}

// ---------------------------------------------------------------------------------------------
// Fallback chains.

/** Options of `fallback`. */
export interface FallbackOptions {
  /** Which failures of a model make the next one be asked. Default `fallsBack`. */
  readonly on?: ((failure: ModelFailure) => boolean) | undefined
}

/**
 * One model made of several, asked in order: the next when the current one fails with a failure `on` accepts.
 * Called directly, each model is asked once; in the agent loop each has its retries first (`Timing.modelRetry`).
 * A stream falls back only when it fails before its first part: after it, the failure is the turn's. Its
 * `provider` and `model` are the first model's; the turn says which answered (`ModelTurn.model`).
 */
export const fallback = (
  models: ReadonlyArray<Service>,
  options?: FallbackOptions
): Service => {
  if (models.length === 0) throw new Error("fallback: give at least one model")
  const on = options?.on ?? fallsBack
  const generate = (request: ModelRequest, i = 0): Effect.Effect<ModelTurn, ModelFailure> =>
    Effect.catchIf(
      Effect.map(models[i]!.generate(request), (turn) => ({ ...turn, model: turn.model ?? labelOf(models[i]!) })),
      (failure) => i + 1 < models.length && on(failure),
      () => generate(request, i + 1)
    )
  const stream = (request: ModelRequest, i = 0): Stream.Stream<ModelPart, ModelFailure> =>
    Stream.suspend(() => {
      let started = false
      return models[i]!.stream(request).pipe(
        Stream.tap(() => Effect.sync(() => void (started = true))),
        Stream.catchAll((failure) =>
          !started && i + 1 < models.length && on(failure) ? stream(request, i + 1) : Stream.fail(failure)
        )
      )
    })
  const first = models[0]!
  return LanguageModel.of({
    generate: (request) => generate(request),
    stream: (request) => stream(request),
    streams: models.every((m) => m.streams === true),
    provider: first.provider,
    model: first.model,
    fallbacks: { models, on }
  })
}

// ---------------------------------------------------------------------------------------------
// The scripted model.

/** A scripted reply: any part left out takes its default (no text, no calls, no usage). */
export interface ScriptedReply {
  readonly text?: string | undefined
  readonly toolCalls?: ReadonlyArray<ToolCall> | undefined
  readonly finishReason?: FinishReason | undefined
  readonly usage?: Usage | undefined
  readonly reasoning?: ReadonlyArray<ReasoningBlock> | undefined
}

/** A turn of a script: a fixed reply, or one computed from the request (to react to tool results). */
export type ScriptedTurn =
  | ScriptedReply
  | ((request: ModelRequest) => ScriptedReply | Effect.Effect<ScriptedReply, ModelFailure>)

/** What a scripted model saw, for assertions. */
export class Scripted extends Context.Tag("agent-tools/LanguageModel/Scripted")<Scripted, {
  /**
   * The requests received so far, oldest first: the latest 100 by default, every one with `keepRequests: true`,
   * none with `keepRequests: false` (`ScriptedOptions.keepRequests`).
   */
  readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
}>() {}

/** Options of the scripted model. */
export interface ScriptedOptions {
  /** Start over after the last turn instead of failing (a script that serves many runs). Default false. */
  readonly repeat?: boolean | undefined
  /**
   * The requests kept for `Scripted.requests`: `true` every one, `false` none, a number the latest that many.
   * Default the latest 100 (`defaultKeptRequests`): every request of a test, and a scripted model serving many
   * runs (a benchmark, a server) neither grows nor makes the garbage collector copy thousands of kept requests.
   */
  readonly keepRequests?: boolean | number | undefined
  /**
   * Each conversation follows the script from its start: turn n answers a request carrying n - 1
   * assistant messages, whatever other conversations asked (a platform's many tasks). Default false:
   * turn n answers the n-th request the layer received.
   */
  readonly perConversation?: boolean | undefined
  /**
   * Answer as a streaming provider does: `stream` gives each reply's text in deltas of `chunk`
   * characters (default 8), and `generate` collects that stream. Default: `generate` answers whole,
   * and `stream` gives the whole reply's parts.
   */
  readonly streamed?: { readonly chunk?: number | undefined } | undefined
}

const noCalls: ReadonlyArray<ToolCall> = []

/** How many of the latest requests a scripted model keeps for `Scripted.requests` unless told (`keepRequests`). */
export const defaultKeptRequests = 100

const toTurn = (reply: ScriptedReply): ModelTurn => {
  const toolCalls = reply.toolCalls ?? noCalls
  const turn = {
    text: reply.text,
    toolCalls,
    finishReason: reply.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    usage: reply.usage ?? noUsage
  }
  return reply.reasoning === undefined ? turn : { ...turn, reasoning: reply.reasoning }
}

/** A scripted model as a value: the `LanguageModel` service, and the requests it received (as `Scripted` gives them). */
export interface ScriptedModel extends Service {
  /** The requests received so far, oldest first, as `keepRequests` says (`Scripted.requests`). */
  readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
}

/**
 * A scripted model, for tests and the offline demo: not a real model. Turn n of the script answers
 * the n-th request; past the end it fails with a `ModelError` that says so (or starts over, with
 * `repeat`). Made at once, without a layer: each call is a new model with its own place in the script
 * and its own requests. Provide it with `Effect.provideService(effect, LanguageModel, model)`; read what
 * it received with `model.requests` (the latest 100 unless `keepRequests` says otherwise).
 */
export const scripted = (turns: ReadonlyArray<ScriptedTurn>, options?: ScriptedOptions): ScriptedModel =>
  new Script(turns, options)

/** The assistant messages of `request`: the step of its conversation it is. */
const stepOf = (request: ModelRequest): number => {
  let assistant = 0
  for (const message of request.messages) if (message._tag === "AssistantMessage") assistant++
  return assistant
}

/** Where a scripted model is in its script, and the requests it keeps (the latest `keep`: a ring once full). */
interface ScriptState {
  readonly turns: ReadonlyArray<ScriptedTurn>
  readonly options: ScriptedOptions | undefined
  readonly keep: number
  readonly chunk: number | undefined
  readonly received: Array<ModelRequest>
  oldest: number
  next: number
}

const keepRequest = (state: ScriptState, request: ModelRequest): void => {
  if (state.received.length < state.keep) state.received.push(request)
  else if (state.keep > 0) {
    state.received[state.oldest] = request
    state.oldest = (state.oldest + 1) % state.keep
  }
}

const answerOf = (state: ScriptState, request: ModelRequest): Effect.Effect<ModelTurn, ModelFailure> => {
  keepRequest(state, request)
  const { options, turns } = state
  if (options?.perConversation === true) state.next = stepOf(request)
  if (state.next >= turns.length && options?.repeat === true && turns.length > 0) state.next = state.next % turns.length
  const index = state.next++
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
}

// `generate` and `stream` of every scripted model: one function each, whatever the model, so that a model made for
// each run (`Agent.run`'s `model` option) is not a new set of closures the loop's calls see (3-6 us a run). Its
// state is the model's `script` (a copy of the model, `{ ...model, provider }`, shares it).
function scriptGenerate(this: { readonly script: ScriptState }, request: ModelRequest): Effect.Effect<ModelTurn, ModelFailure> {
  const state = this.script
  // Streamed, `generate` collects the same parts, without running a stream.
  return Effect.suspend(() => {
    const answered = answerOf(state, request)
    const chunk = state.chunk
    return chunk === undefined ? answered : Effect.map(answered, (turn) => collectParts(partsOf(turn, chunk)))
  })
}

function scriptStream(this: { readonly script: ScriptState }, request: ModelRequest): Stream.Stream<ModelPart, ModelFailure> {
  const state = this.script
  return Stream.unwrap(Effect.suspend(() => Effect.map(answerOf(state, request), (turn) => Stream.fromIterable(partsOf(turn, state.chunk)))))
}

/** `scripted`'s model. */
class Script implements ScriptedModel {
  readonly provider = "scripted"
  readonly model = "scripted"
  readonly streams: boolean
  readonly requests: Effect.Effect<ReadonlyArray<ModelRequest>>
  readonly script: ScriptState
  readonly generate: Service["generate"] = scriptGenerate
  readonly stream: Service["stream"] = scriptStream

  constructor(turns: ReadonlyArray<ScriptedTurn>, options: ScriptedOptions | undefined) {
    const keep = options?.keepRequests ?? defaultKeptRequests
    const chunk = options?.streamed === undefined ? undefined : Math.max(1, options.streamed.chunk ?? 8)
    const state: ScriptState = {
      turns,
      options,
      keep: keep === true ? Infinity : keep === false ? 0 : keep,
      chunk,
      received: [],
      oldest: 0,
      next: 0
    }
    this.script = state
    this.streams = chunk !== undefined
    this.requests = Effect.sync(() =>
      state.oldest === 0 ? state.received.slice() : [...state.received.slice(state.oldest), ...state.received.slice(0, state.oldest)]
    )
  }
}

/**
 * `scripted` as a layer: a new scripted model each time the layer is built, as the `LanguageModel`
 * service, with `Scripted` to read the requests it received.
 */
export const layerScripted = (
  turns: ReadonlyArray<ScriptedTurn>,
  options?: ScriptedOptions
): Layer.Layer<LanguageModel | Scripted> =>
  Layer.effectContext(Effect.sync(() => {
    const model = scripted(turns, options)
    return Context.make(LanguageModel, model).pipe(Context.add(Scripted, Scripted.of({ requests: model.requests })))
  }))
