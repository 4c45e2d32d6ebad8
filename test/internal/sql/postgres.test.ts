/**
 * The PostgreSQL layer (internal/sql/postgres.ts) on the project's test PostgreSQL: statements handed together to
 * one reserved connection (the cluster engine's shard locks share one) run one after another, so `pg` prints no
 * deprecation warning (it did at every runner's start); the driver's own client, for contrast, does.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import * as Postgres from "../../../src/internal/sql/postgres.js"
import { postgres } from "../../support/postgres.js"

/** The deprecation warnings the process emits while `effect` runs (`pg` says each once per process). */
const deprecations = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const seen: Array<string> = []
      const listener = (warning: Error) => {
        if (warning.name === "DeprecationWarning") seen.push(warning.message)
      }
      process.on("warning", listener)
      return { seen, listener }
    }),
    ({ seen }) => Effect.as(Effect.zipRight(effect, Effect.sleep("100 millis")), seen),
    ({ listener }) => Effect.sync(() => process.off("warning", listener))
  )

/** Five statements at once on one reserved connection of the client in context; their answers. */
const together = Effect.scoped(Effect.gen(function*() {
  const connection = yield* (yield* SqlClient.SqlClient).withoutTransforms().reserve
  return yield* Effect.forEach(
    [1, 2, 3, 4, 5],
    (n) => connection.executeValues(`SELECT ${n} FROM pg_sleep(0.02)`, []),
    { concurrency: "unbounded" }
  )
}))

describe("the PostgreSQL layer", () => {
  it.live("statements handed together to one reserved connection run in turn, with no deprecation warning", () =>
    Effect.gen(function*() {
      const server = yield* postgres()
      const ours = yield* deprecations(Effect.provide(together, Postgres.layer(server.url)))
      assert.deepStrictEqual(ours, [])
      const answers = yield* Effect.provide(together, Postgres.layer(server.url))
      assert.deepStrictEqual(answers.map((rows) => Number(rows[0]?.[0])), [1, 2, 3, 4, 5])
      // The driver's client as it comes: the same statements queue in `pg`, which warns.
      const plain = PgClient.layer({ url: Redacted.make(server.url) }).pipe(Layer.orDie)
      const theirs = yield* deprecations(Effect.provide(together, plain))
      assert.strictEqual(theirs.length, 1)
      assert.include(theirs[0], "already executing a query")
    }).pipe(Effect.scoped), 60_000)
})
