/**
 * A store's frequent single statements on PostgreSQL (the journal's writes, a call at a time), at the
 * driver's cost rather than `@effect/sql`'s: on one connection of their own, opened with the client's
 * settings, in `pg`'s pipeline mode (each statement its own transaction, answered in order; one that
 * fails fails alone), prepared once per connection (named by their text), and the statements of many
 * fibers that come in one turn of the event loop written to the socket together. An `@effect/sql`
 * statement runs there as it is written (`run`), its text and parameters compiled by the client; any
 * other client, or a statement inside a transaction, runs through the client as before.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { TransactionConnection } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Duration, Effect, Option, Redacted, type Scope } from "effect"
import { isUnreachable } from "./store.js"

/** The part of a `pg` client used here. */
interface PgDriverClient {
  readonly connection: { readonly stream: { cork?: () => void; uncork?: () => void } }
  connect(callback: (error: Error | null) => void): void
  query(
    config: { readonly name: string; readonly text: string; readonly values: ReadonlyArray<unknown> },
    callback: (error: Error | null, result: { readonly rows: ReadonlyArray<unknown> }) => void
  ): void
  on(event: "error" | "end", listener: (error?: Error) => void): void
  end(callback: () => void): void
}

type PgDriverClass = new(options: Record<string, unknown>) => PgDriverClient

/** What `@effect/sql-pg`'s client holds of its settings (its `PgClientConfig`). */
interface PgConfig {
  readonly url?: Redacted.Redacted | undefined
  readonly host?: string | undefined
  readonly port?: number | undefined
  readonly ssl?: unknown
  readonly database?: string | undefined
  readonly username?: string | undefined
  readonly password?: Redacted.Redacted | undefined
  readonly stream?: unknown
  readonly connectTimeout?: Duration.DurationInput | undefined
  readonly applicationName?: string | undefined
  readonly types?: unknown
}

/** The pipeline's connection: open (its statements go out at once) or opening (they wait for it). */
interface Line {
  readonly client: PgDriverClient
  open: boolean
  dead: boolean
  corked: boolean
  readonly waiting: Array<(error: Error | undefined) => void>
}

/** Runs `@effect/sql` statements on the pipeline. */
export interface Pipelined {
  readonly run: <A extends object>(statement: Statement.Statement<A>) => Effect.Effect<ReadonlyArray<A>, SqlError>
}

/** The options `@effect/sql-pg` opens its pool with, for a connection of the same client. */
const optionsOf = (config: PgConfig): Record<string, unknown> => ({
  connectionString: config.url ? Redacted.value(config.url) : undefined,
  user: config.username,
  host: config.host,
  database: config.database,
  password: config.password ? Redacted.value(config.password) : undefined,
  ssl: config.ssl,
  port: config.port,
  ...(config.stream ? { stream: config.stream } : {}),
  connectionTimeoutMillis: config.connectTimeout ? Duration.toMillis(config.connectTimeout) : undefined,
  application_name: config.applicationName ?? "@effect/sql-pg",
  types: config.types,
  pipeline: true
})

/** The `pg` client class the client's pool uses: a connection it lends (the client's dependency, not ours). */
const driverClass = (sql: SqlClient.SqlClient): Effect.Effect<PgDriverClass, SqlError> =>
  Effect.scoped(Effect.map(sql.reserve, (connection) => (connection as unknown as { readonly pg: object }).pg.constructor as PgDriverClass))

/**
 * The pipeline on `sql`'s database, closed with the scope; undefined unless `sql` is an `@effect/sql-pg` client.
 * Its connection is opened on the first statement, and again on the next one after it broke.
 */
export const make = (sql: SqlClient.SqlClient): Effect.Effect<Pipelined | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    const config = (sql as { readonly config?: PgConfig }).config
    if (!("~@effect/sql-pg/PgClient" in sql) || config === undefined) return undefined
    const options = optionsOf(config)
    const attributes: ReadonlyArray<readonly [string, unknown]> = [
      ["db.system.name", "postgresql"],
      ["db.namespace", config.database ?? config.username ?? "postgres"],
      ["server.address", config.host ?? "localhost"],
      ["server.port", config.port ?? 5432],
      ["db.operation.name", "executeWithoutTransform"]
    ]
    let Driver: PgDriverClass | undefined
    let line: Line | undefined
    /** Statement names by text: each prepared once per connection. */
    const names = new Map<string, string>()
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        const closing = line
        line = undefined
        if (closing === undefined || closing.dead) return resume(Effect.void)
        closing.client.end(() => resume(Effect.void))
      }).pipe(Effect.timeoutOption(1000))
    )

    const open = (Class: PgDriverClass): Line => {
      const client = new Class(options)
      const opened: Line = { client, open: false, dead: false, corked: false, waiting: [] }
      const settle = (error: Error | undefined) => {
        for (const waiter of opened.waiting.splice(0)) waiter(error)
      }
      // A connection that broke is let go: its statements fail (and are tried again, `whileBusy`), the next opens another.
      client.on("error", () => void (opened.dead = true))
      client.on("end", () => void (opened.dead = true))
      client.connect((error) => {
        if (error) opened.dead = true
        else opened.open = true
        settle(error ?? undefined)
      })
      return opened
    }

    const send = <A>(on: Line, text: string, values: ReadonlyArray<unknown>, resume: (effect: Effect.Effect<ReadonlyArray<A>, SqlError>) => void) => {
      let name = names.get(text)
      if (name === undefined) names.set(text, name = `agent_tools_${names.size + 1}`)
      // The statements of this turn of the event loop go out in one write.
      const stream = on.client.connection.stream
      if (!on.corked && stream.cork && stream.uncork) {
        on.corked = true
        stream.cork()
        setImmediate(() => {
          on.corked = false
          stream.uncork!()
        })
      }
      on.client.query({ name, text, values }, (error, result) => {
        if (error === null) return resume(Effect.succeed(result.rows as ReadonlyArray<A>))
        // The server ending the connection (a restart, a terminated backend) answers the statement before the socket
        // closes: the next statement opens another connection rather than follow it onto this one.
        if (isUnreachable(error) && !on.dead) {
          on.dead = true
          on.client.end(() => {})
        }
        resume(Effect.fail(new SqlError({ cause: error, message: "Failed to execute statement" })))
      })
    }

    const execute = <A>(Class: PgDriverClass, text: string, values: ReadonlyArray<unknown>) =>
      Effect.async<ReadonlyArray<A>, SqlError>((resume) => {
        if (line === undefined || line.dead) line = open(Class)
        const on = line
        if (on.open) return send(on, text, values, resume)
        on.waiting.push((error) =>
          error
            ? resume(Effect.fail(new SqlError({ cause: error, message: "Failed to acquire connection" })))
            : send(on, text, values, resume)
        )
      })

    const run = <A extends object>(statement: Statement.Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError> =>
      Effect.flatMap(Effect.serviceOption(TransactionConnection), (transaction) => {
        // Inside a transaction a statement is the transaction's: the client runs it on the transaction's connection.
        if (Option.isSome(transaction)) return statement
        const [text, values] = statement.compile(true)
        // The database's span, as the client's own statements have (exported when telemetry asks for them).
        return Effect.useSpan("sql.execute", { kind: "client", captureStackTrace: false }, (span) => {
          for (const [key, value] of attributes) span.attribute(key, value)
          span.attribute("db.query.text", text)
          if (Driver !== undefined) return execute<A>(Driver, text, values)
          return Effect.flatMap(driverClass(sql), (Class) => execute<A>(Driver = Class, text, values))
        })
      })
    return { run }
  })
