/**
 * Every SQL statement of the platform's journal (design: The platform), in one module. Plain, portable SQL (SQLite
 * now, PostgreSQL's `@effect/sql-pg` later): `ON CONFLICT ... DO NOTHING`, integers for times, text
 * for JSON. Times come from the caller, never from the database.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The migrator's own table for these migrations: not the default one, which another module's
 * migrations (the claims store's) may share the file with and also number from 1.
 */
export const migrationsTable = "agent_tools_journal_migrations"

/**
 * The migrations, in order, for `@effect/sql`'s migrator. `IF NOT EXISTS`: a file made before the
 * migrations had their own table may already hold these tables, and must still open.
 */
export const migrations = {
  "0001_create_journal": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE IF NOT EXISTS journal_tasks (
        task_id TEXT PRIMARY KEY,
        agent_id TEXT NOT NULL,
        process_id TEXT NOT NULL,
        prompt TEXT NOT NULL,
        tools TEXT NOT NULL,
        status TEXT NOT NULL,
        final TEXT,
        ended_at BIGINT
      )`,
      sql`CREATE TABLE IF NOT EXISTS journal_turns (
        task_id TEXT NOT NULL,
        step INTEGER NOT NULL,
        turn TEXT NOT NULL,
        PRIMARY KEY (task_id, step)
      )`,
      sql`CREATE TABLE IF NOT EXISTS journal_calls (
        task_id TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        deadline_at BIGINT NOT NULL,
        result TEXT,
        PRIMARY KEY (task_id, tool_call_id)
      )`
    ], { discard: true }))
}

/** A task row. `status` is `running` until the task ends; then `final` holds its last event's JSON. */
export interface TaskRow {
  readonly task_id: string
  readonly agent_id: string
  readonly process_id: string
  readonly prompt: string
  readonly tools: string
  readonly status: "running" | "ended"
  readonly final: string | null
  readonly ended_at: number | null
}

/** A model turn of a task: `turn` is the `ModelTurn`'s JSON. */
export interface TurnRow {
  readonly task_id: string
  readonly step: number
  readonly turn: string
}

/** A delivered call; `result` is the answer's JSON once it came. */
export interface CallRow {
  readonly task_id: string
  readonly tool_call_id: string
  readonly name: string
  readonly arguments: string
  readonly deadline_at: number
  readonly result: string | null
}

/** Writes a new task, running. */
export const insertTask = (
  sql: SqlClient.SqlClient,
  task: {
    readonly taskId: string
    readonly agentId: string
    readonly processId: string
    readonly prompt: string
    readonly tools: string
  }
) =>
  sql`INSERT INTO journal_tasks (task_id, agent_id, process_id, prompt, tools, status, final, ended_at)
    VALUES (${task.taskId}, ${task.agentId}, ${task.processId}, ${task.prompt}, ${task.tools}, 'running', NULL, NULL)`

/** Writes a model turn (a replayed one is already there). */
export const insertTurn = (sql: SqlClient.SqlClient, taskId: string, step: number, turn: string) =>
  sql`INSERT INTO journal_turns (task_id, step, turn) VALUES (${taskId}, ${step}, ${turn})
    ON CONFLICT (task_id, step) DO NOTHING`

/** Writes a delivered call (the first delivery of an id counts). */
export const insertCall = (
  sql: SqlClient.SqlClient,
  taskId: string,
  call: { readonly toolCallId: string; readonly name: string; readonly arguments: string; readonly deadlineAt: number }
) =>
  sql`INSERT INTO journal_calls (task_id, tool_call_id, name, arguments, deadline_at, result)
    VALUES (${taskId}, ${call.toolCallId}, ${call.name}, ${call.arguments}, ${call.deadlineAt}, NULL)
    ON CONFLICT (task_id, tool_call_id) DO NOTHING`

/** Writes a call's answer (the first answer counts). */
export const answerCall = (sql: SqlClient.SqlClient, taskId: string, toolCallId: string, result: string) =>
  sql`UPDATE journal_calls SET result = ${result}
    WHERE task_id = ${taskId} AND tool_call_id = ${toolCallId} AND result IS NULL`

/**
 * Ends a task: only its final event stays (for a late re-attach); its prompt, tools, turns and calls
 * are no longer needed.
 */
export const endTask = (sql: SqlClient.SqlClient, taskId: string, final: string, endedAt: number) =>
  sql.withTransaction(Effect.all([
    sql`UPDATE journal_tasks SET status = 'ended', final = ${final}, ended_at = ${endedAt}, prompt = '', tools = '[]'
      WHERE task_id = ${taskId}`,
    sql`DELETE FROM journal_turns WHERE task_id = ${taskId}`,
    sql`DELETE FROM journal_calls WHERE task_id = ${taskId}`
  ], { discard: true }))

/** Deletes the tasks that ended at or before `before`. */
export const purgeEnded = (sql: SqlClient.SqlClient, before: number) =>
  sql`DELETE FROM journal_tasks WHERE status = 'ended' AND ended_at <= ${before}`

/** Every task still in the journal. */
export const tasks = (sql: SqlClient.SqlClient) =>
  sql<TaskRow>`SELECT task_id, agent_id, process_id, prompt, tools, status, final, ended_at FROM journal_tasks`

/** The turns of the running tasks, in step order. */
export const turns = (sql: SqlClient.SqlClient) =>
  sql<TurnRow>`SELECT task_id, step, turn FROM journal_turns ORDER BY task_id, step`

/** The calls of the running tasks. */
export const calls = (sql: SqlClient.SqlClient) =>
  sql<CallRow>`SELECT task_id, tool_call_id, name, arguments, deadline_at, result FROM journal_calls`

/** How many rows each table holds. */
export const counts = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly tasks: number; readonly turns: number; readonly calls: number }>`SELECT
      (SELECT COUNT(*) FROM journal_tasks) AS tasks,
      (SELECT COUNT(*) FROM journal_turns) AS turns,
      (SELECT COUNT(*) FROM journal_calls) AS calls`,
    (rows) => ({
      tasks: Number(rows[0]?.tasks ?? 0),
      turns: Number(rows[0]?.turns ?? 0),
      calls: Number(rows[0]?.calls ?? 0)
    })
  )
