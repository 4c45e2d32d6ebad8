/**
 * A run of a session (`Session.ts`): it takes the session from the journal (or is refused, `SessionBusy`), reads
 * the earlier turns its agent's history policy chooses (summarizing the oldest when asked), and, when it ends,
 * keeps its own messages as the session's next turn; a run that fails lets the session go unchanged, one that
 * suspends for approvals goes on holding it.
 */
import { Cause, Clock, Effect, Exit, Option } from "effect"
import type * as Journal from "../../Journal.js"
import type * as LanguageModel from "../../LanguageModel.js"
import { defaultHistory, type Held, type History, SessionBusy, type SessionTurn, summaryText } from "../../Session.js"
import type { Run, SessionHold } from "./run.js"
import type { Agent } from "./types.js"


/**
 * The run takes `session`: its model reads the session's earlier turns before the prompt. A new run refused
 * (`SessionBusy`) ends in the journal without a result; one that `stays` (resumed, or a host's) stays there.
 */
export const takeSession = (run: Run, session: string, stays: boolean): Effect.Effect<void, SessionBusy> => {
  const journal = run.journaled?.journal
  if (journal === undefined) {
    return Effect.dieMessage(`the run of the session ${session} has no journal: provide one (Journal.layerMemory, layerSql)`)
  }
  return take(run.agent, journal, session, run.runId).pipe(
    Effect.tapError(() =>
      stays ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) => journal.ended(run.runId, {}, now))
    ),
    Effect.map((history) => {
      run.messages = [...history, ...run.messages]
      run.session = { session, history: history.length }
    })
  )
}

/**
 * Takes `session` for the run `runId`: the messages its model reads before the prompt, or `SessionBusy`. With a
 * `summarize` hook, every turn since the last summary is read, and those over `maxTokens` are summarized.
 */
const take = (
  agent: Agent<any, any>,
  journal: Journal.Journal["Type"],
  session: string,
  runId: string
): Effect.Effect<ReadonlyArray<LanguageModel.Message>, SessionBusy> =>
  Effect.gen(function*() {
    const policy = agent.history ?? defaultHistory
    const limit = policy.summarize === undefined ? policy.lastTurns : undefined
    const taken = yield* journal.sessions.take(session, runId, limit)
    if ("heldBy" in taken) return yield* new SessionBusy({ session, runId: taken.heldBy })
    const { dropped, shown } = choose(taken, policy)
    let summary = taken.summary
    if (dropped.length > 0 && policy.summarize !== undefined) {
      summary = yield* policy.summarize({ summary, messages: dropped.flatMap((turn) => turn.messages) })
      yield* journal.sessions.summarized(session, runId, summary, dropped[dropped.length - 1]!.seq)
    }
    const history: Array<LanguageModel.Message> = summary === undefined ? [] : [{ _tag: "UserMessage", text: summaryText(summary) }]
    for (const turn of shown) history.push(...turn.messages)
    return history
  })

/** The turns the model reads (the last `lastTurns`, the newest within `maxTokens`) and the older ones it does not. */
const choose = (
  held: Held,
  policy: History
): { readonly shown: ReadonlyArray<SessionTurn>; readonly dropped: ReadonlyArray<SessionTurn> } => {
  const { turns } = held
  let first = policy.lastTurns === undefined ? 0 : Math.max(0, turns.length - policy.lastTurns)
  if (policy.maxTokens !== undefined) {
    let tokens = 0
    let fit = turns.length
    while (fit > first && tokens + turns[fit - 1]!.tokens <= policy.maxTokens) tokens += turns[--fit]!.tokens
    first = fit
  }
  return { shown: turns.slice(first), dropped: turns.slice(0, first) }
}

/**
 * The run `steps` of a session: it keeps its messages in the session when it ends (`Run.finish`); it lets the
 * session go when it fails or is interrupted, and goes on holding it when it suspends for approvals.
 */
export const holding = <A, E extends { readonly _tag: string }, R>(
  run: Run,
  hold: SessionHold,
  steps: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.onExit(steps, (exit) => {
    if (Exit.isSuccess(exit)) return Effect.void
    const suspended = Option.exists(Cause.failureOption(exit.cause), (error) => error._tag === "RunSuspended")
    return suspended ? Effect.void : run.journaled!.journal.sessions.release(hold.session, run.runId)
  })
