/**
 * Every SQL statement of the MCP task store (design: MCP tasks), in one module: a task-augmented `tools/call` is a
 * row, its principal beside it, its result once it ended. Plain, portable SQL (SQLite, and PostgreSQL through
 * `@effect/sql-pg` alike), integers for times, text for JSON, times from the caller. The table lives beside the run
 * journal's in the same database, its migrations in a table of their own.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/** The migrator's table for these migrations: the journal's and the claims' number from 1 too. */
export const migrationsTable = "agent_tools_mcp_tasks_migrations"

/** The migrations, in order. */
export const migrations = {
  "0001_create_mcp_tasks": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE IF NOT EXISTS mcp_tasks (
        task_id TEXT PRIMARY KEY,
        principal TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        status TEXT NOT NULL,
        status_message TEXT,
        ttl BIGINT,
        poll_interval BIGINT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        result TEXT
      )`,
      sql`CREATE INDEX IF NOT EXISTS mcp_tasks_principal ON mcp_tasks (principal, created_at, task_id)`,
      sql`CREATE INDEX IF NOT EXISTS mcp_tasks_status ON mcp_tasks (status)`
    ], { discard: true })),
  // Which server runs a task not ended, until when (its lease, renewed while it runs).
  "0002_mcp_task_leases": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`ALTER TABLE mcp_tasks ADD COLUMN owner TEXT`,
      sql`ALTER TABLE mcp_tasks ADD COLUMN lease_until BIGINT`
    ], { discard: true }))
}

/** A task's row. `status` is MCP's: `working`, `input_required`, `completed`, `failed`, `cancelled`. */
export interface TaskRow {
  readonly task_id: string
  readonly principal: string
  readonly tool: string
  readonly arguments: string
  readonly status: string
  readonly status_message: string | null
  readonly ttl: number | string | null
  readonly poll_interval: number | string
  readonly created_at: number | string
  readonly updated_at: number | string
  readonly result: string | null
}

/** A new task, working, run by `owner` (its lease until `lease_until`). */
export const insert = (
  sql: SqlClient.SqlClient,
  row: Omit<TaskRow, "status" | "status_message" | "result" | "updated_at"> & { readonly owner: string; readonly lease_until: number }
) =>
  sql`INSERT INTO mcp_tasks (task_id, principal, tool, arguments, status, status_message, ttl, poll_interval, created_at,
      updated_at, result, owner, lease_until)
    VALUES (${row.task_id}, ${row.principal}, ${row.tool}, ${row.arguments}, 'working', NULL, ${row.ttl},
      ${row.poll_interval}, ${row.created_at}, ${row.created_at}, NULL, ${row.owner}, ${row.lease_until})
    ON CONFLICT (task_id) DO NOTHING`

/** The task of `principal` with id `taskId`: another principal's is as good as missing. */
export const find = (sql: SqlClient.SqlClient, principal: string, taskId: string) =>
  sql<TaskRow>`SELECT * FROM mcp_tasks WHERE task_id = ${taskId} AND principal = ${principal}`

/** A page of `principal`'s tasks, oldest first, after the cursor's task (its creation time and id). */
export const list = (
  sql: SqlClient.SqlClient,
  principal: string,
  after: { readonly createdAt: number; readonly taskId: string } | undefined,
  limit: number
) =>
  after === undefined
    ? sql<TaskRow>`SELECT * FROM mcp_tasks WHERE principal = ${principal}
      ORDER BY created_at, task_id LIMIT ${limit}`
    : sql<TaskRow>`SELECT * FROM mcp_tasks WHERE principal = ${principal}
      AND (created_at > ${after.createdAt} OR (created_at = ${after.createdAt} AND task_id > ${after.taskId}))
      ORDER BY created_at, task_id LIMIT ${limit}`

/**
 * The task's status set, while it has not ended (an ended task keeps its status and result): the count of rows
 * changed says whether it was.
 */
export const setStatus = (
  sql: SqlClient.SqlClient,
  taskId: string,
  status: string,
  message: string | null,
  now: number
) =>
  Effect.map(
    sql<{ readonly task_id: string }>`UPDATE mcp_tasks SET status = ${status}, status_message = ${message},
      updated_at = ${now}
      WHERE task_id = ${taskId} AND status IN ('working', 'input_required') RETURNING task_id`,
    (rows) => rows.length
  )

/** The task ended with `result` (JSON), unless it ended already (a cancelled task keeps `cancelled`). */
export const finish = (
  sql: SqlClient.SqlClient,
  taskId: string,
  status: "completed" | "failed",
  message: string | null,
  result: string,
  now: number
) =>
  Effect.map(
    sql<{ readonly task_id: string }>`UPDATE mcp_tasks SET status = ${status}, status_message = ${message},
      result = ${result}, updated_at = ${now}
      WHERE task_id = ${taskId} AND status IN ('working', 'input_required') RETURNING task_id`,
    (rows) => rows.length
  )

/**
 * The tasks not ended whose lease lapsed (their server stopped, or was stopped: a graceful stop ends its leases),
 * every principal's, now `owner`'s until `until`. Of two servers claiming at once, one gets each task: PostgreSQL
 * checks the lease again on a row another statement just changed.
 */
export const claim = (sql: SqlClient.SqlClient, owner: string, now: number, until: number) =>
  sql<TaskRow>`UPDATE mcp_tasks SET owner = ${owner}, lease_until = ${until}
    WHERE status IN ('working', 'input_required') AND (lease_until IS NULL OR lease_until <= ${now})
    RETURNING *`

/** `owner`'s tasks not ended, their leases until `until`; the ids of those it still has (not cancelled, not taken). */
export const renew = (sql: SqlClient.SqlClient, owner: string, until: number) =>
  sql<{ readonly task_id: string }>`UPDATE mcp_tasks SET lease_until = ${until}
    WHERE owner = ${owner} AND status IN ('working', 'input_required') RETURNING task_id`

/** `owner`'s leases of its tasks not ended lapse now: the next server to claim takes them at once. */
export const release = (sql: SqlClient.SqlClient, owner: string) =>
  sql`UPDATE mcp_tasks SET lease_until = 0 WHERE owner = ${owner} AND status IN ('working', 'input_required')`

/** The tasks whose time to live ran out, forgotten. */
export const purge = (sql: SqlClient.SqlClient, now: number) =>
  sql`DELETE FROM mcp_tasks WHERE ttl IS NOT NULL AND created_at + ttl <= ${now}`
