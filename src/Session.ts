/**
 * Sessions (design: The loop): `Agent.run(agent, prompt, { session: "s-42" })` goes on with the conversation of
 * the session's earlier runs. Each run of a session that ends is kept in the run journal as one turn of the
 * session (its prompt, its model turns, its calls with their results, its answer); the next run's model reads
 * the turns its agent's `history` policy chooses, whole (a call is never shown without its result), before its
 * own prompt. One run holds a session at a time: a second run of it while the first goes is refused with
 * `SessionBusy`, never interleaved.
 */
import { type Effect, Schema } from "effect"
import type * as LanguageModel from "./LanguageModel.js"

/**
 * What the model of a session's run reads of the session's earlier turns. A turn of a session is one run that
 * ended: its prompt, model turns, calls and results, and answer, kept or dropped whole.
 */
export interface History {
  /** At most the last `lastTurns` turns. Default: no limit. */
  readonly lastTurns?: number | undefined
  /**
   * At most this many tokens of earlier turns (estimated, 4 characters a token): the newest turns that fit.
   * Default: no limit.
   */
  readonly maxTokens?: number | undefined
  /**
   * With `maxTokens`: called when the turns since the last summary are over it, with that summary and the
   * messages of the oldest turns that do not fit; the text it gives is kept in the session in their place and
   * shown first to the model of every later run. It cannot fail: one that may should fall back to its own text.
   */
  readonly summarize?:
    | ((input: {
      readonly summary: string | undefined
      readonly messages: ReadonlyArray<LanguageModel.Message>
    }) => Effect.Effect<string>)
    | undefined
}

/** The default history: every turn since the last summary. */
export const defaultHistory: History = {}

/**
 * Another run holds the session: runs of one session never interleave. Run again once it has ended; a run whose
 * process died holds it until it is resumed (`Agent.resume`) and ends.
 */
export class SessionBusy extends Schema.TaggedError<SessionBusy>("agent-tools/SessionBusy")("SessionBusy", {
  session: Schema.String,
  /** The run that holds it. */
  runId: Schema.String
}) {
  override get message(): string {
    return `the session ${this.session} is held by the run ${this.runId}: run again once it has ended ` +
      `(resume it with Agent.resume if its process died)`
  }
}

/** One turn of a session as the journal keeps it: the run's messages, and their estimated tokens. */
export interface SessionTurn {
  readonly seq: number
  readonly messages: ReadonlyArray<LanguageModel.Message>
  readonly tokens: number
}

/** A session as a run that takes it reads it: the summary of its oldest turns, if any, and the turns after it. */
export interface Held {
  readonly summary: string | undefined
  /** Oldest first. */
  readonly turns: ReadonlyArray<SessionTurn>
}

/** Estimated tokens of `messages`: 4 characters of their JSON a token. */
export const estimateTokens = (messages: ReadonlyArray<LanguageModel.Message>): number =>
  Math.ceil(JSON.stringify(messages).length / 4)

/** The text the model reads first when a session has a summary of its oldest turns. */
export const summaryText = (summary: string): string => `A summary of the conversation before the turns that follow:\n${summary}`
