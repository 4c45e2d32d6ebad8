/**
 * The sessions of the run journal (design: Durable runs; `Session.ts`): which run holds each session, the
 * summary of its oldest turns, and its turns (one a run that ended, its messages as JSON). Plain SQL for SQLite
 * and PostgreSQL alike, as the rest of the journal's. A session is held by one run at a time: a holder whose run
 * ended, or that the journal no longer has, holds nothing (its process ended it without releasing).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Effect, Schema } from "effect"
import * as LanguageModel from "../../LanguageModel.js"
import type { Held, SessionTurn } from "../../Session.js"
import { estimateTokens } from "../../Session.js"
import * as SqlStore from "./store.js"

/** Migration `0005_sessions` of the journal (journal.ts): the sessions and their turns. */
export const migration = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.all([
    sql`CREATE TABLE IF NOT EXISTS journal_sessions (
      session_id TEXT PRIMARY KEY,
      holder TEXT,
      summary TEXT,
      summary_upto INTEGER NOT NULL DEFAULT 0,
      updated_at BIGINT NOT NULL
    )`,
    sql`CREATE TABLE IF NOT EXISTS journal_session_turns (
      session_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      run_id TEXT NOT NULL,
      messages TEXT NOT NULL,
      tokens INTEGER NOT NULL,
      at BIGINT NOT NULL,
      PRIMARY KEY (session_id, seq)
    )`,
    sql`CREATE INDEX IF NOT EXISTS journal_sessions_holder ON journal_sessions (holder)`
  ], { discard: true }))

/** The sessions' reads and writes, as the journal gives them (`Journal.sessions`). */
export interface Store {
  /**
   * Takes `session` for the run `runId` (again, for a resumed run that holds it): the session as the run reads
   * it (its last `limit` turns since its summary, all without a limit), or the run that holds it.
   */
  readonly take: (
    session: string,
    runId: string,
    limit: number | undefined
  ) => Effect.Effect<Held | { readonly heldBy: string }>
  /** Keeps the run's `messages` as the session's next turn (once per run) and lets the session go. */
  readonly keep: (session: string, runId: string, messages: ReadonlyArray<LanguageModel.Message>) => Effect.Effect<void>
  /** Keeps `summary` in place of the session's turns up to `upTo` (while `runId` holds it). */
  readonly summarized: (session: string, runId: string, summary: string, upTo: number) => Effect.Effect<void>
  /** Lets the session go, if `runId` holds it. */
  readonly release: (session: string, runId: string) => Effect.Effect<void>
  /** The session the run `runId` holds, if any (a resumed run goes on holding it). */
  readonly heldBy: (runId: string) => Effect.Effect<string | undefined>
}

const MessagesJson = Schema.parseJson(Schema.Array(LanguageModel.Message))

interface SessionRow {
  readonly holder: string | null
  readonly summary: string | null
  readonly summary_upto: number | string
}

/** A statement, tried again while another process holds the file (SQLite); a failure is a defect, as the journal's writes. */
const orDie = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A> => Effect.orDie(SqlStore.whileBusy(effect))

/** The sessions' store on `sql` (a client without name transforms). */
export const make = (sql: SqlClient.SqlClient): Store => {
  const take = (session: string, runId: string, at: number) =>
    sql<SessionRow>`INSERT INTO journal_sessions (session_id, holder, summary, summary_upto, updated_at)
      VALUES (${session}, ${runId}, NULL, 0, ${at})
      ON CONFLICT (session_id) DO UPDATE SET holder = excluded.holder, updated_at = excluded.updated_at
      WHERE journal_sessions.holder IS NULL OR journal_sessions.holder = excluded.holder
        OR NOT EXISTS (SELECT 1 FROM journal_tasks t WHERE t.task_id = journal_sessions.holder AND t.status <> 'ended')
      RETURNING holder, summary, summary_upto`
  const turns = (session: string, after: number, limit: number | undefined) =>
    limit === undefined
      ? sql<{ readonly seq: number | string; readonly messages: string; readonly tokens: number | string }>`SELECT
          seq, messages, tokens FROM journal_session_turns WHERE session_id = ${session} AND seq > ${after} ORDER BY seq`
      : Effect.map(
        sql<{ readonly seq: number | string; readonly messages: string; readonly tokens: number | string }>`SELECT
          seq, messages, tokens FROM journal_session_turns WHERE session_id = ${session} AND seq > ${after}
          ORDER BY seq DESC LIMIT ${limit}`,
        (rows) => rows.slice().reverse()
      )
  return {
    take: (session, runId, limit) =>
      orDie(Effect.gen(function*() {
        const [row] = yield* take(session, runId, yield* Clock.currentTimeMillis)
        if (row === undefined) {
          const [held] = yield* sql<{ readonly holder: string | null }>`SELECT holder FROM journal_sessions
            WHERE session_id = ${session}`
          return { heldBy: held?.holder ?? "" }
        }
        const upTo = Number(row.summary_upto)
        const kept: Array<SessionTurn> = []
        for (const turn of yield* turns(session, upTo, limit)) {
          kept.push({ seq: Number(turn.seq), messages: yield* Schema.decode(MessagesJson)(turn.messages), tokens: Number(turn.tokens) })
        }
        const held: Held = { summary: row.summary ?? undefined, turns: kept }
        return held
      })),
    keep: (session, runId, messages) =>
      orDie(Effect.flatMap(Clock.currentTimeMillis, (at) =>
        sql.withTransaction(Effect.all([
          // Once per run (a resumed run that ended before may end again), and only while it holds the session.
          sql`INSERT INTO journal_session_turns (session_id, seq, run_id, messages, tokens, at)
            SELECT CAST(${session} AS TEXT), n.next, CAST(${runId} AS TEXT), CAST(${Schema.encodeSync(MessagesJson)(messages)} AS TEXT),
              CAST(${estimateTokens(messages)} AS INTEGER), CAST(${at} AS BIGINT)
            FROM (SELECT COALESCE(MAX(seq), 0) + 1 AS next FROM journal_session_turns WHERE session_id = ${session}) n
            WHERE NOT EXISTS (SELECT 1 FROM journal_session_turns WHERE session_id = ${session} AND run_id = ${runId})
              AND EXISTS (SELECT 1 FROM journal_sessions WHERE session_id = ${session} AND holder = ${runId})`,
          sql`UPDATE journal_sessions SET holder = NULL, updated_at = ${at} WHERE session_id = ${session} AND holder = ${runId}`
        ], { discard: true })))),
    summarized: (session, runId, summary, upTo) =>
      orDie(sql`UPDATE journal_sessions SET summary = ${summary}, summary_upto = ${upTo}
        WHERE session_id = ${session} AND holder = ${runId}`),
    release: (session, runId) =>
      orDie(Effect.flatMap(Clock.currentTimeMillis, (at) =>
        sql`UPDATE journal_sessions SET holder = NULL, updated_at = ${at} WHERE session_id = ${session} AND holder = ${runId}`)),
    heldBy: (runId) =>
      orDie(Effect.map(
        sql<{ readonly session_id: string }>`SELECT session_id FROM journal_sessions WHERE holder = ${runId}`,
        (rows) => rows[0]?.session_id
      ))
  }
}
