/**
 * The tasks a serving process holds (design: Interruption and shutdown): recorded when a task starts,
 * released when it ends or the platform forgets it, and read back when a process starts, so that a
 * restarted one attaches its unfinished tasks again. A serving-side concern (`Serve`'s followers and
 * `resumeHeld`), kept in the delivery-dedupe store's database so that one file or client holds both.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Effect } from "effect"
import * as Claims from "../sql/claims.js"

/** The record of the tasks a serving process holds. */
export interface HeldTasks {
  /** Whether claims and held tasks outlive the process (SQL: yes; memory: no). */
  readonly durable: boolean
  /** Records that this agent's serving process holds the task (re-attached after a restart). */
  readonly holdTask: (agentId: string, taskId: string) => Effect.Effect<void>
  /** The task ended (or the platform forgot it): no longer held. */
  readonly releaseTask: (agentId: string, taskId: string) => Effect.Effect<void>
  /** The tasks of this agent still held, oldest first: a restarted process attaches them again. */
  readonly heldTasks: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
}

/** Nothing outlives the process: a restarted one has no tasks to take back. */
export const none: HeldTasks = {
  durable: false,
  holdTask: () => Effect.void,
  releaseTask: () => Effect.void,
  heldTasks: () => Effect.succeed([])
}

/**
 * In the database of `sql` (the claims' `held_tasks` table, `internal/sql/claims.ts`). Best effort: a
 * write that fails is logged (the task still runs; only a restart's re-attach would miss it).
 */
export const inSql = (sql: SqlClient.SqlClient): HeldTasks => ({
  durable: true,
  holdTask: (agentId, taskId) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.ignoreLogged(Claims.holdTask(sql, agentId, taskId, now))),
  releaseTask: (agentId, taskId) => Effect.ignoreLogged(Claims.releaseTask(sql, agentId, taskId)),
  heldTasks: (agentId) => Effect.orElseSucceed(Claims.heldTasks(sql, agentId), () => [])
})
