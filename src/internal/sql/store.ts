/**
 * What the SQL stores (the claims, the platform journal) share: a SQLite file opened as an
 * `SqlClient`, a module's migrations run, and any failure on the way turned into the store's own
 * error, which names the database and says why, in the driver's words.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { Context, Effect, FiberRef, Layer, Schedule } from "effect"
import { loadPeer } from "../util/optionalPeer.js"

/** Why a statement failed, in the driver's words: a `SqlError`'s cause (SQLite's own text), else the message. */
export const describe = (error: unknown): string => {
  const cause = (error as { cause?: unknown }).cause
  if (cause instanceof Error) return cause.message
  return error instanceof Error ? error.message : String(error)
}

/**
 * `effect` with its failures and defects turned into `unavailable(reason)`: the driver throws (a
 * defect) on a file it cannot open, and the migrator dies on a migration that fails.
 */
export const orUnavailable = <E>(unavailable: (reason: string) => E) =>
<A, E1, R>(effect: Effect.Effect<A, E1, R>): Effect.Effect<A, E, R> =>
  whileBusy(effect).pipe(
    Effect.mapError((error) => unavailable(describe(error))),
    Effect.catchAllDefect((defect) => Effect.fail(unavailable(describe(defect))))
  )

/**
 * The database of `sql`, for an error text, as well as the client names it: a SQLite client's file, a
 * server client's database (and host) when its config holds them, else only what kind of client it is.
 */
export const databaseName = (sql: SqlClient.SqlClient): string => {
  const config: unknown = (sql as { readonly config?: unknown }).config
  if (typeof config === "object" && config !== null) {
    const { database, filename, host } = config as Record<string, unknown>
    if (typeof filename === "string") return filename
    if (typeof database === "string") return typeof host === "string" ? `${database} on ${host}` : database
  }
  const kind = sql.onDialectOrElse({
    sqlite: () => "SQLite",
    pg: () => "PostgreSQL",
    mysql: () => "MySQL",
    mssql: () => "SQL Server",
    orElse: () => "SQL"
  })
  return `on a ${kind} client`
}

/**
 * How long one statement may wait for another process's lock on a SQLite file, holding the event
 * loop (the driver is synchronous): past it the statement fails busy and `whileBusy` tries again
 * later, the loop free meanwhile. The driver's own default waits 5 s on the loop.
 */
export const busyWaitMillis = 20

/** How long a statement keeps being tried while the file is locked, and how often. */
export const busyRetry = Schedule.exponential("10 millis").pipe(
  Schedule.union(Schedule.spaced("250 millis")),
  Schedule.upTo("10 seconds")
)

/** True for a failure because another connection holds the database (SQLite's BUSY or LOCKED). */
const isBusy = (error: unknown): boolean => {
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code ?? (error as { code?: unknown } | undefined)?.code
  return typeof code === "string" && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

/**
 * How long a statement keeps being tried while the database server cannot be reached (it crashed and
 * restarts, it fails over), and how often: a restart of a few seconds is ridden out; past 2 minutes
 * the last failure stands.
 */
export const unreachableRetry = Schedule.exponential("50 millis").pipe(
  Schedule.union(Schedule.spaced("250 millis")),
  Schedule.upTo("2 minutes")
)

/** A server's codes for a connection it refused, lost or could not take yet (PostgreSQL's classes 08 and 57P). */
const unreachableCode = /^(ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|08\w{3}|57P0[123])$/

/** The driver's words (`@effect/sql-pg`, `pg`) for a connection it could not make, or lost. */
const unreachableMessage = new RegExp(
  "^(Connection error|Failed to acquire connection|Connection terminated|" +
    "Client has encountered a connection error|timeout exceeded when trying to connect)"
)

/**
 * True for a failure because the database server could not be reached, or the connection broke
 * under the statement (the driver's own words, or the codes of `unreachableCode`, anywhere in the
 * chain of causes). The statement either did not run or its outcome is unknown: the stores' writes
 * are idempotent (`ON CONFLICT`, `COALESCE`), so running it again is safe.
 */
export const isUnreachable = (error: unknown): boolean => {
  let current: unknown = error
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const { code, message } = current as { readonly code?: unknown; readonly message?: unknown }
    if (typeof code === "string" && unreachableCode.test(code)) return true
    if (typeof message === "string" && unreachableMessage.test(message)) return true
    current = (current as { readonly cause?: unknown }).cause
  }
  return false
}

/**
 * What a fiber tells its users when one of its statements finds the database unreachable (on each
 * try; the callee keeps one per outage): a platform task's loop says `TaskWaiting` on its stream.
 */
export const currentOnUnreachable = FiberRef.unsafeMake<(reason: string) => Effect.Effect<void>>(() => Effect.void)

/** When the last "cannot be reached" warning was logged: one in 10 s per process, however many statements wait. */
let unreachableWarnedAt = 0

const warnUnreachable = (error: unknown) =>
  Effect.suspend(() => {
    const now = Date.now()
    if (now - unreachableWarnedAt < 10_000) return Effect.void
    unreachableWarnedAt = now
    return Effect.logWarning(
      `the database cannot be reached (${describe(error)}): its statements wait for it, ` +
        `tried again every 250 ms for up to 2 minutes`
    )
  })

/**
 * `effect` (statements, a transaction) tried again while it fails because the database is locked by
 * another process, on `busyRetry`: the event loop runs on between tries (design: Hostile clients);
 * and while the database server cannot be reached, on `unreachableRetry` (design: Cluster mode),
 * with a warning. Past a schedule the last failure stands, its text saying why. Any other failure is
 * not retried.
 */
export const whileBusy = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  // The schedules are set up only once a statement failed so (a statement a call at a time: most never do),
  // that first failure going through them as it would have.
  Effect.catchIf(effect, (error) => isBusy(error) || isUnreachable(error), (error) => {
    let failed = false
    return retried(Effect.suspend(() => failed ? effect : (failed = true, Effect.fail(error))))
  })

/** `whileBusy`'s retries. */
const retried = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.retry(effect, { schedule: busyRetry, while: isBusy }).pipe(
    Effect.tapError((error) =>
      isUnreachable(error)
        ? Effect.zipRight(
          warnUnreachable(error),
          FiberRef.getWith(currentOnUnreachable, (tell) => tell(describe(error)))
        )
        : Effect.void
    ),
    Effect.retry({ schedule: unreachableRetry, while: isUnreachable })
  )

/** The packages a SQLite file needs (optional peers of agent-tools, loaded on first use). */
export const sqlitePackages = ["@effect/sql-sqlite-node", "better-sqlite3"]

/**
 * An `SqlClient` on the SQLite file `filename` (created if missing; WAL mode), or `unavailable`'s error;
 * the SQLite driver is loaded now, and its absence is that error too, naming the packages to install.
 */
export const layerSqlite = <E>(
  filename: string,
  unavailable: (reason: string) => E
): Layer.Layer<SqlClient.SqlClient, E> =>
  Layer.scoped(
    SqlClient.SqlClient,
    loadPeer(() => import("@effect/sql-sqlite-node/SqliteClient"), sqlitePackages, "a SQLite file").pipe(
      Effect.mapError((missing) => unavailable(missing.message)),
      Effect.flatMap((SqliteClient) =>
        Layer.build(SqliteClient.layer({ filename })).pipe(
          Effect.map(Context.get(SqlClient.SqlClient)),
          // A lock held elsewhere costs the loop at most this, a statement: the waiting is `whileBusy`'s.
          Effect.tap((sql) => sql.unsafe(`PRAGMA busy_timeout = ${busyWaitMillis}`)),
          orUnavailable(unavailable)
        )
      )
    )
  )

/**
 * `build` on the PostgreSQL database of `url`, opened the one way the project opens PostgreSQL
 * (internal/sql/postgres.ts, loaded only now: `@effect/sql-pg` is an optional peer). A missing package
 * or a database that cannot be used fails with `unavailable(reason)`; the reason never holds the password.
 */
export const onPostgres = <A, E, E2, R>(
  url: string,
  purpose: string,
  unavailable: (reason: string) => E,
  build: Layer.Layer<A, E2, R>
): Layer.Layer<A, E | E2, Exclude<R, SqlClient.SqlClient>> =>
  Layer.unwrapEffect(
    loadPeer(() => import("./postgres.js"), ["@effect/sql-pg", "pg"], purpose).pipe(
      Effect.mapError((missing) => unavailable(missing.message)),
      Effect.map((Postgres) =>
        Layer.provide(build, Postgres.layer(url).pipe(Layer.mapError((error) => unavailable(describe(error)))))
      )
    )
  ) as Layer.Layer<A, E | E2, Exclude<R, SqlClient.SqlClient>>

/** Another process was running the migrations when these ran (the migrator then does nothing): not all recorded yet. */
class StillMigrating {
  readonly _tag = "StillMigrating"
}

/**
 * Runs a module's migrations on the client in context, recorded in the module's own `table`: two
 * modules may share a database, and both number their migrations from 1. Done once every one is recorded:
 * the migrator leaves them to a process it finds running them (on SQLite, a write it cannot make at once),
 * and returns before that process commits; two serving processes started together on one file would
 * otherwise read a table not there yet. So it runs again until they are, waiting as for any write another
 * connection holds (`busyRetry`).
 */
export const migrate = <E>(options: {
  readonly migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>
  readonly table: string
  readonly unavailable: (reason: string) => E
}): Effect.Effect<void, E, SqlClient.SqlClient> => {
  const last = Math.max(...Object.keys(options.migrations).map((key) => Number.parseInt(key, 10)))
  const recorded = Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly latest: number | string | null }>`SELECT MAX(migration_id) AS latest FROM ${sql(options.table)}`
      .withoutTransform)
  return Migrator.make({})({ loader: Migrator.fromRecord(options.migrations), table: options.table }).pipe(
    Effect.zipRight(recorded),
    Effect.flatMap(([row]) => Number(row?.latest ?? 0) >= last ? Effect.void : Effect.fail(new StillMigrating())),
    Effect.retry({ schedule: busyRetry, while: (error) => error instanceof StillMigrating }),
    Effect.catchIf(
      (error): error is StillMigrating => error instanceof StillMigrating,
      () => Effect.fail(`another process began migrating ${options.table} and has not finished in 10 s`)
    ),
    orUnavailable(options.unavailable)
  )
}
