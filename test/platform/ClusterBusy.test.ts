/**
 * Cluster mode while its database restarts (slow project): two runner processes on a real PostgreSQL and a serving
 * process (in this process) whose tool needs a person's approval. With a task waiting for its approval, PostgreSQL
 * crashes; meanwhile the client decides the approval and submits another task. Neither dies: what the platform could
 * not do then it answered `PlatformBusy` (a typed error, logged by the runner) or waited for, the client tried again,
 * and once the database is back the decision lets the first task complete and the second task starts.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, Fiber, Redacted, Schedule, Schema, Stream } from "effect"
import { Tool } from "../../src/index.js"
import type { TaskEvent } from "../../src/protocol/Protocol.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { asksFile, serving, startRunner } from "../support/clusterRunners.js"
import * as Pg from "../support/postgres.js"

/** The refunds made, by n. */
const refunds: Array<number> = []

/** The task's tool: it needs a person's approval, so a task waits suspended in the journal until one decides. */
const refund = Tool.make("refund", {
  description: "Refunds n.",
  input: { n: Schema.Number, step: Schema.Number },
  output: Schema.String,
  timeout: "60 seconds",
  needsApproval: true
}, ({ n }) => Effect.sync(() => (refunds.push(n), `refunded ${n}`)))

it.live("a decision and a submit made while PostgreSQL restarts go through once it is back; no client dies", () =>
  Effect.gen(function*() {
    const asks = yield* asksFile
    const server = yield* Pg.postgres({ crashSafe: true })
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))
    const runners = [yield* startRunner("r0", server.url, asks, { TURNS: "1" }), yield* startRunner("r1", server.url, asks, { TURNS: "1" })]
    const { client, serve } = yield* serving(runners.map((r) => r.url), refund)

    // A task that waits for the approval of its call c0.
    const first: Array<TaskEvent> = []
    const firstRun = yield* Effect.fork(Stream.runForEach(serve.submitTask("task 1"), (e) => Effect.sync(() => first.push(e))))
    yield* Effect.sync(() => first.some((e) => e._tag === "TaskSuspended")).pipe(
      Effect.repeat({ until: (suspended) => suspended, schedule: Schedule.spaced("50 millis") }),
      Effect.timeout("60 seconds")
    )
    const taskId = first[0]!.taskId

    // The database crashes; the decision and a new submit are made while it is away.
    yield* Effect.promise(() => server.crash())
    // The client tries again what is refused with a typed error: PlatformBusy (PlatformClient itself), and
    // NoPendingTaskApproval while the task is being taken back after the outage (not waiting again yet).
    const decided = yield* Effect.fork(client.approve(taskId, "c0").pipe(
      Effect.retry({ while: (e) => e._tag === "NoPendingTaskApproval", schedule: Schedule.spaced("500 millis").pipe(Schedule.upTo("60 seconds")) })
    ))
    const second: Array<TaskEvent> = []
    const secondRun = yield* Effect.fork(Stream.runForEach(serve.submitTask("task 2"), (e) => Effect.sync(() => second.push(e))))
    yield* Effect.sleep("3 seconds")
    yield* Effect.promise(() => server.restart())

    // The decision went through (no defect, no error); the first task completes with its refund.
    const decision = yield* Fiber.await(decided).pipe(Effect.timeout("90 seconds"))
    assert.isTrue(Exit.isSuccess(decision), `the decision: ${String(decision)}`)
    yield* Fiber.join(firstRun).pipe(Effect.timeout("60 seconds"))
    const end = first[first.length - 1]
    assert.deepInclude(end, { _tag: "TaskCompleted", taskId, output: "done task 1" })
    assert.deepStrictEqual(refunds, [1], "the approved refund ran, once")
    // The submit went through too: its task started and waits for its own approval.
    yield* Effect.sync(() => second.some((e) => e._tag === "TaskSuspended")).pipe(
      Effect.repeat({ until: (suspended) => suspended, schedule: Schedule.spaced("50 millis") }),
      Effect.timeout("60 seconds")
    )
    assert.strictEqual(second[0]?._tag, "TaskStarted")
    yield* Fiber.interrupt(secondRun)
    const busy = runners.flatMap((r) => r.child.lines.filter((l) => l.includes("PlatformBusy")))
    console.log(`cluster busy: ${busy.length} call(s) answered PlatformBusy while the database was away, then tried again`)
  }).pipe(Effect.scoped), 240_000)
