/**
 * The tasks a serving process holds (design: Interruption and shutdown): recorded when a task starts,
 * released when it ends or the platform forgets it, and read back when a process starts, so that a
 * restarted one attaches its unfinished tasks again. A serving-side service of its own (`Serve`'s
 * followers and `resumeHeld`); in SQL it shares the delivery claims' database and migrations
 * (`internal/sql/claims.ts`), so that one file or client holds both.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Effect, Layer } from "effect"
import { StoreUnavailable } from "../../Idempotency.js"
import * as Claims from "../sql/claims.js"
import * as SqlStore from "../sql/store.js"

/** The record of the tasks a serving process holds. */
export interface HeldTasksShape {
  /** Whether the held tasks outlive the process (SQL: yes; memory: no). */
  readonly durable: boolean
  /** Records that this agent's serving process holds the task (re-attached after a restart). */
  readonly holdTask: (agentId: string, taskId: string) => Effect.Effect<void>
  /** The task ended (or the platform forgot it): no longer held. */
  readonly releaseTask: (agentId: string, taskId: string) => Effect.Effect<void>
  /** The tasks of this agent still held, oldest first: a restarted process attaches them again. */
  readonly heldTasks: (agentId: string) => Effect.Effect<ReadonlyArray<string>>
}

/**
 * The record of the tasks a serving process holds (design: Interruption and shutdown). `Serve` reads
 * it when provided; without one nothing outlives the process.
 */
export class HeldTasks extends Context.Tag("agent-tools/HeldTasks")<HeldTasks, HeldTasksShape>() {}

/** Nothing outlives the process: a restarted one has no tasks to take back. */
export const none: HeldTasksShape = {
  durable: false,
  holdTask: () => Effect.void,
  releaseTask: () => Effect.void,
  heldTasks: () => Effect.succeed([])
}

/**
 * In the database of `sql` (the claims' `held_tasks` table, `internal/sql/claims.ts`). Best effort: a
 * write that fails is logged (the task still runs; only a restart's re-attach would miss it).
 */
export const inSql = (sql: SqlClient.SqlClient): HeldTasksShape => ({
  durable: true,
  holdTask: (agentId, taskId) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.ignoreLogged(Claims.holdTask(sql, agentId, taskId, now))),
  releaseTask: (agentId, taskId) => Effect.ignoreLogged(Claims.releaseTask(sql, agentId, taskId)),
  heldTasks: (agentId) => Effect.orElseSucceed(Claims.heldTasks(sql, agentId), () => [])
})

/** Held tasks in memory: none outlive the process (a restarted one has no tasks to take back). */
export const layerMemory: Layer.Layer<HeldTasks> = Layer.succeed(HeldTasks, none)

/**
 * Held tasks in the database of the `SqlClient` in context (its `held_tasks` table, made by the
 * claims' migrations, which run here too: one file or client may hold both). Fails with
 * `StoreUnavailable`, naming the database, if the table cannot be made.
 */
export const layerSqlClient: Layer.Layer<HeldTasks, StoreUnavailable, SqlClient.SqlClient> = Layer.effect(
  HeldTasks,
  Effect.gen(function*() {
    // Rows are read by their column names: a client's name transforms (to camelCase, say) must not apply.
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const unavailable = (reason: string) => new StoreUnavailable({ path: SqlStore.databaseName(sql), reason })
    yield* SqlStore.migrate({ migrations: Claims.migrations, table: Claims.migrationsTable, unavailable })
    return inSql(sql)
  })
)
