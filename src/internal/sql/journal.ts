/**
 * Every SQL statement of the run journal (design: Durable runs), in one module: the agent's runs and
 * the platform's tasks are rows of the same tables. Plain, portable SQL (SQLite and PostgreSQL through
 * `@effect/sql-pg` alike): `ON CONFLICT ... DO NOTHING`, integers for times, text for JSON. Times come
 * from the caller, never from the database. (The tables keep their first names: a task is a run.)
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import * as Sessions from "./sessions.js"

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
    ], { discard: true })),
  // Agent runs beside the platform's tasks (`kind`), what a run answered when it ended (`result`), and
  // the approvals a suspended run waits for.
  "0002_runs_and_approvals": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`ALTER TABLE journal_tasks ADD COLUMN kind TEXT NOT NULL DEFAULT 'task'`,
      sql`ALTER TABLE journal_tasks ADD COLUMN result TEXT`,
      sql`CREATE TABLE IF NOT EXISTS journal_approvals (
        task_id TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        input TEXT NOT NULL,
        input_key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        expires_at BIGINT NOT NULL,
        decision TEXT NOT NULL,
        reason TEXT,
        PRIMARY KEY (task_id, tool_call_id)
      )`
    ], { discard: true })),
  // The span a task was submitted under (W3C `traceparent`): a runner that takes it up continues its trace.
  "0003_traceparent": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`ALTER TABLE journal_tasks ADD COLUMN traceparent TEXT`),
  // What an operator reads (the operator API, platform/api/): when a task was made, each turn journaled, each call
  // started and ended and how (`outcome`, the failure's kind or `Succeeded`), each approval asked and who decided it
  // when; and the indexes its listings take, newest first.
  "0004_operator_reads": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`ALTER TABLE journal_tasks ADD COLUMN created_at BIGINT NOT NULL DEFAULT 0`,
      sql`ALTER TABLE journal_turns ADD COLUMN at BIGINT`,
      sql`ALTER TABLE journal_calls ADD COLUMN started_at BIGINT`,
      sql`ALTER TABLE journal_calls ADD COLUMN ended_at BIGINT`,
      sql`ALTER TABLE journal_calls ADD COLUMN outcome TEXT`,
      sql`ALTER TABLE journal_approvals ADD COLUMN asked_at BIGINT`,
      sql`ALTER TABLE journal_approvals ADD COLUMN decided_by TEXT`,
      sql`ALTER TABLE journal_approvals ADD COLUMN decided_at BIGINT`,
      sql`CREATE INDEX IF NOT EXISTS journal_tasks_agent_status
        ON journal_tasks (kind, agent_id, status, created_at, task_id)`,
      sql`CREATE INDEX IF NOT EXISTS journal_tasks_status ON journal_tasks (kind, status, created_at, task_id)`,
      sql`CREATE INDEX IF NOT EXISTS journal_tasks_created ON journal_tasks (kind, created_at, task_id)`,
      sql`CREATE INDEX IF NOT EXISTS journal_approvals_pending ON journal_approvals (decision, expires_at)`
    ], { discard: true })),
  // Sessions (Session.ts): which run holds each, the summary of its oldest turns, and its turns.
  "0005_sessions": Sessions.migration,
  // The open tasks of an agent, counted at every submit on a cluster (`openUsage`): an index of those rows alone. The
  // index above leads with the same columns, but `status <> 'ended'` is no range of it, so the count read every task
  // the journal keeps (all of them, the planner choosing the table): a submit's database work grew with the history.
  "0006_open_tasks": Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`CREATE INDEX IF NOT EXISTS journal_tasks_open ON journal_tasks (kind, agent_id) WHERE status <> 'ended'`
  )
}

/**
 * A run's row (a platform task's, or an agent run's: `kind`). `status` is `running` (or `suspended`,
 * waiting for approvals) until it ends; then a task's `final` holds its last event's JSON, a run's
 * `result` its `RunResult`'s.
 */
export interface TaskRow {
  readonly task_id: string
  readonly kind: "task" | "run"
  readonly agent_id: string
  readonly process_id: string
  readonly prompt: string
  readonly tools: string
  readonly status: "running" | "suspended" | "ended"
  readonly final: string | null
  readonly result: string | null
  readonly ended_at: number | null
  readonly traceparent: string | null
  /** When the run was journaled first (0 for a run journaled before the column was). */
  readonly created_at: number
}

/** An approval a run asked for: `decision` is `pending` until a person gives it (`approved` or `denied`). */
export interface ApprovalRow {
  readonly task_id: string
  readonly tool_call_id: string
  readonly tool_name: string
  readonly input: string
  readonly input_key: string
  readonly fingerprint: string
  readonly expires_at: number
  readonly decision: "pending" | "approved" | "denied"
  readonly reason: string | null
  readonly asked_at?: number | null
  /** Who decided it: the agent (`agent <id>`) or an operator token's name. */
  readonly decided_by?: string | null
  readonly decided_at?: number | null
}

/** A model turn of a task: `turn` is the `ModelTurn`'s JSON. */
export interface TurnRow {
  readonly task_id: string
  readonly step: number
  readonly turn: string
  /** When it was journaled (the model had answered). */
  readonly at?: number | null
}

/** A delivered call; `result` is the answer's JSON once it came. */
export interface CallRow {
  readonly task_id: string
  readonly tool_call_id: string
  readonly name: string
  readonly arguments: string
  readonly deadline_at: number
  readonly result: string | null
  /** When it was journaled as started (a handler was asked to run it); null for an outcome no handler gave. */
  readonly started_at?: number | null
  readonly ended_at?: number | null
  /** The outcome's kind: `Succeeded`, or the failure's (`TimedOut`, `OutcomeUnknown`, `Denied`, ...). */
  readonly outcome?: string | null
}

/** Writes a new run, running (one already there, a task its host wrote first, is kept). */
export const insertTask = (
  sql: SqlClient.SqlClient,
  task: {
    readonly taskId: string
    readonly kind: "task" | "run"
    readonly agentId: string
    readonly processId: string
    readonly prompt: string
    readonly tools: string
    readonly traceparent: string | null
    readonly createdAt: number
  }
) =>
  sql`INSERT INTO journal_tasks (task_id, kind, agent_id, process_id, prompt, tools, status, final, result, ended_at,
      traceparent, created_at)
    VALUES (${task.taskId}, ${task.kind}, ${task.agentId}, ${task.processId}, ${task.prompt}, ${task.tools},
      'running', NULL, NULL, NULL, ${task.traceparent}, ${task.createdAt})
    ON CONFLICT (task_id) DO NOTHING`

/**
 * Writes a model turn and gives the turn the journal holds for that step: the first writer's. A
 * replayed one is already there; one a killed process sent just before it died may commit after
 * another process asked again, and then the journal's is the run's turn, not the later reply.
 */
export const insertTurn = (sql: SqlClient.SqlClient, taskId: string, step: number, turn: string, at: number) =>
  sql<{ readonly turn: string }>`INSERT INTO journal_turns (task_id, step, turn, at) VALUES (${taskId}, ${step}, ${turn}, ${at})
    ON CONFLICT (task_id, step) DO UPDATE SET turn = journal_turns.turn
    RETURNING turn`

/** Writes a delivered call (the first delivery of an id counts). */
export const insertCall = (
  sql: SqlClient.SqlClient,
  taskId: string,
  call: { readonly toolCallId: string; readonly name: string; readonly arguments: string; readonly deadlineAt: number },
  startedAt: number
) =>
  sql`INSERT INTO journal_calls (task_id, tool_call_id, name, arguments, deadline_at, result, started_at)
    VALUES (${taskId}, ${call.toolCallId}, ${call.name}, ${call.arguments}, ${call.deadlineAt}, NULL, ${startedAt})
    ON CONFLICT (task_id, tool_call_id) DO NOTHING`

/** A call's outcome as journaled: its JSON, its kind, when it came. */
export interface Answer {
  readonly result: string
  readonly outcome: string
  readonly at: number
}

/** Writes a call's outcome and gives the one the journal holds: the first writer's (as for turns). */
export const answerCall = (sql: SqlClient.SqlClient, taskId: string, toolCallId: string, answer: Answer) =>
  sql<{ readonly result: string | null }>`UPDATE journal_calls SET result = COALESCE(result, ${answer.result}),
      ended_at = CASE WHEN result IS NULL THEN ${answer.at} ELSE ended_at END,
      outcome = CASE WHEN result IS NULL THEN ${answer.outcome} ELSE outcome END
    WHERE task_id = ${taskId} AND tool_call_id = ${toolCallId}
    RETURNING result`

/**
 * Writes a call and its outcome in one statement, for an outcome that ran no handler here (reused,
 * unknown, denied): it is never journaled as started without one. Gives the outcome the journal holds.
 */
export const insertAnswered = (
  sql: SqlClient.SqlClient,
  taskId: string,
  call: { readonly toolCallId: string; readonly name: string; readonly arguments: string; readonly deadlineAt: number },
  answer: Answer
) =>
  sql<{ readonly result: string | null }>`INSERT INTO journal_calls
      (task_id, tool_call_id, name, arguments, deadline_at, result, ended_at, outcome)
    VALUES (${taskId}, ${call.toolCallId}, ${call.name}, ${call.arguments}, ${call.deadlineAt}, ${answer.result},
      ${answer.at}, ${answer.outcome})
    ON CONFLICT (task_id, tool_call_id) DO UPDATE SET result = COALESCE(journal_calls.result, excluded.result),
      ended_at = CASE WHEN journal_calls.result IS NULL THEN excluded.ended_at ELSE journal_calls.ended_at END,
      outcome = CASE WHEN journal_calls.result IS NULL THEN excluded.outcome ELSE journal_calls.outcome END
    RETURNING result`

/**
 * Ends a run. An agent run keeps only its end (its result, for a late resume): its prompt, tools, turns, calls and
 * approvals are no longer needed. A platform task keeps its prompt, turns, calls and approvals beside its final event
 * (a late re-attach reads that), so that an operator reads what it did (its timeline), until the retention sweep
 * purges it (`purgeEnded`); the tools it was offered (their manifests, up to megabytes) go at once.
 */
export const endTask = (
  sql: SqlClient.SqlClient,
  taskId: string,
  end: { readonly final: string | null; readonly result: string | null },
  endedAt: number
) =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(endTaskPg(sql, taskId, end, endedAt)),
    orElse: () =>
      sql.withTransaction(Effect.all([
        sql`DELETE FROM journal_turns WHERE task_id = ${taskId} AND ${aRun(sql, taskId)}`,
        sql`DELETE FROM journal_calls WHERE task_id = ${taskId} AND ${aRun(sql, taskId)}`,
        sql`DELETE FROM journal_approvals WHERE task_id = ${taskId} AND ${aRun(sql, taskId)}`,
        sql`UPDATE journal_tasks SET status = 'ended', final = ${end.final}, result = ${end.result}, ended_at = ${endedAt},
          prompt = CASE WHEN kind = 'run' THEN '' ELSE prompt END, tools = '[]'
          WHERE task_id = ${taskId}`
      ], { discard: true }))
  })

/**
 * `endTask` on PostgreSQL: one statement (its deletes as data-modifying CTEs), atomic as the transaction
 * elsewhere: on a database over the network each statement is a round trip.
 */
export const endTaskPg = (
  sql: SqlClient.SqlClient,
  taskId: string,
  end: { readonly final: string | null; readonly result: string | null },
  endedAt: number
) =>
  sql`WITH turns AS (DELETE FROM journal_turns WHERE task_id = ${taskId} AND ${aRun(sql, taskId)}),
    calls AS (DELETE FROM journal_calls WHERE task_id = ${taskId} AND ${aRun(sql, taskId)}),
    approvals AS (DELETE FROM journal_approvals WHERE task_id = ${taskId} AND ${aRun(sql, taskId)})
    UPDATE journal_tasks SET status = 'ended', final = ${end.final}, result = ${end.result}, ended_at = ${endedAt},
      prompt = CASE WHEN kind = 'run' THEN '' ELSE prompt END, tools = '[]'
    WHERE task_id = ${taskId}`

/** Whether `taskId` is an agent run's (not a platform task's): a condition of a statement. */
const aRun = (sql: SqlClient.SqlClient, taskId: string) =>
  sql`EXISTS (SELECT 1 FROM journal_tasks WHERE task_id = ${taskId} AND kind = 'run')`

/** Marks a run as waiting for the approvals it asked for (written first, `askApproval`). */
export const suspendTask = (sql: SqlClient.SqlClient, taskId: string) =>
  sql`UPDATE journal_tasks SET status = 'suspended' WHERE task_id = ${taskId} AND status = 'running'`

/** Marks a suspended run as running again. */
export const resumeTask = (sql: SqlClient.SqlClient, taskId: string) =>
  sql`UPDATE journal_tasks SET status = 'running' WHERE task_id = ${taskId} AND status = 'suspended'`

/**
 * Asks for an approval: a pending one for the call, replacing one bound to another input or tool
 * definition (which can no longer approve anything).
 */
export const askApproval = (
  sql: SqlClient.SqlClient,
  row: Omit<ApprovalRow, "decision" | "reason" | "decided_by" | "decided_at">
) =>
  sql.withTransaction(Effect.all([
    sql`DELETE FROM journal_approvals WHERE task_id = ${row.task_id} AND tool_call_id = ${row.tool_call_id}`,
    sql`INSERT INTO journal_approvals
      (task_id, tool_call_id, tool_name, input, input_key, fingerprint, expires_at, decision, reason, asked_at)
      VALUES (${row.task_id}, ${row.tool_call_id}, ${row.tool_name}, ${row.input}, ${row.input_key},
        ${row.fingerprint}, ${row.expires_at}, 'pending', NULL, ${row.asked_at ?? null})`
  ], { discard: true }))

/**
 * Gives a person's decision on a pending approval that has not expired at `now`; the rows changed
 * (0: nothing was pending there, or it expired, or it was decided already).
 */
export const decideApproval = (
  sql: SqlClient.SqlClient,
  key: { readonly taskId: string; readonly toolCallId: string },
  decision: { readonly approved: boolean; readonly reason: string | null; readonly now: number; readonly by: string | null }
) =>
  Effect.map(
    sql<{ readonly tool_call_id: string }>`UPDATE journal_approvals
      SET decision = ${decision.approved ? "approved" : "denied"}, reason = ${decision.reason},
        decided_by = ${decision.by}, decided_at = ${decision.now}
      WHERE task_id = ${key.taskId} AND tool_call_id = ${key.toolCallId} AND decision = 'pending'
        AND expires_at > ${decision.now}
      RETURNING tool_call_id`,
    (rows) => rows.length
  )

/** A run's row's columns, as `TaskRow` reads them. */
const taskColumns = "task_id, kind, agent_id, process_id, prompt, tools, status, final, result, ended_at, traceparent, created_at"

/** One run's row, or none. */
export const task = (sql: SqlClient.SqlClient, taskId: string) =>
  sql<TaskRow>`SELECT ${sql.literal(taskColumns)} FROM journal_tasks WHERE task_id = ${taskId}`

/** One run's turns, in step order. */
export const turnsOf = (sql: SqlClient.SqlClient, taskId: string) =>
  sql<TurnRow>`SELECT task_id, step, turn, at FROM journal_turns WHERE task_id = ${taskId} ORDER BY step`

/** One run's calls. */
export const callsOf = (sql: SqlClient.SqlClient, taskId: string) =>
  sql<CallRow>`SELECT task_id, tool_call_id, name, arguments, deadline_at, result, started_at, ended_at, outcome
    FROM journal_calls
    WHERE task_id = ${taskId}`

/** One run's approvals. */
export const approvalsOf = (sql: SqlClient.SqlClient, taskId: string) =>
  sql<ApprovalRow>`SELECT task_id, tool_call_id, tool_name, input, input_key, fingerprint, expires_at, decision, reason,
    asked_at, decided_by, decided_at FROM journal_approvals WHERE task_id = ${taskId}`

/** One run's row with its turns, calls and approvals, as `task`, `turnsOf`, `callsOf` and `approvalsOf` give them. */
export interface WholeRun {
  readonly row: TaskRow
  readonly turns: ReadonlyArray<TurnRow>
  readonly calls: ReadonlyArray<CallRow>
  readonly approvals: ReadonlyArray<ApprovalRow>
}

/**
 * How a read runs its statement: as written (`run`), or on another way to the same database (the journal's
 * pipelined connection on PostgreSQL, internal/sql/pipelined.ts).
 */
export type Exec = <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>

/** A statement run as written. */
const run: Exec = (statement) => statement

/**
 * One run, whole, or undefined: on PostgreSQL in one statement (its turns, calls and approvals as JSON
 * arrays beside its row; one round trip rather than four), elsewhere in four. An ended run's parts are read only
 * `withEnded` (an operator's timeline); elsewhere they may be left out.
 */
export const wholeRun = (sql: SqlClient.SqlClient, taskId: string, withEnded = false, exec: Exec = run) =>
  sql.onDialectOrElse({
    pg: () =>
      Effect.map(
        exec(sql<TaskRow & { readonly turns_json: string; readonly calls_json: string; readonly approvals_json: string }>`SELECT
          t.task_id, t.kind, t.agent_id, t.process_id, t.prompt, t.tools, t.status, t.final, t.result, t.ended_at, t.traceparent,
          t.created_at,
          (SELECT COALESCE(json_agg(r ORDER BY r.step), '[]')::text FROM journal_turns r WHERE r.task_id = t.task_id) AS turns_json,
          (SELECT COALESCE(json_agg(c), '[]')::text FROM journal_calls c WHERE c.task_id = t.task_id) AS calls_json,
          (SELECT COALESCE(json_agg(a), '[]')::text FROM journal_approvals a WHERE a.task_id = t.task_id) AS approvals_json
          FROM journal_tasks t WHERE t.task_id = ${taskId}`),
        ([row]): WholeRun | undefined => {
          if (row === undefined) return undefined
          const { approvals_json, calls_json, turns_json, ...task } = row
          return { row: task, turns: JSON.parse(turns_json), calls: JSON.parse(calls_json), approvals: JSON.parse(approvals_json) }
        }
      ),
    orElse: () =>
      Effect.gen(function*() {
        const row = (yield* task(sql, taskId))[0]
        if (row === undefined) return undefined
        if (row.status === "ended" && !withEnded) return { row, turns: [], calls: [], approvals: [] }
        const whole: WholeRun = {
          row,
          turns: yield* turnsOf(sql, taskId),
          calls: yield* callsOf(sql, taskId),
          approvals: yield* approvalsOf(sql, taskId)
        }
        return whole
      })
  })

/** Deletes the runs of `kind` that ended at or before `before`, with what a platform task kept of its timeline. */
export const purgeEnded = (sql: SqlClient.SqlClient, before: number, kind: "task" | "run") => {
  const ended = sql`SELECT task_id FROM journal_tasks WHERE kind = ${kind} AND status = 'ended' AND ended_at <= ${before}`
  return sql.withTransaction(Effect.all([
    sql`DELETE FROM journal_turns WHERE task_id IN (${ended})`,
    sql`DELETE FROM journal_calls WHERE task_id IN (${ended})`,
    sql`DELETE FROM journal_approvals WHERE task_id IN (${ended})`,
    sql`DELETE FROM journal_tasks WHERE kind = ${kind} AND status = 'ended' AND ended_at <= ${before}`
  ], { discard: true }))
}

/**
 * Every platform task still in the journal (agent runs are resumed by their own id, not taken back), the oldest
 * first: the order they were made in, as a restart takes them back (an index, not the table's, gives the rows).
 */
export const tasks = (sql: SqlClient.SqlClient) =>
  sql<TaskRow>`SELECT ${sql.literal(taskColumns)} FROM journal_tasks WHERE kind = 'task' ORDER BY created_at, task_id`

/** The platform tasks not ended, the oldest first (from the index of the open tasks, `0006_open_tasks`). */
export const openTasks = (sql: SqlClient.SqlClient) =>
  sql<TaskRow>`SELECT ${sql.literal(taskColumns)} FROM journal_tasks WHERE kind = 'task' AND status <> 'ended'
    ORDER BY created_at, task_id`

/** The platform tasks of `agentId` not ended, and their prompts' UTF-8 bytes. */
export const openUsage = (sql: SqlClient.SqlClient, agentId: string, exec: Exec = run) =>
  Effect.map(
    exec(sql<{ readonly tasks: number | string; readonly bytes: number | string | null }>`SELECT COUNT(*) AS tasks,
      SUM(${sql.onDialectOrElse({ pg: () => sql.literal("OCTET_LENGTH(prompt)"), orElse: () => sql.literal("LENGTH(CAST(prompt AS BLOB))") })}) AS bytes
      FROM journal_tasks WHERE kind = 'task' AND agent_id = ${agentId} AND status <> 'ended'`),
    (rows) => ({ tasks: Number(rows[0]?.tasks ?? 0), promptBytes: Number(rows[0]?.bytes ?? 0) })
  )

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
