/**
 * What several commands of the CLI (`src/main.ts`) share: the `--model` option and the model it
 * chooses without one (by the settings, through Config), and the failure of options that parse but
 * do not go together. Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Options from "@effect/cli/Options"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { optionalSecret, optionalString } from "../util/settings.js"

/** Options that parse but do not go together, or a setting a command cannot do without. */
export class BadOptions extends Data.TaggedError("BadOptions")<{ readonly message: string }> {}

/** `--model`: the model string, optional (`chooseModel` picks one without it). */
export const modelOption = Options.text("model").pipe(
  Options.withDescription(
    "scripted | anthropic:<model> | openai:<model> | openai-responses:<model> | google:<model> | bedrock:<model> | openrouter:<model>. Default: anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY, " +
      "openai:gpt-4.1 with OPENAI_API_KEY or OPENAI_BASE_URL, else the scripted stand-in"
  ),
  Options.optional
)

/**
 * The model string to use, and why it was chosen without `--model`: by the keys set (`ANTHROPIC_API_KEY`,
 * `OPENAI_API_KEY` or `OPENAI_BASE_URL`, with `OPENAI_MODEL`), read through Config (empty is unset).
 */
export const chooseModel = (option: Option.Option<string>): Effect.Effect<{ readonly model: string; readonly note: string }> =>
  Option.isSome(option) ? Effect.succeed({ model: option.value, note: "" }) : Effect.gen(function*() {
    if (Option.isSome(yield* optionalSecret("ANTHROPIC_API_KEY"))) {
      return { model: "anthropic:claude-sonnet-4-5", note: "ANTHROPIC_API_KEY is set" }
    }
    if (Option.isSome(yield* optionalSecret("OPENAI_API_KEY")) || Option.isSome(yield* optionalString("OPENAI_BASE_URL"))) {
      const model = Option.getOrElse(yield* optionalString("OPENAI_MODEL"), () => "gpt-4.1")
      return { model: `openai:${model}`, note: "OPENAI_API_KEY or OPENAI_BASE_URL is set" }
    }
    return {
      model: "scripted",
      note: "no ANTHROPIC_API_KEY or OPENAI_API_KEY: a scripted stand-in plays the model, not a real one"
    }
  })
