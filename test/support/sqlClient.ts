/** `SqlClient`s on a SQLite file, as an application gives one to the stores' `layerSqlClient`. */
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Context, Layer } from "effect"

/** An `SqlClient` on `file` (its own connection); `camelCase` turns the names of result columns to camelCase. */
export const sqliteClient = (
  file: string,
  options: { readonly camelCase?: boolean } = {}
): Layer.Layer<SqlClient.SqlClient> =>
  Layer.map(
    SqliteClient.layer(
      options.camelCase === true ? { filename: file, transformResultNames: camelCase } : { filename: file }
    ),
    Context.omit(SqliteClient.SqliteClient)
  ).pipe(Layer.orDie)

const camelCase = (name: string) => name.replace(/_(.)/g, (_, letter: string) => letter.toUpperCase())

/** An `SqlClient` on `file` whose config cannot be seen: a client that names no database, as a server's may not. */
export const unnamedClient = (file: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.map(sqliteClient(file), (context) => {
    const sql = Context.get(context, SqlClient.SqlClient)
    const hidden = new Proxy(sql, { get: (target, key) => key === "config" ? undefined : Reflect.get(target, key) })
    return Context.make(SqlClient.SqlClient, hidden)
  })
