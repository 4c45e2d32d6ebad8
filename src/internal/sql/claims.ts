/**
 * Every SQL statement of the durable claims (design: Delivery dedupe), in one module. Plain, portable SQL (SQLite and
 * PostgreSQL through `@effect/sql-pg`): `ON CONFLICT ... DO NOTHING`, integers for times, text for
 * the outcome's JSON. Times come from the Effect `Clock`, never from the database.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The migrator's own table for these migrations: not the default one, which another module's
 * migrations (the platform journal's) may share the file with and also number from 1.
 */
export const migrationsTable = "agent_tools_claims_migrations"

/**
 * The migrations, in order, for `@effect/sql`'s migrator. `IF NOT EXISTS`: a file made before the
 * migrations had their own table already holds these tables, and must still open.
 */
export const migrations = {
  "0001_create_tool_claims": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS tool_claims (
      task_id TEXT NOT NULL,
      tool_call_id TEXT NOT NULL,
      tool_name TEXT NOT NULL,
      owner TEXT NOT NULL,
      state TEXT NOT NULL,
      lease_expires_at BIGINT NOT NULL,
      expires_at BIGINT NOT NULL,
      outcome TEXT,
      PRIMARY KEY (task_id, tool_call_id)
    )`.pipe(Effect.zipRight(sql`CREATE INDEX IF NOT EXISTS tool_claims_expires_at ON tool_claims (expires_at)`))),
  "0002_create_held_tasks": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS held_tasks (
      agent_id TEXT NOT NULL,
      task_id TEXT NOT NULL,
      held_since BIGINT NOT NULL,
      PRIMARY KEY (agent_id, task_id)
    )`)
}

/** A claim row. `state` is `pending` until the outcome is written, then `completed`. */
export interface ClaimRow {
  readonly task_id: string
  readonly tool_call_id: string
  readonly tool_name: string
  readonly owner: string
  readonly state: "pending" | "completed"
  readonly lease_expires_at: number
  readonly expires_at: number
  readonly outcome: string | null
}

/** The key of a claim. */
export interface Key {
  readonly taskId: string
  readonly toolCallId: string
}

/** Writes a pending claim unless one exists for the key (whoever wrote it first owns the call). */
export const insert = (
  sql: SqlClient.SqlClient,
  key: Key,
  claim: { readonly toolName: string; readonly owner: string; readonly leaseUntil: number; readonly expiresAt: number }
) =>
  sql`INSERT INTO tool_claims (task_id, tool_call_id, tool_name, owner, state, lease_expires_at, expires_at, outcome)
    VALUES (${key.taskId}, ${key.toolCallId}, ${claim.toolName}, ${claim.owner}, 'pending', ${claim.leaseUntil},
      ${claim.expiresAt}, NULL)
    ON CONFLICT (task_id, tool_call_id) DO NOTHING`

/** The claim of a key, if any. */
export const find = (sql: SqlClient.SqlClient, key: Key) =>
  Effect.map(
    sql<ClaimRow>`SELECT task_id, tool_call_id, tool_name, owner, state, lease_expires_at, expires_at, outcome
      FROM tool_claims WHERE task_id = ${key.taskId} AND tool_call_id = ${key.toolCallId}`,
    (rows) => rows[0]
  )

/** Takes over a pending claim whose lease expired, if `from` still owns it. */
export const takeOver = (sql: SqlClient.SqlClient, key: Key, from: string, to: string, leaseUntil: number) =>
  sql`UPDATE tool_claims SET owner = ${to}, lease_expires_at = ${leaseUntil}
    WHERE task_id = ${key.taskId} AND tool_call_id = ${key.toolCallId} AND owner = ${from} AND state = 'pending'`

/** Extends the owner's lease while its call runs: true when it did (the claim is still the owner's, pending). */
export const renew = (sql: SqlClient.SqlClient, key: Key, owner: string, leaseUntil: number) =>
  Effect.map(
    sql<{ readonly owner: string }>`UPDATE tool_claims SET lease_expires_at = ${leaseUntil}
    WHERE task_id = ${key.taskId} AND tool_call_id = ${key.toolCallId} AND owner = ${owner} AND state = 'pending'
    RETURNING owner`,
    (rows) => rows.length > 0
  )

/** Writes the outcome: the claim is completed. */
export const complete = (sql: SqlClient.SqlClient, key: Key, owner: string, outcome: string) =>
  sql`UPDATE tool_claims SET state = 'completed', outcome = ${outcome}
    WHERE task_id = ${key.taskId} AND tool_call_id = ${key.toolCallId} AND owner = ${owner}`

/** Drops a pending claim its owner gave up (interrupted before its handler started, or a tool that may run again). */
export const release = (sql: SqlClient.SqlClient, key: Key, owner: string) =>
  sql`DELETE FROM tool_claims
    WHERE task_id = ${key.taskId} AND tool_call_id = ${key.toolCallId} AND owner = ${owner} AND state = 'pending'`

/**
 * Writes a claim, reads it back and removes it: whether it was read back. Fails when claims cannot
 * be written (a read-only file, a dropped table). Its task id is one no platform mints; it expires
 * at once, so a sweep removes it if the process dies in between.
 */
export const probe = (sql: SqlClient.SqlClient, owner: string, now: number) =>
  Effect.gen(function*() {
    const key = { taskId: "agent-tools/probe", toolCallId: owner }
    yield* insert(sql, key, { toolName: "agent-tools/probe", owner, leaseUntil: now, expiresAt: now })
    const row = yield* find(sql, key)
    yield* release(sql, key, owner)
    return row?.owner === owner
  })

/** Deletes claims past their tool's timeout. */
export const sweep = (sql: SqlClient.SqlClient, now: number) => sql`DELETE FROM tool_claims WHERE expires_at <= ${now}`

/** How many claims are stored. */
export const count = (sql: SqlClient.SqlClient) =>
  Effect.map(sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM tool_claims`, (rows) => Number(rows[0]?.n ?? 0))

/** Records a task the agent's serving process holds (kept until it ends). */
export const holdTask = (sql: SqlClient.SqlClient, agentId: string, taskId: string, now: number) =>
  sql`INSERT INTO held_tasks (agent_id, task_id, held_since) VALUES (${agentId}, ${taskId}, ${now})
    ON CONFLICT (agent_id, task_id) DO NOTHING`

/** Forgets a held task. */
export const releaseTask = (sql: SqlClient.SqlClient, agentId: string, taskId: string) =>
  sql`DELETE FROM held_tasks WHERE agent_id = ${agentId} AND task_id = ${taskId}`

/** The tasks an agent holds, oldest first. */
export const heldTasks = (sql: SqlClient.SqlClient, agentId: string) =>
  Effect.map(
    sql<{ readonly task_id: string }>`SELECT task_id FROM held_tasks WHERE agent_id = ${agentId}
      ORDER BY held_since, task_id`,
    (rows) => rows.map((row) => row.task_id)
  )
