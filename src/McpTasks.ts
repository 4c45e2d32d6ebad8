/**
 * Where an MCP server keeps its tasks (design: MCP tasks; protocol revision 2025-11-25): a task-augmented
 * `tools/call` is written here as it is created, its status as it changes and its result once it ended, per principal (the client
 * a bearer token or an OAuth access token names). In a SQLite file (`layerSql`), on PostgreSQL (`layerPostgres`), or
 * in any `SqlClient`'s database (`layerSqlClient`), beside the run journal: a server started again on the same
 * store answers `tasks/get` and `tasks/result` for the tasks of the one before it, and runs again those it left
 * running (an idempotent tool's, under the same key; any other's ends failed, its outcome unknown). A server holds
 * the tasks it runs by a lease (`claim`, `renew`, `release`): servers sharing a store take only lapsed ones.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import * as Sql from "./internal/mcp/taskSql.js"
import * as SqlStore from "./internal/sql/store.js"
import * as Settings from "./internal/util/settings.js"

/** The store's database could not be opened or prepared. */
export class TaskStoreUnavailable extends Schema.TaggedError<TaskStoreUnavailable>("agent-tools/McpTaskStoreUnavailable")(
  "McpTaskStoreUnavailable",
  { path: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `the MCP task store ${this.path} cannot be used: ${this.reason}`
  }
}

/** MCP's task statuses. */
export type Status = "working" | "input_required" | "completed" | "failed" | "cancelled"

/** A task as stored. Times are epoch milliseconds; `result` is the `tools/call` result's JSON once it ended. */
export interface StoredTask {
  readonly taskId: string
  readonly principal: string
  readonly tool: string
  /** The call's arguments, JSON. */
  readonly arguments: string
  readonly status: Status
  readonly statusMessage: string | undefined
  /** How long the task is kept after it was created, in milliseconds; null: until it is purged by hand. */
  readonly ttl: number | null
  readonly pollInterval: number
  readonly createdAt: number
  readonly updatedAt: number
  readonly result: string | undefined
}

/** A page of a principal's tasks, and the cursor of the next one. */
export interface Page {
  readonly tasks: ReadonlyArray<StoredTask>
  readonly nextCursor: string | undefined
}

/** The task store. A database failure is a defect (the SDK answers it as an error of the request). */
export class McpTaskStore extends Context.Tag("agent-tools/McpTaskStore")<McpTaskStore, {
  /** Where it is, for logs and errors. */
  readonly path: string
  /** A new task, run by the server `lease.owner` (its lease until `lease.until`, epoch milliseconds). */
  readonly create: (
    task: Omit<StoredTask, "status" | "statusMessage" | "updatedAt" | "result">,
    lease: Lease
  ) => Effect.Effect<void>
  /** `principal`'s task `taskId`; another principal's, or one past its TTL, is undefined. */
  readonly get: (principal: string, taskId: string) => Effect.Effect<StoredTask | undefined>
  /** `principal`'s tasks, oldest first, `limit` a page; an unknown cursor is a failure naming it. */
  readonly list: (principal: string, cursor: string | undefined, limit: number) => Effect.Effect<Page, string>
  /** Sets a task's status while it has not ended; true if it had not. */
  readonly setStatus: (taskId: string, status: Status, message: string | undefined) => Effect.Effect<boolean>
  /** Ends a task with its result, unless it ended already (cancelled); true if it had not. */
  readonly finish: (
    taskId: string,
    status: "completed" | "failed",
    message: string | undefined,
    result: string
  ) => Effect.Effect<boolean>
  /**
   * The tasks not ended whose lease lapsed, every principal's (those a server that stopped left), now run by
   * `lease.owner`; oldest first. Of servers claiming at once, one gets each task.
   */
  readonly claim: (lease: Lease) => Effect.Effect<ReadonlyArray<StoredTask>>
  /** The leases of `lease.owner`'s tasks not ended, renewed; the ids of those it still runs (not cancelled, not taken). */
  readonly renew: (lease: Lease) => Effect.Effect<ReadonlySet<string>>
  /** The leases of `owner`'s tasks not ended lapse now (a graceful stop): the next server to claim takes them. */
  readonly release: (owner: string) => Effect.Effect<void>
}>() {}

/** Which server runs a task not ended, and until when unless it renews: another server may take it after. */
export interface Lease {
  readonly owner: string
  /** Epoch milliseconds. */
  readonly until: number
}

/** The defaults of a server's tasks. */
export const defaults = {
  /** A tool whose timeout is at least this long may be called as a task (`taskSupport: "optional"`). */
  threshold: Duration.seconds(5),
  /** What `tasks/get` tells the client to wait between polls. */
  pollInterval: Duration.seconds(1),
  /** How long a task is kept when the client asks for no TTL. */
  ttl: Duration.hours(1),
  /** The longest TTL granted, whatever the client asks. */
  maxTtl: Duration.days(1),
  /** Tasks in a page of `tasks/list`. */
  pageSize: 100,
  /**
   * How long a server's hold on the tasks it runs lasts unless renewed (every third of it): a server killed leaves
   * its tasks to another (or itself started again) this long after its last renewal.
   */
  lease: Duration.seconds(10)
} as const

const statuses: ReadonlySet<string> = new Set(["working", "input_required", "completed", "failed", "cancelled"])

const taskOf = (row: Sql.TaskRow): StoredTask => ({
  taskId: row.task_id,
  principal: row.principal,
  tool: row.tool,
  arguments: row.arguments,
  status: (statuses.has(row.status) ? row.status : "failed") as Status,
  statusMessage: row.status_message ?? undefined,
  ttl: row.ttl === null ? null : Number(row.ttl),
  pollInterval: Number(row.poll_interval),
  createdAt: Number(row.created_at),
  updatedAt: Number(row.updated_at),
  result: row.result ?? undefined
})

const live = (task: StoredTask, now: number) => task.ttl === null || task.createdAt + task.ttl > now

const cursorOf = (task: StoredTask) => `${task.createdAt}.${task.taskId}`

const parseCursor = (cursor: string): { readonly createdAt: number; readonly taskId: string } | undefined => {
  const dot = cursor.indexOf(".")
  const createdAt = Number(cursor.slice(0, dot))
  return dot <= 0 || !Number.isSafeInteger(createdAt) ? undefined : { createdAt, taskId: cursor.slice(dot + 1) }
}

/** A statement: tried again while another process holds the file (SQLite) or the server is away; else a defect. */
const orDie = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A> => Effect.orDie(SqlStore.whileBusy(effect))

/** The store in the database of the `SqlClient` in context; its table made at start (migrations of its own). */
export const layerSqlClient: Layer.Layer<McpTaskStore, TaskStoreUnavailable, SqlClient.SqlClient> = Layer.effect(
  McpTaskStore,
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const path = SqlStore.databaseName(sql)
    const unavailable = (reason: string) => new TaskStoreUnavailable({ path, reason })
    yield* SqlStore.migrate({ migrations: Sql.migrations, table: Sql.migrationsTable, unavailable })
    yield* orDie(Effect.flatMap(Clock.currentTimeMillis, (now) => Sql.purge(sql, now)))
    return McpTaskStore.of({
      path,
      create: (task, lease) =>
        orDie(Sql.insert(sql, {
          task_id: task.taskId,
          principal: task.principal,
          tool: task.tool,
          arguments: task.arguments,
          ttl: task.ttl,
          poll_interval: task.pollInterval,
          created_at: task.createdAt,
          owner: lease.owner,
          lease_until: lease.until
        })),
      get: (principal, taskId) =>
        Effect.gen(function*() {
          const row = (yield* orDie(Sql.find(sql, principal, taskId)))[0]
          const task = row === undefined ? undefined : taskOf(row)
          return task !== undefined && live(task, yield* Clock.currentTimeMillis) ? task : undefined
        }),
      list: (principal, cursor, limit) =>
        Effect.gen(function*() {
          const after = cursor === undefined ? undefined : parseCursor(cursor)
          if (cursor !== undefined && after === undefined) return yield* Effect.fail(`the cursor ${JSON.stringify(cursor)} is not one of tasks/list's`)
          const now = yield* Clock.currentTimeMillis
          const rows = (yield* orDie(Sql.list(sql, principal, after, limit + 1))).map(taskOf)
          const page = rows.slice(0, limit)
          const last = page[page.length - 1]
          return {
            tasks: page.filter((task) => live(task, now)),
            nextCursor: rows.length > limit && last !== undefined ? cursorOf(last) : undefined
          }
        }),
      setStatus: (taskId, status, message) =>
        orDie(Effect.flatMap(Clock.currentTimeMillis, (now) => Sql.setStatus(sql, taskId, status, message ?? null, now)))
          .pipe(Effect.map((changed) => changed > 0)),
      finish: (taskId, status, message, result) =>
        orDie(Effect.flatMap(Clock.currentTimeMillis, (now) => Sql.finish(sql, taskId, status, message ?? null, result, now)))
          .pipe(Effect.map((changed) => changed > 0)),
      claim: (lease) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => orDie(Sql.claim(sql, lease.owner, now, lease.until))).pipe(
          Effect.map((rows) => rows.map(taskOf).sort((a, b) => a.createdAt - b.createdAt || (a.taskId < b.taskId ? -1 : 1)))
        ),
      renew: (lease) =>
        Effect.map(orDie(Sql.renew(sql, lease.owner, lease.until)), (rows) => new Set(rows.map((row) => row.task_id))),
      release: (owner) => Effect.asVoid(orDie(Sql.release(sql, owner)))
    })
  })
)

/** The store in the SQLite file `filename` (created if missing; WAL mode): the run journal's file may be it. */
export const layerSql = (options: { readonly filename: string }): Layer.Layer<McpTaskStore, TaskStoreUnavailable> =>
  Layer.provide(
    Layer.fresh(layerSqlClient),
    SqlStore.layerSqlite(options.filename, (reason) => new TaskStoreUnavailable({ path: options.filename, reason }))
  )

/** The store in memory (SQLite's): tasks end with the process. */
export const layerMemory: Layer.Layer<McpTaskStore> = Layer.orDie(layerSql({ filename: ":memory:" }))

/**
 * The store on the PostgreSQL database of `url` (`postgres://` or `postgresql://`), through the project's one
 * PostgreSQL client (`@effect/sql-pg`, an optional peer): the table is made at the first start. Servers on the
 * same database share their tasks' records; each takes back, when it starts, the tasks left unfinished. Fails
 * with `TaskStoreUnavailable` naming the database (never the password) if it cannot be used, or if
 * `@effect/sql-pg` is not installed.
 */
export const layerPostgres = (url: string): Layer.Layer<McpTaskStore, TaskStoreUnavailable> => {
  const unavailable = (reason: string) => new TaskStoreUnavailable({ path: Settings.redactUrl(url), reason })
  return SqlStore.onPostgres(url, "MCP tasks on PostgreSQL", unavailable, Layer.fresh(layerSqlClient))
}

/** What `mcp --journal` (or `MCP_JOURNAL`) names: a PostgreSQL URL (`layerPostgres`), else a SQLite file (`layerSql`). */
export const layerFromSetting = (value: string): Layer.Layer<McpTaskStore, TaskStoreUnavailable> =>
  Settings.isPostgresUrl(value) ? layerPostgres(value) : layerSql({ filename: value })
