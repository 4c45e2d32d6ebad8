// @effect-diagnostics globalErrorInEffectFailure:off
import { Migrator, SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Fiber, Layer, Schedule, Schema, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Idempotency, Invocation, Timing, Tool, ToolContext } from "../src/index.js"
import { Serve } from "../src/exports/serve.js"
import * as ClaimsSql from "../src/internal/sql/claims.js"
import * as JournalSql from "../src/internal/sql/journal.js"
import * as Journal from "../src/Journal.js"
import { claimsFile, dropClaimsTable, readOnly } from "./support/claimsFile.js"
import { sqliteClient, unnamedClient } from "./support/sqlClient.js"
import { record, scale } from "./support/figures.js"
import { ToolResult } from "../src/ToolResult.js"

const store = Idempotency.Idempotency
const key = { taskId: "task-1", toolCallId: "call-1" }
const claim = { toolName: "count", timeout: Duration.seconds(30), idempotent: false }

const counter = () => {
  const runs = { count: 0 }
  const tool = Tool.make("count", { description: "Counts.", input: {}, output: Schema.Number, timeout: "30 seconds" }, () =>
    Effect.sync(() => ++runs.count))
  return { runs, tool }
}

/** A fresh SQLite file in a temp folder, removed after the test. */
const tempDb = Effect.acquireRelease(
  Effect.sync(() => {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-claims-"))
    return { dir, file: join(dir, "claims.sqlite") }
  }),
  ({ dir }) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map(({ file }) => file))

/** The SQLite store on a temp file, lease 1 s. */
const sqlStore = (file: string) => Idempotency.layerSql({ filename: file, lease: "1 second", poll: "50 millis" })

const stores: ReadonlyArray<readonly [string, Effect.Effect<Layer.Layer<Idempotency.Idempotency, Idempotency.StoreUnavailable>, never, import("effect").Scope.Scope>]> = [
  ["memory", Effect.succeed(Idempotency.layerMemory)],
  ["SQLite", Effect.map(tempDb, sqlStore)]
]

/** Runs `body` with the store built in this scope. */
const withStore = <A, E>(
  make: (typeof stores)[number][1],
  body: Effect.Effect<A, E, Idempotency.Idempotency>
) => Effect.scoped(Effect.flatMap(make, (layer) => Effect.provide(body, layer)))

for (const [name, make] of stores) {
  describe(`Idempotency (design: Delivery dedupe), ${name} store`, () => {
    it.effect("claim, complete, reuse: a redelivery runs nothing and gets the same result", () =>
      withStore(make, Effect.gen(function*() {
        const { runs, tool } = counter()
        const dedupe = yield* store
        const first = yield* dedupe.once(key, claim, Invocation.run(tool, "{}", key))
        const second = yield* dedupe.once(key, claim, Invocation.run(tool, "{}", key))
        assert.strictEqual(runs.count, 1)
        assert.deepStrictEqual([first.reused, second.reused], [false, true])
        assert.deepStrictEqual([first.result.value, second.result.value], [1, 1])
      })))

    it.effect("the key is the pair, never either half", () =>
      withStore(make, Effect.gen(function*() {
        const { runs, tool } = counter()
        const dedupe = yield* store
        yield* dedupe.once(key, claim, Invocation.run(tool, "{}"))
        yield* dedupe.once({ ...key, taskId: "task-2" }, claim, Invocation.run(tool, "{}"))
        yield* dedupe.once({ ...key, toolCallId: "call-2" }, claim, Invocation.run(tool, "{}"))
        assert.strictEqual(runs.count, 3)
      })))

    it.effect("two fibers claiming the same key run the handler once", () =>
      withStore(make, Effect.gen(function*() {
        let runs = 0
        const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "30 seconds" }, () =>
          Effect.suspend(() => Effect.as(Effect.sleep("5 seconds"), ++runs)))
        const dedupe = yield* store
        const first = yield* Effect.fork(dedupe.once(key, claim, Invocation.run(slow, "{}", key)))
        yield* TestClock.adjust("1 second")
        const second = yield* Effect.fork(dedupe.once(key, claim, Invocation.run(slow, "{}", key)))
        yield* TestClock.adjust("5 seconds")
        const [a, b] = [yield* Fiber.join(first), yield* Fiber.join(second)]
        assert.strictEqual(runs, 1)
        assert.deepStrictEqual([a.reused, b.reused, a.result.value, b.result.value], [false, true, 1, 1])
      })))

    it.effect("an expired redelivery is refused unrun", () =>
      withStore(make, Effect.gen(function*() {
        const { runs, tool } = counter()
        yield* TestClock.adjust("1 minute")
        const { result } = yield* (yield* store).once(key, claim, Invocation.run(tool, "{}", { ...key, deadlineAt: 30_000 }))
        assert.strictEqual(result.error, "count: its deadline passed before it started; it did not run")
        assert.strictEqual(runs.count, 0)
      })))

    it.effect("entries are removed once their tool's timeout has passed", () =>
      withStore(make, Effect.gen(function*() {
        const dedupe = yield* store
        const done = Effect.succeed(ToolResult.failure("x"))
        for (let i = 0; i < 50; i++) yield* dedupe.once({ taskId: "t", toolCallId: `c${i}` }, claim, done)
        assert.strictEqual(yield* dedupe.size, 50)
        yield* TestClock.adjust("29 seconds")
        assert.strictEqual(yield* dedupe.size, 50)
        yield* TestClock.adjust("2 seconds")
        assert.strictEqual(yield* dedupe.size, 0)
      })))

    it.effect("an idempotent call interrupted inside its handler keeps its claim: later deliveries read outcome unknown", () =>
      withStore(make, Effect.gen(function*() {
        let runs = 0
        const refund = Tool.make("refund", { description: "Refunds.", input: {}, timeout: "30 seconds", idempotent: true }, () =>
          Effect.suspend(() => (runs++, Effect.as(Effect.sleep("5 seconds"), "refunded"))))
        const dedupe = yield* store
        const delivery = () => {
          let started = false
          const run = Invocation.run(refund, "{}", { ...key, onStart: () => void (started = true) })
          return dedupe.once(key, { ...claim, toolName: "refund", idempotent: true, started: () => started }, run)
        }
        const first = yield* Effect.fork(delivery())
        yield* TestClock.adjust("1 second")
        yield* Fiber.interrupt(first)
        const again = yield* delivery()
        assert.strictEqual(runs, 1)
        assert.strictEqual(again.result.error, "refund: the earlier attempt was interrupted; its outcome is unknown")
        assert.strictEqual(again.result.error, Idempotency.interruptedUnknown("refund"))
        // Read back from the SQLite file, only the text is known (as from the wire).
        assert.strictEqual(again.result.failure?._tag, dedupe.durable ? "Unclassified" : "OutcomeUnknown")
      })))

    it.effect("a call interrupted before its handler started is released: the next delivery runs it", () =>
      withStore(make, Effect.gen(function*() {
        const { runs, tool } = counter()
        const dedupe = yield* store
        const idempotent = { ...claim, idempotent: true }
        // Interrupted while a hook (an approval, say) held it: the handler never started.
        const first = yield* Effect.fork(dedupe.once(key, { ...idempotent, started: () => false }, Effect.never))
        yield* TestClock.adjust("1 second")
        yield* Fiber.interrupt(first)
        const second = yield* dedupe.once(key, { ...idempotent, started: () => true }, Invocation.run(tool, "{}", key))
        assert.deepStrictEqual([runs.count, second.result.value, second.reused], [1, 1, false])
      })))

    it.effect("retries see attempt 1..n, back to 1 on a redelivery that runs again", () =>
      withStore(make, Effect.gen(function*() {
        const attempts: Array<number> = []
        const flaky = Tool.make("flaky", { description: "Flaky.", input: {}, timeout: "30 seconds", retries: 2 }, () =>
          Effect.flatMap(ToolContext.ToolContext, (ctx) => {
            attempts.push(ctx.attempt)
            return ctx.attempt < 3 ? Effect.fail(new Error("not yet")) : Effect.succeed("ok")
          }))
        const dedupe = yield* store
        // The first delivery is interrupted mid-way (its stream went away); the tool is not idempotent, so its
        // claim is released and the next delivery runs it again.
        const first = yield* Effect.fork(dedupe.once(key, claim, Invocation.run(flaky, "{}", key)))
        yield* TestClock.adjust("150 millis")
        yield* Fiber.interrupt(first)
        assert.deepStrictEqual(attempts, [1, 2])
        const second = yield* Effect.fork(dedupe.once(key, claim, Invocation.run(flaky, "{}", key)))
        yield* TestClock.adjust("1 second")
        const { result, reused } = yield* Fiber.join(second)
        assert.deepStrictEqual([result.value, reused], ["ok", false])
        assert.deepStrictEqual(attempts, [1, 2, 1, 2, 3])
      }).pipe(Effect.provide(Timing.layer({ toolRetry: Schedule.spaced("100 millis") })))))
  })
}

for (const [name, make, unique] of [
  ["memory", stores[0]![1], 10_000],
  ["SQLite", stores[1]![1], scale(1_000, 10_000)]
] as const) {
  describe(`duplicate storm, ${name} store`, () => {
    it.live(`${unique} calls, 30% delivered again (some while the first still runs): side effects = unique calls`, () =>
      withStore(make, Effect.gen(function*() {
        let effects = 0
        const tool = Tool.make("charge", { description: "Charges.", input: { n: Schema.Number }, timeout: "30 seconds" }, ({ n }) =>
          // Yield mid-way, so that redeliveries arrive while the first delivery is still running.
          Effect.zipRight(Effect.yieldNow(), Effect.sync(() => (effects++, `charged ${n}`))))
        const dedupe = yield* store
        const deliveries: Array<number> = Array.from({ length: unique }, (_, i) => i)
        for (let i = 0; i < unique * 0.3; i++) deliveries.push(Math.floor(Math.random() * unique))
        deliveries.sort(() => Math.random() - 0.5)
        const results = yield* Effect.forEach(deliveries, (n) =>
          dedupe.once({ taskId: "storm", toolCallId: `c${n}` }, { ...claim, toolName: "charge" }, Invocation.run(tool, { n }))
            .pipe(Effect.map(({ result }) => [n, result.value] as const)), { concurrency: 64 })
        record({ suite: "duplicate storm", measure: `${name} store: delivered calls`, value: deliveries.length })
        record({ suite: "duplicate storm", measure: `${name} store: unique calls`, value: unique })
        record({ suite: "duplicate storm", measure: `${name} store: side effects`, value: effects, expected: `= unique calls (${unique})` })
        assert.strictEqual(effects, unique)
        for (const [n, value] of results) assert.strictEqual(value, `charged ${n}`)
        assert.strictEqual(results.length, Math.ceil(unique * 1.3))
      })), scale(60_000, 600_000))
  })
}

describe("Idempotency.layerMemory", () => {
  it.effect("10,000 completed calls leave the store empty once their timeouts pass", () =>
    withStore(Effect.succeed(Idempotency.layerMemory), Effect.gen(function*() {
      const dedupe = yield* store
      const done = Effect.succeed(ToolResult.failure("x"))
      for (let i = 0; i < 10_000; i++) yield* dedupe.once({ taskId: "t", toolCallId: `c${i}` }, claim, done)
      assert.strictEqual(yield* dedupe.size, 10_000)
      yield* TestClock.adjust("31 seconds")
      assert.strictEqual(yield* dedupe.size, 0)
    })), 120_000)
})

/** Writes the pending claim of a process that died mid-call, straight into the file. */
const deadClaim = (file: string, leaseUntil: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO tool_claims (task_id, tool_call_id, tool_name, owner, state, lease_expires_at, expires_at, outcome)
      VALUES (${key.taskId}, ${key.toolCallId}, 'count', 'dead-process', 'pending', ${leaseUntil}, 30000, NULL)`
  }).pipe(Effect.provide(sqliteClient(file)), Effect.orDie)

describe("Idempotency.layerSql", () => {
  it.effect("a claim whose owner died is re-run after its lease for a tool that is not idempotent", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* tempDb
      const { runs, tool } = counter()
      const { result, reused } = yield* Effect.gen(function*() {
        yield* deadClaim(file, 1_000)
        const dedupe = yield* store
        const fiber = yield* Effect.fork(dedupe.once(key, claim, Invocation.run(tool, "{}", key)))
        yield* TestClock.adjust("900 millis")
        assert.strictEqual(runs.count, 0, "the lease is still live")
        yield* TestClock.adjust("200 millis")
        return yield* Fiber.join(fiber)
      }).pipe(Effect.provide(sqlStore(file)))
      assert.deepStrictEqual([result.value, reused, runs.count], [1, false, 1])
    })))

  it.effect("for an idempotent tool the answer is \"outcome unknown\", and it stays the answer", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* tempDb
      const { runs, tool } = counter()
      yield* Effect.gen(function*() {
        yield* deadClaim(file, 1_000)
        const dedupe = yield* store
        const idempotent = { ...claim, idempotent: true }
        const fiber = yield* Effect.fork(dedupe.once(key, idempotent, Invocation.run(tool, "{}", key)))
        yield* TestClock.adjust("1100 millis")
        const first = yield* Fiber.join(fiber)
        const again = yield* dedupe.once(key, idempotent, Invocation.run(tool, "{}", key))
        assert.strictEqual(first.result.error, "count: the earlier attempt did not finish; its outcome is unknown")
        assert.deepStrictEqual([again.result.error, again.reused], [first.result.error, true])
      }).pipe(Effect.provide(sqlStore(file)))
      assert.strictEqual(runs.count, 0)
    })))

  it.effect("a lease is renewed while its call runs: another process waits instead of taking over", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* tempDb
      let runs = 0
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "30 seconds" }, () =>
        Effect.suspend(() => Effect.as(Effect.sleep("10 seconds"), ++runs)))
      // Two stores on one file: two processes.
      const [a, b] = yield* Effect.all([
        Effect.map(Layer.build(sqlStore(file)), Context.get(store)),
        Effect.map(Layer.build(sqlStore(file)), Context.get(store))
      ])
      const first = yield* Effect.fork(a.once(key, claim, Invocation.run(slow, "{}", key)))
      yield* TestClock.adjust("100 millis")
      const second = yield* Effect.fork(b.once(key, claim, Invocation.run(slow, "{}", key)))
      for (let i = 0; i < 10; i++) yield* TestClock.adjust("1 second")
      const [x, y] = [yield* Fiber.join(first), yield* Fiber.join(second)]
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual([x.result.value, y.result.value, y.reused], [1, 1, true])
    })))

  it.effect("a store that cannot be opened fails, naming the path", () =>
    Effect.gen(function*() {
      const path = join(tmpdir(), "no-such-dir-agent-tools", "claims.sqlite")
      const error = yield* Effect.flip(Effect.scoped(Layer.build(Idempotency.layerSql({ filename: path }))))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.include(error.message, path)
    }))

  // Both files open and migrate (the migration is recorded as done): before the start-up probe,
  // each store started, and every call then died at its first claim.
  it.effect("a read-only file fails at start-up, naming the file and why", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* claimsFile
      const open = Effect.scoped(Layer.build(Idempotency.layerSql({ filename: file })))
      const error = yield* readOnly(file, Effect.flip(open))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.strictEqual(
        error.message,
        `the idempotency store ${file} cannot be used: a claim cannot be written: attempt to write a readonly database`
      )
    })))

  it.effect("a file whose claims table was dropped fails at start-up, naming the file and why", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* claimsFile
      yield* dropClaimsTable(file)
      const error = yield* Effect.flip(Effect.scoped(Layer.build(Idempotency.layerSql({ filename: file }))))
      assert.strictEqual(
        error.message,
        `the idempotency store ${file} cannot be used: a claim cannot be written: no such table: tool_claims`
      )
    })))

  it.effect("outcomes in the format rows have always had: {value} and {error} read back, and are written so", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* claimsFile
      const at = (toolCallId: string) => ({ taskId: "task-1", toolCallId })
      // Completed rows as the code before the Schema wrote them: JSON.stringify of { value } or { error }.
      const [value, error] = [JSON.stringify({ value: { n: 7, items: [1] } }), JSON.stringify({ error: "count: boom" })]
      yield* onFile(file, Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql`INSERT INTO tool_claims
          (task_id, tool_call_id, tool_name, owner, state, lease_expires_at, expires_at, outcome) VALUES
          ('task-1', 'call-ok', 'count', 'old', 'completed', 0, 30000, ${value}),
          ('task-1', 'call-failed', 'count', 'old', 'completed', 0, 30000, ${error})`))
      const { runs, tool } = counter()
      const [ok, failed] = yield* Effect.gen(function*() {
        const dedupe = yield* store
        const reused = [
          yield* dedupe.once(at("call-ok"), claim, Invocation.run(tool, "{}")),
          yield* dedupe.once(at("call-failed"), claim, Invocation.run(tool, "{}"))
        ]
        yield* dedupe.once(at("call-new-ok"), claim, Invocation.run(tool, "{}"))
        yield* dedupe.once(at("call-new-failed"), claim, Effect.succeed(ToolResult.failure("count: new")))
        return reused
      }).pipe(Effect.provide(sqlStore(file)))
      assert.deepStrictEqual([ok!.reused, ok!.result.success, ok!.result.value], [true, true, { n: 7, items: [1] }])
      assert.deepStrictEqual(
        [failed!.reused, failed!.result.error, failed!.result.value],
        [true, "count: boom", undefined]
      )
      assert.strictEqual(runs.count, 1, "only the new call ran")
      const rows = yield* onFile(file, Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ readonly tool_call_id: string; readonly outcome: string }>`SELECT tool_call_id, outcome FROM tool_claims
          WHERE tool_call_id LIKE 'call-new-%' ORDER BY tool_call_id`))
      assert.deepStrictEqual(rows.map((row) => [row.tool_call_id, row.outcome]), [
        ["call-new-failed", "{\"error\":\"count: new\"}"],
        ["call-new-ok", "{\"value\":1}"]
      ])
    })))

  it.effect("the start-up probe leaves no claim behind", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* claimsFile
      assert.strictEqual(yield* Effect.flatMap(store, (dedupe) => dedupe.size).pipe(Effect.provide(sqlStore(file))), 0)
    })))
})

describe("Idempotency.layerSql: a new file two processes open at once", () => {
  // The migrator finds another process running the migrations (a write it cannot make at once) and leaves them
  // to it, returning before that process commits: the store must wait for the tables, not go past them.
  it.live("the one that finds the other migrating waits until the other's tables are committed", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* tempDb
      // The other process, mid-migration: its migrations table made, then its write lock held.
      const other = Context.get(yield* Layer.build(sqliteClient(file)), SqlClient.SqlClient)
      yield* other.unsafe(`CREATE TABLE ${ClaimsSql.migrationsTable} (
        migration_id integer PRIMARY KEY NOT NULL,
        created_at datetime NOT NULL DEFAULT current_timestamp,
        name VARCHAR(255) NOT NULL
      )`)
      yield* other.unsafe("BEGIN IMMEDIATE")
      yield* other.unsafe(`INSERT INTO ${ClaimsSql.migrationsTable} (migration_id, name) VALUES (1, 'create_tool_claims'), (2, 'create_held_tasks')`)
      const opening = yield* Effect.fork(Effect.scoped(Effect.flatMap(Layer.build(sqlStore(file)), (context) =>
        Context.get(context, store).once(key, claim, Effect.succeed(new ToolResult(7, undefined))))))
      yield* Effect.sleep("300 millis")
      yield* Effect.forEach(Object.values(ClaimsSql.migrations), (migration) => Effect.provideService(migration, SqlClient.SqlClient, other))
      yield* other.unsafe("COMMIT")
      const outcome = yield* Fiber.join(opening)
      assert.deepStrictEqual([outcome.result.value, outcome.reused], [7, false])
    })))
})

describe("Idempotency.layerSqlClient", () => {
  it.effect("on a client given: claims kept; a read-only file fails at start-up, naming the client's file", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* claimsFile
      const onClient = Idempotency.layerSqlClient().pipe(Layer.provide(sqliteClient(file)))
      assert.deepStrictEqual(yield* claimRoundTrip(onClient), [1, true, 1])
      const error = yield* readOnly(file, Effect.flip(Effect.scoped(Layer.build(onClient))))
      assert.strictEqual(
        error.message,
        `the idempotency store ${file} cannot be used: a claim cannot be written: attempt to write a readonly database`
      )
    })))

  it.effect("a client that names no database: the error says what kind of client it is", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* claimsFile
      yield* dropClaimsTable(file)
      const layer = Idempotency.layerSqlClient().pipe(Layer.provide(unnamedClient(file)))
      const error = yield* Effect.flip(Effect.scoped(Layer.build(layer)))
      assert.strictEqual(
        error.message,
        "the idempotency store on a SQLite client cannot be used: a claim cannot be written: no such table: tool_claims"
      )
    })))
})

/** Runs `body` on a connection of its own to `file`: another module, or the code of an older version. */
const onFile = <A, E>(file: string, body: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  body.pipe(Effect.provide(sqliteClient(file)), Effect.orDie)

const tablesOf = (file: string) =>
  onFile(
    file,
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ readonly name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
  ).pipe(Effect.map((rows) => rows.map((row) => row.name)))

/** A claim stored and read back: [first outcome, second delivery reused, handler runs]. */
const claimRoundTrip = (on: string | Layer.Layer<Idempotency.Idempotency, Idempotency.StoreUnavailable>) =>
  Effect.gen(function*() {
    const { runs, tool } = counter()
    const dedupe = yield* store
    const first = yield* dedupe.once(key, claim, Invocation.run(tool, "{}", key))
    const second = yield* dedupe.once(key, claim, Invocation.run(tool, "{}", key))
    return [first.result.value, second.reused, runs.count]
  }).pipe(Effect.provide(typeof on === "string" ? sqlStore(on) : on))

/** The journal in `file`, open for as long as the scope lives. */
const openJournal = (file: string) =>
  Effect.map(Layer.build(Journal.layerSql({ filename: file })), Context.get(Journal.Journal))

/** A task journaled and read back: the ids and prompts of the open tasks. */
const journalRoundTrip = (on: string | Layer.Layer<Journal.Journal, Journal.JournalUnavailable>, taskId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const journal = typeof on === "string" ? yield* openJournal(on) : yield* Journal.Journal.pipe(Effect.provide(on))
    const task = { runId: taskId, kind: "task" as const, agentId: "agent-1", processId: "process-1", prompt: `prompt of ${taskId}`, tools: [] }
    yield* journal.started(task)
    const { open } = yield* journal.tasks(0)
    return open.map((task) => [task.runId, task.prompt])
  }))

describe("claims and the platform journal in one SQLite file", () => {
  for (const first of ["claims", "journal"] as const) {
    it.effect(`${first} opened first, the other beside it: both modules' tables exist and work`, () =>
      Effect.scoped(Effect.gen(function*() {
        const file = yield* tempDb
        // Each keeps the file open while the other migrates, as two modules of one process would.
        if (first === "claims") yield* Layer.build(sqlStore(file))
        else yield* openJournal(file)
        assert.deepStrictEqual(yield* claimRoundTrip(file), [1, true, 1])
        assert.deepStrictEqual(yield* journalRoundTrip(file, "task-a"), [["task-a", "prompt of task-a"]])
        const tables = yield* tablesOf(file)
        for (const table of ["tool_claims", "journal_tasks", "journal_turns", "journal_calls"]) {
          assert.include(tables, table)
        }
        assert.includeMembers(tables, [ClaimsSql.migrationsTable, JournalSql.migrationsTable])
        assert.notInclude(tables, "effect_sql_migrations")
      })))
  }

  it.effect("both on one SqlClient (its result names in camelCase): each module's tables, both working", () =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* tempDb
      // An application's client, with its own settings: the stores read rows by their column names all the same.
      const client = yield* Layer.memoize(sqliteClient(file, { camelCase: true }))
      const claims = Idempotency.layerSqlClient().pipe(Layer.provide(client))
      const journal = Journal.layerSqlClient.pipe(Layer.provide(client))
      assert.deepStrictEqual(yield* claimRoundTrip(claims), [1, true, 1])
      const held = Effect.flatMap(Serve.HeldTasks, (tasks) =>
        Effect.zipRight(tasks.holdTask("agent-1", "task-a"), tasks.heldTasks("agent-1")))
      assert.deepStrictEqual(yield* Effect.provide(held, Serve.layerHeldTasksSqlClient.pipe(Layer.provide(client))), ["task-a"])
      assert.deepStrictEqual(yield* journalRoundTrip(journal, "task-a"), [["task-a", "prompt of task-a"]])
      assert.includeMembers(yield* tablesOf(file), [
        "tool_claims",
        "journal_tasks",
        ClaimsSql.migrationsTable,
        JournalSql.migrationsTable
      ])
    })))

  for (const old of ["claims", "journal"] as const) {
    it.effect(`a file whose ${old} were migrated by the old code, in the default migrations table, still opens`, () =>
      Effect.scoped(Effect.gen(function*() {
        const file = yield* tempDb
        // What the old code left: its migration 1 in `effect_sql_migrations`, its tables, a row.
        yield* onFile(file, Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          // The old code had the journal's first migration only.
          const migrations = old === "claims"
            ? ClaimsSql.migrations
            : { "0001_create_journal": JournalSql.migrations["0001_create_journal"] }
          yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations) })
          if (old === "claims") {
            yield* sql`INSERT INTO tool_claims
              (task_id, tool_call_id, tool_name, owner, state, lease_expires_at, expires_at, outcome)
              VALUES (${key.taskId}, ${key.toolCallId}, 'count', 'old-process', 'completed', 0, 30000, '{"value":7}')`
          } else {
            yield* sql`INSERT INTO journal_tasks (task_id, agent_id, process_id, prompt, tools, status, final, ended_at)
              VALUES ('task-old', 'agent-1', 'process-0', 'prompt of task-old', '[]', 'running', NULL, NULL)`
          }
        }))
        if (old === "claims") {
          // The old claim is still there: its outcome is reused, the handler never runs.
          assert.deepStrictEqual(yield* claimRoundTrip(file), [7, true, 0])
          assert.deepStrictEqual(yield* journalRoundTrip(file, "task-a"), [["task-a", "prompt of task-a"]])
        } else {
          assert.deepStrictEqual(yield* claimRoundTrip(file), [1, true, 1])
          // Both tasks, in no order that matters (made at the same time on the TestClock).
          assert.sameDeepMembers(
            yield* journalRoundTrip(file, "task-a"),
            [["task-old", "prompt of task-old"], ["task-a", "prompt of task-a"]]
          )
        }
        assert.includeMembers(yield* tablesOf(file), ["tool_claims", "journal_tasks", "effect_sql_migrations"])
      })))
  }
})
