/**
 * What several commands of the CLI (`src/main.ts`) share: the `--model` option and the model it
 * chooses without one, and the failure of options that parse but do not go together. Imports Effect
 * module by module, as main.ts does (start-up time).
 */
import * as Options from "@effect/cli/Options"
import * as Data from "effect/Data"
import * as Option from "effect/Option"

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

/** The model string to use, and whether it was chosen for lack of a key. */
export const chooseModel = (option: Option.Option<string>): { readonly model: string; readonly note: string } => {
  if (Option.isSome(option)) return { model: option.value, note: "" }
  if ((process.env.ANTHROPIC_API_KEY ?? "") !== "") return { model: "anthropic:claude-sonnet-4-5", note: "ANTHROPIC_API_KEY is set" }
  if ((process.env.OPENAI_API_KEY ?? "") !== "" || (process.env.OPENAI_BASE_URL ?? "") !== "") {
    return { model: `openai:${process.env.OPENAI_MODEL ?? "gpt-4.1"}`, note: "OPENAI_API_KEY or OPENAI_BASE_URL is set" }
  }
  return {
    model: "scripted",
    note: "no ANTHROPIC_API_KEY or OPENAI_API_KEY: a scripted stand-in plays the model, not a real one"
  }
}
