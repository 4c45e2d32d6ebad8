/** `SqlClient`s on a SQLite file, as an application gives one to the stores' `layerSqlClient`. */
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Context, Layer } from "effect"

/** An `SqlClient` on `file` (its own connection). */
export const sqliteClient = (file: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.map(SqliteClient.layer({ filename: file }), Context.omit(SqliteClient.SqliteClient)).pipe(Layer.orDie)

/** An `SqlClient` on `file` whose config cannot be seen: a client that names no database, as a server's may not. */
export const unnamedClient = (file: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.map(sqliteClient(file), (context) => {
    const sql = Context.get(context, SqlClient.SqlClient)
    const hidden = new Proxy(sql, { get: (target, key) => key === "config" ? undefined : Reflect.get(target, key) })
    return Context.make(SqlClient.SqlClient, hidden)
  })
