/**
 * Turns a model string into a `LanguageModel` layer: `"scripted"`, `"anthropic:<model>"`
 * (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`) or `"openai:<model>"` (`OPENAI_API_KEY`,
 * `OPENAI_BASE_URL`, for OpenAI and any compatible server).
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Layer, Schema } from "effect"
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
export const known: ReadonlyArray<string> = ["scripted", "anthropic:<model>", "openai:<model>", "openai-responses:<model>"]

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
  return Layer.fail(new UnknownModel({ model, known }))
}
