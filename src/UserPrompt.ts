/**
 * Asking the user a question (design: Built-ins; `ask_user`). Optional: without it, `ask_user` answers that no
 * user is available. `layerTerminal` asks on the terminal; `layerTest` answers from a list.
 */
import * as Terminal from "@effect/platform/Terminal"
import { Context, Effect, Layer, Ref, Schema } from "effect"

/** The question could not be answered. */
export class UserPromptError extends Schema.TaggedError<UserPromptError>("agent-tools/UserPromptError")(
  "UserPromptError",
  { message: Schema.String }
) {}

/** Asks the user and waits for the answer. */
export class UserPrompt extends Context.Tag("agent-tools/UserPrompt")<UserPrompt, {
  readonly ask: (question: string) => Effect.Effect<string, UserPromptError>
}>() {}

/** Asks on the terminal: prints the question, reads one line. */
export const layerTerminal: Layer.Layer<UserPrompt, never, Terminal.Terminal> = Layer.effect(
  UserPrompt,
  Effect.map(Terminal.Terminal, (terminal) =>
    UserPrompt.of({
      ask: (question) =>
        terminal.display(`${question}\n> `).pipe(
          Effect.zipRight(terminal.readLine),
          Effect.mapError((error) => new UserPromptError({ message: `the terminal gave no answer (${error._tag})` }))
        )
    }))
)

/** Canned answers, in order; once they run out, each question fails with a `UserPromptError`. */
export const layerTest = (answers: ReadonlyArray<string>): Layer.Layer<UserPrompt> =>
  Layer.effect(
    UserPrompt,
    Effect.map(Ref.make(0), (next) =>
      UserPrompt.of({
        ask: (question) =>
          Ref.getAndUpdate(next, (n) => n + 1).pipe(
            Effect.flatMap((n) =>
              n < answers.length
                ? Effect.succeed(answers[n]!)
                : Effect.fail(new UserPromptError({ message: `no canned answer left for ${JSON.stringify(question)}` }))
            )
          )
      }))
  )
