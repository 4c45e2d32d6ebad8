/**
 * Turns a model string into a `LanguageModel` layer: `"scripted"`, `"anthropic:<model>"`
 * (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`), `"openai:<model>"` (`OPENAI_API_KEY`,
 * `OPENAI_BASE_URL`, for OpenAI and any compatible server) or `"openai-responses:<model>"` (OpenAI's
 * Responses API, the same variables), our own clients; and through Effect's AI
 * packages (`providers/EffectAi.ts`), `"google:<model>"` (`GEMINI_API_KEY`), `"bedrock:<model>"`
 * (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`) and `"openrouter:<model>"`
 * (`OPENROUTER_API_KEY`).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Context, Effect, Layer, Schema } from "effect"
import * as LanguageModel from "./LanguageModel.js"
import * as Anthropic from "./providers/Anthropic.js"
import { MissingApiKey } from "./providers/Http.js"
import * as OpenAi from "./providers/OpenAi.js"
import * as OpenAiResponses from "./providers/OpenAiResponses.js"

export {
  /** A provider's API key is not configured. */
  MissingApiKey
}

/** The model strings this build knows, as patterns. */
export const known: ReadonlyArray<string> = [
  "scripted",
  "anthropic:<model>",
  "openai:<model>",
  "openai-responses:<model>",
  "google:<model>",
  "bedrock:<model>",
  "openrouter:<model>"
]

/** A model string that names no known model. */
export class UnknownModel extends Schema.TaggedError<UnknownModel>("agent-tools/UnknownModel")("UnknownModel", {
  model: Schema.String,
  known: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `unknown model ${JSON.stringify(this.model)}; the known models are ${this.known.join(", ")}`
  }
}

/** Options for `layer`. */
export interface Options {
  /**
   * The script of `"scripted"` (empty by default: its first request fails and says so). Each
   * conversation (a run, a platform's task) follows it from its first turn; no request is kept.
   */
  readonly script?: ReadonlyArray<LanguageModel.ScriptedTurn> | undefined
}

/**
 * The `LanguageModel` layer for a model string. Fails with `UnknownModel` (listing the known
 * strings) or, before any request, with `MissingApiKey` naming the variable to set.
 */
export const layer = (
  model: string,
  options?: Options
): Layer.Layer<LanguageModel.LanguageModel, UnknownModel | MissingApiKey> => {
  // Each task from the script's start, and no request kept: a platform serves many tasks, for long.
  if (model === "scripted") {
    return LanguageModel.layerScripted(options?.script ?? [], { perConversation: true, keepRequests: false })
  }
  const colon = model.indexOf(":")
  const provider = colon === -1 ? model : model.slice(0, colon)
  const name = colon === -1 ? "" : model.slice(colon + 1)
  if (name !== "" && provider === "anthropic") {
    return Anthropic.layerConfig(name).pipe(Layer.provide(NodeHttpClient.layer))
  }
  if (name !== "" && provider === "openai") return OpenAi.layerConfig(name).pipe(Layer.provide(NodeHttpClient.layer))
  if (name !== "" && provider === "openai-responses") {
    return OpenAiResponses.layerConfig(name).pipe(Layer.provide(NodeHttpClient.layer))
  }
  // Effect's AI packages load only for the model strings that use them.
  if (name !== "" && provider === "google") return throughEffectAi((m) => m.layerGoogle(name))
  if (name !== "" && provider === "bedrock") return throughEffectAi((m) => m.layerBedrock(name))
  if (name !== "" && provider === "openrouter") return throughEffectAi((m) => m.layerOpenRouter(name))
  return Layer.fail(new UnknownModel({ model, known }))
}

const throughEffectAi = (
  f: (module: typeof import("./providers/EffectAi.js")) => Layer.Layer<LanguageModel.LanguageModel, MissingApiKey>
): Layer.Layer<LanguageModel.LanguageModel, MissingApiKey> =>
  Layer.unwrapEffect(Effect.map(Effect.promise(() => import("./providers/EffectAi.js")), f))


/** Options of `fallback`: when the next model is asked (default `LanguageModel.fallsBack`), and the scripted model's script. */
export interface FallbackOptions extends LanguageModel.FallbackOptions, Options {}

/**
 * One `LanguageModel` made of several (model strings or layers), asked in order: in the agent loop the first with
 * its own retries, then, when it still fails with a failure `on` accepts (by default a transient one after its
 * retries, a rate limit, or a context-length rejection; never a rejected tool schema or an answer that did not
 * decode), the next. The turn's span (`gen_ai.response.model`), the run's `TurnCompleted` event and, in a journaled
 * run, the journal say which model answered; a resumed run replays the turn without asking any of them. A stream
 * that fails before its first part falls back; after it, the failure is the turn's.
 */
export const fallback = <E = never, R = never>(
  models: ReadonlyArray<string | Layer.Layer<LanguageModel.LanguageModel, E, R>>,
  options?: FallbackOptions
): Layer.Layer<LanguageModel.LanguageModel, E | UnknownModel | MissingApiKey, R> =>
  Layer.scoped(
    LanguageModel.LanguageModel,
    Effect.map(
      Effect.forEach(models, (model) =>
        Effect.map(
          Layer.build(
            (typeof model === "string" ? layer(model, options) : model) as Layer.Layer<
              LanguageModel.LanguageModel,
              E | UnknownModel | MissingApiKey,
              R
            >
          ),
          (context) => Context.get(context, LanguageModel.LanguageModel)
        )),
      (built) => LanguageModel.fallback(built, options)
    )
  )
