/**
 * The journal's pipeline on PostgreSQL (internal/sql/pipelined.ts), on the project's test PostgreSQL: statements of
 * many fibers at once each get their own answer, prepared once on one connection; one that fails fails alone; a
 * statement inside a transaction is the transaction's (rolled back with it); a connection the server ended is
 * opened again on the next statement.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Either, Layer } from "effect"
import * as Pipelined from "../../../src/internal/sql/pipelined.js"
import * as Store from "../../../src/internal/sql/store.js"
import * as Pg from "../../support/postgres.js"

const setup = Effect.gen(function*() {
  const server = yield* Pg.postgres()
  const sql = Context.get(yield* Layer.build(Pg.pgClient(server.url, { applicationName: "pipelined-test" })), PgClient.PgClient)
  yield* sql`CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT NOT NULL)`
  const pipeline = yield* Pipelined.make(sql)
  assert.isDefined(pipeline)
  return { sql, pipeline: pipeline! }
})

describe("the journal's pipeline on PostgreSQL", () => {
  it.live("200 statements from 50 fibers at once: each its own answer, prepared once, on one connection of its own", () =>
    Effect.gen(function*() {
      const { pipeline, sql } = yield* setup
      const answers = yield* Effect.forEach(
        Array.from({ length: 200 }, (_, i) => i),
        (i) => pipeline.run(sql<{ readonly id: number; readonly label: string }>`INSERT INTO items (id, label)
          VALUES (${i}, ${`item ${i}`}) RETURNING id, label`),
        { concurrency: 50 }
      )
      assert.deepStrictEqual(answers.map((rows) => rows[0]), Array.from({ length: 200 }, (_, i) => ({ id: i, label: `item ${i}` })))
      const count = yield* sql<{ readonly n: number }>`SELECT COUNT(*)::int AS n FROM items`
      assert.strictEqual(count[0]?.n, 200)
      // One prepared statement on the pipeline's connection, which is one more than the pool's, under the client's name.
      const prepared = yield* pipeline.run(sql<{ readonly n: number }>`SELECT COUNT(*)::int AS n FROM pg_prepared_statements`)
      assert.strictEqual(prepared[0]?.n, 2)
      const connections = yield* sql<{ readonly n: number }>`SELECT COUNT(*)::int AS n FROM pg_stat_activity
        WHERE application_name = 'pipelined-test'`
      assert.isAtLeast(connections[0]!.n, 2)
    }).pipe(Effect.scoped), 60_000)

  it.live("a statement that fails fails alone: those pipelined beside it commit", () =>
    Effect.gen(function*() {
      const { pipeline, sql } = yield* setup
      const results = yield* Effect.forEach(
        [1, 2, 2, 3],
        (id) => Effect.either(pipeline.run(sql`INSERT INTO items (id, label) VALUES (${id}, 'x')`)),
        { concurrency: "unbounded" }
      )
      // The two inserts of id 2 are pipelined in either order: one of them fails, the rest commit.
      assert.deepStrictEqual([results[0]!, results[3]!].map((result) => Either.isRight(result)), [true, true])
      const failures = results.filter(Either.isLeft)
      assert.strictEqual(failures.length, 1)
      assert.include(String((failures[0]!.left.cause as Error).message), "duplicate key")
      const rows = yield* sql<{ readonly id: number }>`SELECT id FROM items ORDER BY id`
      assert.deepStrictEqual(rows.map((r) => r.id), [1, 2, 3])
    }).pipe(Effect.scoped), 60_000)

  it.live("inside a transaction a statement is the transaction's: rolled back with it", () =>
    Effect.gen(function*() {
      const { pipeline, sql } = yield* setup
      const failed = yield* Effect.either(sql.withTransaction(Effect.zipRight(
        pipeline.run(sql`INSERT INTO items (id, label) VALUES (1, 'in the transaction')`),
        Effect.fail("rolled back")
      )))
      assert.isTrue(Either.isLeft(failed))
      const count = yield* sql<{ readonly n: number }>`SELECT COUNT(*)::int AS n FROM items`
      assert.strictEqual(count[0]?.n, 0)
    }).pipe(Effect.scoped), 60_000)

  it.live("its connection ended by the server: the statement in flight fails as unreachable, the next opens another", () =>
    Effect.gen(function*() {
      const { pipeline, sql } = yield* setup
      const pid = (yield* pipeline.run(sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`))[0]?.pid
      const inFlight = yield* Effect.fork(Effect.either(pipeline.run(sql`SELECT pg_sleep(5)`)))
      yield* Effect.sleep("200 millis")
      yield* sql`SELECT pg_terminate_backend(${pid})`
      const lost = yield* inFlight.await.pipe(Effect.flatten)
      assert.isTrue(Either.isLeft(lost) && Store.isUnreachable(lost.left), String(lost))
      const [again] = yield* pipeline.run(sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`)
      assert.notStrictEqual(again?.pid, pid)
      // Through whileBusy (the journal's writes): retried past the break.
      const written = yield* Store.whileBusy(pipeline.run(sql`INSERT INTO items (id, label) VALUES (7, 'after') RETURNING id`))
      assert.strictEqual(written.length, 1)
    }).pipe(Effect.scoped), 60_000)

  it.effect("another client (SQLite) has none", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      assert.isUndefined(yield* Pipelined.make(sql))
    }).pipe(Effect.scoped, Effect.provide(Store.layerSqlite(":memory:", (reason) => reason))))
})
