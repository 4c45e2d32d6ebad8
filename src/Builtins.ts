/**
 * Built-in tools (design: Built-ins). `getTodayDate` is a plain tool to add to an agent's tools. With
 * `completion: "explicit"` the agent adds `taskComplete` and `askUser` itself.
 */
import { Clock, Effect, Option, Schema } from "effect"
import { errorText } from "./ToolResult.js"
import * as Tool from "./Tool.js"
import { UserPrompt, type UserPromptError } from "./UserPrompt.js"

/** Today's date from the `Clock` (so `TestClock` sets it), as an ISO date: `2026-11-30`. */
export const getTodayDate = Tool.make("get_today_date", {
  description: "Return today's date (UTC) as an ISO date, like 2026-11-30.",
  input: {},
  output: Schema.String,
  timeout: "1 second"
}, () => Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis).toISOString().slice(0, 10)))

/** The name the agent loop watches for: a successful call ends the run with its `result`. */
export const taskCompleteName = "task_complete"

/** Ends the run with `result` as its output (explicit completion). */
export const taskComplete = Tool.make(taskCompleteName, {
  description: "Call this once the task is done, with the final answer for the user in result. It ends the task.",
  input: { result: Schema.String.annotations({ description: "The final answer for the user" }) },
  output: Schema.String,
  // It runs in no time; the timeout is what a resumed run has to re-run it after a crash mid-call (a call
  // started without an outcome re-runs within its journaled deadline): at 1 s, a resume more than a second
  // after the crash read it as timed out, and the run asked the model for a turn past its end.
  timeout: "10 minutes"
}, ({ result }) => Effect.succeed(result))

/** No `UserPrompt` service is provided. */
class NoUserAvailable extends Schema.TaggedError<NoUserAvailable>("agent-tools/NoUserAvailable")(
  "NoUserAvailable",
  {}
) {}

/** The text `ask_user` gives when no `UserPrompt` is provided (design: Built-ins). */
export const noUserText = "no user is available to answer"

/** Asks the user through the `UserPrompt` service, when there is one. */
export const askUser = Tool.make("ask_user", {
  description: "Ask the user a question and wait for the answer. Use it only when you cannot go on without the user.",
  input: { question: Schema.String.annotations({ description: "One clear question" }) },
  output: Schema.String,
  timeout: "15 minutes",
  errorTransform: (error) => error instanceof NoUserAvailable ? noUserText : errorText(error)
}, ({ question }) =>
  Effect.flatMap(
    Effect.serviceOption(UserPrompt),
    (prompt): Effect.Effect<string, NoUserAvailable | UserPromptError> =>
      Option.isSome(prompt) ? prompt.value.ask(question) : Effect.fail(new NoUserAvailable())
  ))

/** What the loop tells a model that replied without calling a tool, in explicit completion. */
export const reminder =
  "You replied without calling a tool. Go on with the task; when it is done, call task_complete with the final answer."
