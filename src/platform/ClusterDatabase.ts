/**
 * The cluster's database beyond the engine's and the journal's own tables (Cluster.ts): the agents'
 * registrations kept there (`makeRegistry`), and the schema a runner needs, created once by `migrate`
 * and checked at a runner's start (`requireMigrated`).
 */
import * as MachineId from "@effect/cluster/MachineId"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as Snowflake from "@effect/cluster/Snowflake"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as SqlClient from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Schedule, Schema } from "effect"
import * as Idempotency from "../Idempotency.js"
import * as Postgres from "../internal/sql/postgres.js"
import * as SqlStore from "../internal/sql/store.js"
import { redactUrl } from "../internal/util/settings.js"
import * as Journal from "../Journal.js"
import * as Toolkit from "../Toolkit.js"
import { TaskEntity } from "./ClusterEntities.js"
import { shardingConfig } from "./ClusterRunner.js"

// ---------------------------------------------------------------------------------------------
// The client.

/** The cluster's database refused the connection (a wrong password, no such database): why, where; never the password. */
export class DatabaseRefused extends Schema.TaggedError<DatabaseRefused>("agent-tools/platform/DatabaseRefused")(
  "DatabaseRefused",
  { database: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `the cluster's database ${this.database} refused the connection: ${this.reason}; ` +
      "check the user, password and database name of PLATFORM_DATABASE (or --database)"
  }
}

/**
 * The `SqlClient` on the cluster's PostgreSQL at `url`. While the server cannot be reached (down, restarting)
 * the start waits for it as a running runner's statements do (`SqlStore.unreachableRetry`: up to 2 minutes),
 * saying so; a server that refuses the connection fails the start with `DatabaseRefused`, its reason and the
 * database's URL without its password.
 */
export const layerClient = (url: string): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, DatabaseRefused> => {
  const database = redactUrl(url)
  // Said once, then every 10 s while it lasts.
  let saidAt = Number.NEGATIVE_INFINITY
  const waiting = Schedule.recurWhile(SqlStore.isUnreachable).pipe(
    Schedule.intersect(SqlStore.unreachableRetry),
    Schedule.tapInput((error: unknown) =>
      Date.now() - saidAt < 10_000 ? Effect.void : Effect.zipRight(
        Effect.sync(() => (saidAt = Date.now())),
        Effect.logWarning(
        `the cluster's database ${database} cannot be reached (${SqlStore.describe(error)}): the runner waits for it, ` +
          "tried again every 250 ms for up to 2 minutes"
        )
      )
    )
  )
  return Postgres.layer(url).pipe(
    Layer.retry(waiting),
    Layer.catchAll((error) => Layer.fail(new DatabaseRefused({ database, reason: SqlStore.describe(error) })))
  )
}

// ---------------------------------------------------------------------------------------------
// The agents' registrations, kept in the database.

/** Its own migrations table (the journal's and the claims' number from 1 too). */
const registryMigrationsTable = "agent_tools_cluster_migrations"

const registryMigrations = {
  "0001_create_cluster_processes": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS cluster_processes (
      agent_id TEXT NOT NULL,
      process_id TEXT NOT NULL,
      manifest TEXT NOT NULL,
      manifest_hash TEXT NOT NULL,
      last_seen BIGINT NOT NULL,
      PRIMARY KEY (agent_id, process_id)
    )`),
  "0002_create_cluster_lifecycle": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`CREATE TABLE IF NOT EXISTS cluster_lifecycle (agent_id TEXT NOT NULL, at BIGINT NOT NULL)`)
}

const ManifestJson = Schema.parseJson(Schema.Array(Toolkit.ManifestEntry))

/** A registry statement: waits while the database cannot be reached (a restart), else a defect. */
const orDie = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, never, R> => Effect.orDie(SqlStore.whileBusy(effect))

/**
 * The registrations of the agents' live processes, in the database: an agent's entity reads them
 * when it starts on a runner (its shard moved there, or it had gone idle), so that a move forgets
 * no process; register, heartbeat and deregister write them; silent ones are deleted by the sweep.
 */
export const makeRegistry = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  return {
    load: (agentId: string) =>
      Effect.flatMap(
        sql<{ readonly process_id: string; readonly manifest: string; readonly manifest_hash: string; readonly last_seen: string | number }>`
          SELECT process_id, manifest, manifest_hash, last_seen FROM cluster_processes WHERE agent_id = ${agentId}`,
        (rows) =>
          Effect.forEach(rows, (row) =>
            Effect.map(Schema.decode(ManifestJson)(row.manifest), (manifest) => ({
              processId: row.process_id,
              manifest,
              manifestHash: row.manifest_hash,
              lastSeen: Number(row.last_seen)
            })))
      ).pipe(orDie),
    registered: (agentId: string, processId: string, manifest: ReadonlyArray<Toolkit.ManifestEntry>, manifestHash: string, now: number) =>
      Effect.flatMap(Schema.encode(ManifestJson)(manifest), (text) =>
        sql`INSERT INTO cluster_processes (agent_id, process_id, manifest, manifest_hash, last_seen)
          VALUES (${agentId}, ${processId}, ${text}, ${manifestHash}, ${now})
          ON CONFLICT (agent_id, process_id) DO UPDATE SET manifest = ${text}, manifest_hash = ${manifestHash}, last_seen = ${now}`)
        .pipe(orDie, Effect.asVoid),
    heard: (agentId: string, processId: string, now: number) =>
      sql`UPDATE cluster_processes SET last_seen = ${now} WHERE agent_id = ${agentId} AND process_id = ${processId}`
        .pipe(orDie, Effect.asVoid),
    deregistered: (agentId: string, processId: string) =>
      sql`DELETE FROM cluster_processes WHERE agent_id = ${agentId} AND process_id = ${processId}`
        .pipe(orDie, Effect.asVoid),
    /** The times of the agent's lifecycle calls since `since`. */
    lifecycle: (agentId: string, since: number) =>
      Effect.map(
        sql<{ readonly at: string | number }>`SELECT at FROM cluster_lifecycle WHERE agent_id = ${agentId} AND at > ${since}`,
        (rows) => rows.map((row) => Number(row.at))
      ).pipe(orDie),
    counted: (agentId: string, at: number) =>
      sql`INSERT INTO cluster_lifecycle (agent_id, at) VALUES (${agentId}, ${at})`.pipe(orDie, Effect.asVoid),
    forgetSilent: (before: number, windowStart: number) =>
      Effect.zipRight(
        sql`DELETE FROM cluster_processes WHERE last_seen < ${before}`,
        sql`DELETE FROM cluster_lifecycle WHERE at <= ${windowStart}`
      ).pipe(orDie, Effect.asVoid)
  }
})

/** The agents' registrations, as `makeRegistry` gives them. */
export type Registry = Effect.Effect.Success<typeof makeRegistry>

// ---------------------------------------------------------------------------------------------
// The engine's tables, pruned.

/**
 * Deletes what the engine keeps of the tasks the journal no longer holds (ended before `before`, and purged
 * from it: `keepEndedTasks`): their messages (`Stop`, `Decided`, and the engine's own envelopes) stored
 * before `before`, and the replies left without their message. The engine reads a message again only for a
 * task whose shard moves, and such a task's journal row is gone: it would find nothing to run. Each runner's
 * retention sweep calls it after it purged the journal (ClusterJournal.ts); one statement each, whichever
 * runner runs it first.
 */
export const makePrune = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  return (before: number): Effect.Effect<void> => {
    // A message's id is a snowflake: its first bits are the time it was made.
    const cutoff = Snowflake.make({ timestamp: before, machineId: MachineId.make(0), sequence: 0 }).toString()
    return Effect.zipRight(
      sql`DELETE FROM cluster_messages m WHERE m.entity_type = ${TaskEntity.type} AND m.id < ${cutoff}
        AND NOT EXISTS (SELECT 1 FROM journal_tasks t WHERE t.task_id = m.entity_id)`,
      sql`DELETE FROM cluster_replies r WHERE NOT EXISTS (SELECT 1 FROM cluster_messages m WHERE m.id = r.request_id)`
    ).pipe(SqlStore.whileBusy, Effect.ignoreLogged)
  }
})

// ---------------------------------------------------------------------------------------------
// The schema.

/** The tables a runner needs: the cluster's, the run journal's and the claims'. */
const tables = [
  "cluster_messages",
  "cluster_replies",
  "cluster_runners",
  "cluster_processes",
  "cluster_lifecycle",
  "journal_tasks",
  "journal_calls",
  "tool_claims"
]

/** The cluster's database has not been set up: `platform migrate` first. */
export class NotMigrated extends Schema.TaggedError<NotMigrated>("agent-tools/platform/NotMigrated")("NotMigrated", {
  missing: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `the cluster's database lacks ${this.missing.join(", ")}: run \`agent-tools platform migrate\` once, ` +
      `before the runners start, with the database's URL in the environment (PLATFORM_DATABASE, the password in ` +
      `it or in PGPASSWORD; not --database, which every local user sees in ps); runners starting together on an ` +
      `empty database would race to create it`
  }
}

/** Fails with `NotMigrated` unless every table of the schema exists. */
export const requireMigrated = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* SqlStore.whileBusy(sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = current_schema()`)
  const present = new Set(rows.map((row) => row.name))
  const missing = tables.filter((table) => !present.has(table))
  if (missing.length > 0) return yield* new NotMigrated({ missing })
})

/**
 * Creates the schema once, in one process, before runners start: the cluster's tables, the run
 * journal's and the claims store's (so every serving replica of an agent can share the claims on
 * the same database). Running it again changes nothing.
 */
export const migrate = Effect.gen(function*() {
  const config = ShardingConfig.layer(shardingConfig({}))
  yield* Layer.build(Layer.mergeAll(
    Layer.provide(SqlMessageStorage.layer, config),
    Layer.provide(SqlRunnerStorage.layer, config),
    Journal.layerSqlClient,
    Idempotency.layerSqlClient()
  ))
  yield* SqlStore.migrate({
    migrations: registryMigrations,
    table: registryMigrationsTable,
    unavailable: (reason) => new NotMigrated({ missing: [`cluster_processes (${reason})`] })
  })
}).pipe(Effect.scoped)
