/**
 * What the SQL stores (the claims, the platform journal) share: a SQLite file opened as an
 * `SqlClient`, a module's migrations run, and any failure on the way turned into the store's own
 * error, which names the database and says why, in the driver's words.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Context, Effect, Layer } from "effect"

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
  effect.pipe(
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

/** An `SqlClient` on the SQLite file `filename` (created if missing; WAL mode), or `unavailable`'s error. */
export const layerSqlite = <E>(
  filename: string,
  unavailable: (reason: string) => E
): Layer.Layer<SqlClient.SqlClient, E> =>
  Layer.scoped(
    SqlClient.SqlClient,
    Layer.build(SqliteClient.layer({ filename })).pipe(
      Effect.map(Context.get(SqlClient.SqlClient)),
      orUnavailable(unavailable)
    )
  )

/**
 * Runs a module's migrations on the client in context, recorded in the module's own `table`: two
 * modules may share a database, and both number their migrations from 1.
 */
export const migrate = <E>(options: {
  readonly migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>
  readonly table: string
  readonly unavailable: (reason: string) => E
}): Effect.Effect<void, E, SqlClient.SqlClient> =>
  Migrator.make({})({ loader: Migrator.fromRecord(options.migrations), table: options.table }).pipe(
    Effect.asVoid,
    orUnavailable(options.unavailable)
  )
