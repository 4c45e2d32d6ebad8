/**
 * The SQL stores on a real PostgreSQL (started by test/support/postgres.ts), unchanged: the claims of
 * delivery dedupe and the platform's journal, through `layerSqlClient` on an `@effect/sql-pg` client.
 * PostgreSQL returns BIGINT and COUNT(*) as strings: what the stores give back must still be numbers.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { assert, layer } from "@effect/vitest"
import { Context, Duration, Effect, Layer } from "effect"
import { Idempotency } from "../src/index.js"
import { Serve } from "../src/exports/serve.js"
import * as Journal from "../src/Journal.js"
import * as JournalSql from "../src/internal/sql/journal.js"
import { ToolResult } from "../src/ToolResult.js"
import * as Pg from "./support/postgres.js"

const claim = { toolName: "count", timeout: Duration.seconds(30), idempotent: false }

/** A claims store on the server's database: each build is another process's store. */
const claims = Idempotency.layerSqlClient({ lease: "10 seconds", poll: "10 millis" })
const openStore = Effect.map(Layer.build(claims), Context.get(Idempotency.Idempotency))

// One server for the file; the live clock (the stores poll and lease in real time).
layer(Pg.layer(), { timeout: "60 seconds", excludeTestServices: true })("stores on PostgreSQL", (it) => {
  it.effect("the server is fresh and says so: its URL, its database, a start time", () =>
    Effect.gen(function*() {
      const server = yield* Pg.Postgres
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ readonly db: string; readonly version: string }>`SELECT
        current_database() AS db, current_setting('server_version_num') AS version`
      assert.strictEqual(row?.db, server.database)
      assert.isAtLeast(Number(row?.version), 180000)
      assert.match(server.url, /^postgres:\/\/postgres:[0-9a-f]+@127\.0\.0\.1:\d+\/agent_tools_test$/)
      assert.isAbove(server.startMillis, 0)
    }))

  it.scoped("claims: 50 keys x 8 concurrent deliveries, one owner per key; a completed outcome read back", () =>
    Effect.gen(function*() {
      const runs = new Map<string, number>()
      const keys = Array.from({ length: 50 }, (_, i) => ({ taskId: "task-concurrent", toolCallId: `call-${i}` }))
      // Two stores on one database: two serving processes, each with four deliveries of every key.
      const [a, b] = yield* Effect.all([openStore, openStore])
      const deliveries = keys.flatMap((key) => Array.from({ length: 8 }, (_, i) => ({ key, store: i % 2 === 0 ? a : b })))
      const results = yield* Effect.forEach(deliveries, ({ key, store }) =>
        store.once(key, claim, Effect.sync(() => {
          const n = (runs.get(key.toolCallId) ?? 0) + 1
          runs.set(key.toolCallId, n)
          return ToolResult.success({ call: key.toolCallId, run: n })
        }).pipe(Effect.delay("20 millis"))), { concurrency: "unbounded" })
      for (const key of keys) assert.strictEqual(runs.get(key.toolCallId), 1, key.toolCallId)
      for (const [i, key] of keys.entries()) {
        const mine = results.slice(i * 8, i * 8 + 8)
        assert.strictEqual(mine.filter((r) => !r.reused).length, 1, `one owner of ${key.toolCallId}`)
        for (const r of mine) assert.deepStrictEqual(r.result.value, { call: key.toolCallId, run: 1 })
      }
      // A third process: the completed outcome comes from the database, the handler does not run.
      const c = yield* openStore
      const again = yield* c.once(keys[7]!, claim, Effect.die("must not run"))
      assert.deepStrictEqual([again.reused, again.result.value], [true, { call: "call-7", run: 1 }])
      // COUNT(*) is a string on PostgreSQL: the store's size is a number all the same.
      assert.strictEqual(yield* c.size, 50)
    }), 30_000) // 400 claims on a real server: seconds on a loaded machine, not vitest's default 5

  it.scoped("claims: a claim whose owner died is re-run once its lease (a BIGINT) has passed", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const key = { taskId: "task-dead", toolCallId: "call-1" }
      yield* sql`INSERT INTO tool_claims (task_id, tool_call_id, tool_name, owner, state, lease_expires_at, expires_at, outcome)
        VALUES (${key.taskId}, ${key.toolCallId}, 'count', 'dead-process', 'pending', ${Date.now() - 1},
          ${Date.now() + 30_000}, NULL)`
      const store = yield* openStore
      const first = yield* store.once(key, claim, Effect.succeed(ToolResult.success(1)))
      const again = yield* store.once(key, claim, Effect.die("must not run"))
      assert.deepStrictEqual([first.reused, first.result.value, again.reused, again.result.value], [false, 1, true, 1])
    }))

  it.scoped("claims: held tasks, oldest first", () =>
    Effect.gen(function*() {
      const store = yield* Effect.map(Layer.build(Serve.layerHeldTasksSqlClient), Context.get(Serve.HeldTasks))
      for (const task of ["task-b", "task-a", "task-c"]) yield* store.holdTask("agent-held", task)
      yield* store.releaseTask("agent-held", "task-a")
      assert.deepStrictEqual(yield* store.heldTasks("agent-held"), ["task-b", "task-c"])
    }))

  it.scoped("journal: a run's started, turn, call and outcome rows load back; approvals; its end too", () =>
    Effect.gen(function*() {
      const journal = yield* Effect.map(Layer.build(Journal.layerSqlClient), Context.get(Journal.Journal))
      const deadlineAt = Date.now() + 60_000
      const usage = { inputTokens: 10, outputTokens: 5 }
      const call = { id: "call-1", name: "work", arguments: "{\"key\":\"a\"}" }
      yield* journal.started({ runId: "task-j", kind: "task", agentId: "agent-1", processId: "p-1", prompt: "go", tools: [] })
      yield* journal.turn("task-j", 1, { toolCalls: [call], finishReason: "tool_calls", usage })
      yield* journal.turn("task-j", 2, { text: "done", toolCalls: [], finishReason: "stop", usage })
      yield* journal.callStarted("task-j", { toolCallId: "call-1", name: "work", arguments: call.arguments, deadlineAt })
      yield* journal.callStarted("task-j", { toolCallId: "call-2", name: "work", arguments: "{}", deadlineAt })
      yield* journal.callEnded("task-j", "call-1", ToolResult.success("did a"))
      // Written with its outcome in one statement (ON CONFLICT ... excluded on PostgreSQL too); the first stays.
      const answered = { toolCallId: "call-3", name: "work", arguments: "{}", deadlineAt }
      yield* journal.callAnswered("task-j", answered, ToolResult.success("reused"))
      const again = yield* journal.callAnswered("task-j", answered, ToolResult.success("later"))
      assert.strictEqual(again.value, "reused")

      const { open } = yield* journal.tasks(0)
      assert.deepStrictEqual(open.map((t) => [t.runId, t.agentId, t.processId, t.prompt, t.tools]), [
        ["task-j", "agent-1", "p-1", "go", []]
      ])
      const task = yield* journal.run("task-j")
      assert.isTrue(task !== undefined && Journal.isOpen(task))
      if (task === undefined || !Journal.isOpen(task)) return
      assert.deepStrictEqual(task.turns.map((t) => [t.finishReason, t.toolCalls.length, t.text]), [
        ["tool_calls", 1, undefined],
        ["stop", 0, "done"]
      ])
      const [one, two] = [task.calls.get("call-1"), task.calls.get("call-2")]
      // deadline_at is a BIGINT: a number, the very one written.
      assert.deepStrictEqual([one?.name, one?.arguments, one?.deadlineAt, one?.result?.value], [
        "work",
        call.arguments,
        deadlineAt,
        "did a"
      ])
      assert.deepStrictEqual([two?.deadlineAt, two?.result], [deadlineAt, undefined])
      assert.deepStrictEqual(yield* journal.counts, { tasks: 1, turns: 2, calls: 3 })

      // An approval: asked (the run suspends), decided once, read back with its numbers as numbers.
      const approval = { toolCallId: "call-2", toolName: "work", input: "{}", inputKey: "{}", fingerprint: "f", expiresAt: deadlineAt }
      yield* journal.suspended("task-j", [approval])
      assert.isTrue(yield* journal.decide("task-j", "call-2", { approved: true, reason: undefined, now: Date.now() }))
      assert.isFalse(yield* journal.decide("task-j", "call-2", { approved: false, reason: "late", now: Date.now() }))
      const suspended = yield* journal.run("task-j")
      assert.isTrue(suspended !== undefined && Journal.isOpen(suspended) && suspended.status === "suspended")
      if (suspended !== undefined && Journal.isOpen(suspended)) {
        const { askedAt, decidedAt, decidedBy, ...decided } = suspended.approvals.get("call-2")!
        assert.deepStrictEqual(decided, { ...approval, decision: "approved", reason: undefined })
        // When it was asked and decided (BIGINTs, read back as numbers); by no one named (an agent's names itself).
        assert.isTrue(typeof askedAt === "number" && typeof decidedAt === "number" && decidedAt >= askedAt)
        assert.strictEqual(decidedBy, undefined)
      }

      const endedAt = Date.now()
      yield* journal.ended("task-j", { final: "{\"_tag\":\"TaskCompleted\"}" }, endedAt)
      const after = yield* journal.tasks(0)
      assert.deepStrictEqual(after.open.map((t) => t.runId), [])
      assert.deepStrictEqual(after.ended, [{
        runId: "task-j",
        kind: "task",
        agentId: "agent-1",
        processId: "p-1",
        final: "{\"_tag\":\"TaskCompleted\"}",
        result: undefined,
        endedAt
      }])
      // An ended task keeps its timeline for an operator, until the retention sweep purges it with the task.
      assert.deepStrictEqual(yield* journal.counts, { tasks: 1, turns: 2, calls: 3 })
      const timeline = yield* journal.task("task-j")
      assert.deepStrictEqual([timeline?.status, timeline?.turns.length, timeline?.calls.length], ["ended", 2, 3])
      yield* journal.purge(endedAt, "task")
      assert.deepStrictEqual(yield* journal.counts, { tasks: 0, turns: 0, calls: 0 })
    }))

  it.scoped("journal: the open tasks are read, and an agent's counted, from an index of the open ones, not from every task kept", () =>
    Effect.gen(function*() {
      const journal = yield* Effect.map(Layer.build(Journal.layerSqlClient), Context.get(Journal.Journal))
      const sql = yield* SqlClient.SqlClient
      // 3,000 ended tasks of the agent; 3 more started (prompts of 2, 2 and 5 bytes in UTF-8), the second then ended; one of another agent.
      yield* sql.unsafe(`INSERT INTO journal_tasks (task_id, kind, agent_id, process_id, prompt, tools, status, created_at)
        SELECT 'old-' || i, 'task', 'agent-1', 'p-1', 'done', '[]', 'ended', i FROM generate_series(1, 3000) i`)
      for (const [id, agentId, prompt] of [["o-1", "agent-1", "go"], ["o-2", "agent-1", "go"], ["o-3", "agent-1", "h\u00e9\u00e9"]]) {
        yield* journal.started({ runId: id!, kind: "task", agentId: agentId!, processId: "p-1", prompt: prompt!, tools: [] })
      }
      yield* journal.started({ runId: "o-4", kind: "task", agentId: "agent-2", processId: "p-1", prompt: "x", tools: [] })
      yield* journal.ended("o-2", { final: "{}" }, Date.now())
      assert.deepStrictEqual(yield* journal.openUsage("agent-1"), { tasks: 2, promptBytes: 2 + 5 })

      // And the open tasks of every agent (a runner's sweep), the oldest first, none of the ended ones.
      assert.deepStrictEqual((yield* journal.openTasks).map((task) => [task.runId, task.agentId, task.prompt]), [
        ["o-1", "agent-1", "go"],
        ["o-3", "agent-1", "h\u00e9\u00e9"],
        ["o-4", "agent-2", "x"]
      ])

      // The statements both send, explained by the server with the table's statistics up to date.
      yield* sql.unsafe("ANALYZE journal_tasks")
      const planOf = (statement: Statement.Statement<object>) => {
        const [text, params] = statement.compile()
        return Effect.map(
          sql.unsafe<{ readonly "QUERY PLAN": string }>(`EXPLAIN ${text}`, params),
          (rows) => rows.map((row) => row["QUERY PLAN"]).join("\n")
        )
      }
      let counted = ""
      yield* JournalSql.openUsage(sql, "agent-1", (statement) =>
        Effect.as(Effect.map(planOf(statement), (plan) => void (counted = plan)), []))
      for (const plan of [counted, yield* planOf(JournalSql.openTasks(sql))]) {
        assert.include(plan, "journal_tasks_open", plan)
        assert.notInclude(plan, "Seq Scan", plan)
      }
      yield* sql.unsafe("DELETE FROM journal_tasks")
    }))
})
