/** Turns a model string (`"scripted"`; providers add `"anthropic:<model>"`, `"openai:<model>"`) into a layer. */
import { Layer, Schema } from "effect"
import * as LanguageModel from "./LanguageModel.js"

/** The model strings this build knows, as patterns. */
export const known: ReadonlyArray<string> = ["scripted"]

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
  /** The script of `"scripted"` (empty by default: its first request fails and says so). */
  readonly script?: ReadonlyArray<LanguageModel.ScriptedTurn> | undefined
}

/** The `LanguageModel` layer for a model string, or `UnknownModel` listing the known ones. */
export const layer = (model: string, options?: Options): Layer.Layer<LanguageModel.LanguageModel, UnknownModel> => {
  if (model === "scripted") return LanguageModel.layerScripted(options?.script ?? [])
  return Layer.fail(new UnknownModel({ model, known }))
}
