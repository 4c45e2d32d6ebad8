/** Claims files that open but cannot be written, for the store's start-up check (design: Delivery dedupe). */
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { Idempotency } from "../../src/index.js"
import { sqliteClient } from "./sqlClient.js"

/** A claims file made by `Idempotency.layerSql` (tables and migrations there), in a temp folder the scope removes. */
export const claimsFile = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-claims-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(
  Effect.map((dir) => join(dir, "claims.sqlite")),
  Effect.tap((file) => Effect.scoped(Layer.build(Idempotency.layerSql({ filename: file })))),
  Effect.orDie
)

/**
 * Runs `effect` while `file` cannot be written: mode 0444 and, as root ignores file modes, with the
 * effective user nobody (uid 65534) when the tests run as root; SQLite then opens the file read-only,
 * as it would for a service user given a file it does not own. The folder stays writable (as a data
 * folder would be), so SQLite makes its WAL files and opening and migrating pass: only a write fails.
 */
export const readOnly = <A, E, R>(file: string, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      chmodSync(file, 0o444)
      chmodSync(dirname(file), 0o777)
      const root = process.getuid?.() === 0
      if (root) process.seteuid!(65534)
      return root
    }),
    () => effect,
    (root) =>
      Effect.sync(() => {
        if (root) process.seteuid!(0)
      })
  )

/** Drops the claims table of `file`: the migrations table still says it exists, so it is not made again. */
export const dropClaimsTable = (file: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DROP TABLE tool_claims`).pipe(
    Effect.provide(sqliteClient(file)),
    Effect.orDie
  )
