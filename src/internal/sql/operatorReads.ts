/**
 * The run journal's reads for an operator (the platform's operator API): the platform's tasks newest first,
 * filtered and paged by a cursor, the approvals waiting for a person, a task's children. Portable SQL
 * (SQLite and PostgreSQL), each listing on an index of migration `0004_operator_reads` (journal.ts).
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { TaskRow } from "./journal.js"

/** A task as a listing gives it: its row without its prompt, tools and result. */
export type ListedRow = Pick<
  TaskRow,
  "task_id" | "agent_id" | "process_id" | "status" | "final" | "ended_at" | "traceparent" | "created_at"
>

/** Which tasks a listing wants, and from where: strictly older than `before` (its last row's made-at and id). */
export interface TaskQuery {
  readonly agentId?: string | undefined
  readonly status?: "running" | "suspended" | "ended" | undefined
  /** Made at or after (epoch ms). */
  readonly createdSince?: number | undefined
  /** Made before (epoch ms). */
  readonly createdUntil?: number | undefined
  readonly before?: { readonly createdAt: number; readonly taskId: string } | undefined
  readonly limit: number
}

/**
 * The platform's tasks `query` wants, newest first (made-at, then id, both descending): with an agent and a
 * status, a walk of the index `journal_tasks_agent_status` from its end, `limit` rows read.
 */
export const listTasks = (sql: SqlClient.SqlClient, query: TaskQuery) => {
  const where = [sql`kind = 'task'`]
  if (query.agentId !== undefined) where.push(sql`agent_id = ${query.agentId}`)
  if (query.status !== undefined) where.push(sql`status = ${query.status}`)
  if (query.createdSince !== undefined) where.push(sql`created_at >= ${query.createdSince}`)
  if (query.createdUntil !== undefined) where.push(sql`created_at < ${query.createdUntil}`)
  if (query.before !== undefined) {
    where.push(sql`(created_at, task_id) < (${query.before.createdAt}, ${query.before.taskId})`)
  }
  return sql<ListedRow>`SELECT task_id, agent_id, process_id, status, final, ended_at, traceparent, created_at
    FROM journal_tasks WHERE ${sql.and(where)}
    ORDER BY created_at DESC, task_id DESC LIMIT ${query.limit}`
}

/** An approval waiting for a person, with the agent of the task (or child task) that asked it. */
export interface PendingRow {
  readonly task_id: string
  readonly tool_call_id: string
  readonly tool_name: string
  readonly input: string
  readonly expires_at: number
  readonly asked_at: number | null
  readonly agent_id: string
}

/** The approvals of the platform's tasks not decided and not expired at `now`, the first to expire first. */
export const pendingApprovals = (sql: SqlClient.SqlClient, now: number, limit: number) =>
  sql<PendingRow>`SELECT a.task_id, a.tool_call_id, a.tool_name, a.input, a.expires_at, a.asked_at, t.agent_id
    FROM journal_approvals a JOIN journal_tasks t ON t.task_id = a.task_id
    WHERE a.decision = 'pending' AND a.expires_at > ${now} AND t.kind = 'task' AND t.status <> 'ended'
    ORDER BY a.expires_at, a.task_id, a.tool_call_id LIMIT ${limit}`

/**
 * The tasks `taskId`'s `exec_agent` calls started (`<task id>/<call id>`, design: Agents that call agents), and
 * theirs: ids between `<task id>/` and `<task id>0` (the character after `/`), a range of the primary key.
 */
export const childrenOf = (sql: SqlClient.SqlClient, taskId: string) =>
  sql<Pick<TaskRow, "task_id" | "agent_id" | "status">>`SELECT task_id, agent_id, status FROM journal_tasks
    WHERE task_id > ${`${taskId}/`} AND task_id < ${`${taskId}0`} ORDER BY task_id`
