/**
 * The one way agent-tools opens a PostgreSQL database (a cluster's runners and `platform migrate`, a
 * serving process's claims on `IDEMPOTENCY_DB`): `@effect/sql-pg`'s client on a URL, with the
 * statements on a reserved connection run one after another. Imported only where PostgreSQL is asked
 * for: `@effect/sql-pg` is an optional peer.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlConnection from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"

/**
 * `connection` with its statements run one at a time, in the order they came. The engine's shard
 * locks share one reserved connection between concurrent fibers: handed to the driver together, they
 * queue in `pg`, which prints a deprecation warning and, on an interruption, cancels whichever
 * statement the server is running, not the one interrupted.
 */
const serial = (connection: SqlConnection.Connection): Effect.Effect<SqlConnection.Connection> =>
  Effect.map(Effect.makeSemaphore(1), (semaphore) => {
    const one = semaphore.withPermits(1)
    return {
      ...connection,
      execute: (sql, params, transformRows) => one(connection.execute(sql, params, transformRows)),
      executeRaw: (sql, params) => one(connection.executeRaw(sql, params)),
      executeValues: (sql, params) => one(connection.executeValues(sql, params)),
      executeUnprepared: (sql, params, transformRows) => one(connection.executeUnprepared(sql, params, transformRows))
    }
  })

/** `client`, its reserved connections serial (`serial`); the same for the client `withoutTransforms` gives. */
const withSerialReserve = <C extends SqlClient.SqlClient>(client: C): C => {
  const reserve: Effect.Effect<SqlConnection.Connection, SqlError, Scope.Scope> = Effect.flatMap(
    client.reserve,
    serial
  )
  const call = (...args: Array<unknown>) => (client as unknown as (...args: Array<unknown>) => unknown)(...args)
  const wrapped: C = Object.assign(call, client, { reserve }) as unknown as C
  const without = client.withoutTransforms()
  Object.assign(wrapped, {
    withoutTransforms: () => without === client ? wrapped : withSerialReserve(without)
  })
  return wrapped
}

/**
 * An `SqlClient` (and `PgClient`) on the PostgreSQL database of `url`, its pool closed with the layer;
 * fails with the driver's `SqlError` when the database does not answer at the start.
 */
export const layer = (url: string): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError> =>
  Layer.effectContext(
    Effect.map(Effect.context<PgClient.PgClient | SqlClient.SqlClient>(), (context) => {
      const client = withSerialReserve(Context.get(context, PgClient.PgClient))
      return Context.make(PgClient.PgClient, client).pipe(Context.add(SqlClient.SqlClient, client))
    })
  ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))
