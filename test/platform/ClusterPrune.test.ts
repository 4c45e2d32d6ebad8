/**
 * The engine's tables stay small (slow project): a runner process on a real PostgreSQL keeps ended tasks
 * 6 s and sweeps every 500 ms. A task's `Run` is not a persisted message (the journal makes a task durable),
 * so 20 tasks leave no row in `cluster_messages` nor `cluster_replies` (each left one of each while its `Run`
 * was persisted, the sweep's to prune); the sweep purges the tasks from the journal, and an open task still
 * completes after the sweep.
 */
import { assert, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Context, Effect, Fiber, Layer, Schedule, Stream } from "effect"
import * as Cluster from "../../src/platform/Cluster.js"
import { asksFile, countingTool, readAsks, serving, startRunner } from "../support/clusterRunners.js"
import { record } from "../support/figures.js"
import * as Pg from "../support/postgres.js"

const ended = 20

it.live("tasks leave no row in cluster_messages nor cluster_replies; the retention sweep purges them from the journal, not an open task", () =>
  Effect.gen(function*() {
    const asks = yield* asksFile
    const server = yield* Pg.postgres()
    const sql = Context.get(yield* Layer.build(Pg.pgClient(server.url)), SqlClient.SqlClient)
    yield* Effect.provide(Cluster.migrate, Pg.pgClient(server.url))
    const runner = yield* startRunner("r0", server.url, asks, { KEEP_ENDED_TASKS: "6000", SWEEP: "500", TURNS: "1" })
    const effects = new Map<string, number>()
    const fast = yield* serving([runner.url], countingTool("fast", effects, 10))

    const rows = Effect.gen(function*() {
      const [messages] = yield* sql<{ readonly n: string }>`SELECT count(*) AS n FROM cluster_messages`
      const [replies] = yield* sql<{ readonly n: string }>`SELECT count(*) AS n FROM cluster_replies`
      const [journaled] = yield* sql<{ readonly n: string }>`SELECT count(*) AS n FROM journal_tasks`
      return { messages: Number(messages!.n), replies: Number(replies!.n), journaled: Number(journaled!.n) }
    }).pipe(Effect.orDie)

    const runTask = (prompt: string) =>
      fast.serve.submitTask(prompt).pipe(
        Stream.runCollect,
        Effect.map((events) => [...events].at(-1)?._tag),
        Effect.timeoutFailCause({ duration: "60 seconds", onTimeout: () => Cause.die(new Error(`${prompt} did not end`)) })
      )
    // One task held open: its tool answers after 15 s, past the sweep that purges the others.
    const slow = yield* serving([runner.url], countingTool("slow", effects, 15_000))
    const open = yield* Effect.fork(slow.serve.submitTask("open 0").pipe(Stream.runCollect, Effect.map((events) => [...events].at(-1)?._tag)))
    yield* Effect.promise(async () => {
      while (!readAsks(asks).some((ask) => ask.prompt === "open_0")) await new Promise((r) => setTimeout(r, 20))
    })
    const endings = yield* Effect.forEach(Array.from({ length: ended }, (_, i) => runTask(`task ${i}`)), (run) => run, {
      concurrency: 5
    })
    assert.deepStrictEqual(endings.filter((tag) => tag !== "TaskCompleted"), [])
    const before = yield* rows
    assert.deepStrictEqual([before.messages, before.replies], [0, 0], `rows before the sweep: ${JSON.stringify(before)}`)

    // The sweep purges the ended tasks (kept 6 s) from the journal, and their messages and replies with them.
    const after = yield* rows.pipe(
      Effect.repeat({ until: (counts) => counts.journaled <= 1, schedule: Schedule.spaced("200 millis") }),
      Effect.zipLeft(Effect.sleep("1200 millis")),
      Effect.zipRight(rows)
    )
    const [kept] = yield* Effect.orDie(sql<{ readonly n: string }>`SELECT count(*) AS n FROM cluster_messages m
      WHERE m.entity_id NOT IN (SELECT task_id FROM journal_tasks)`)
    assert.strictEqual(Number(kept!.n), 0, `messages of purged tasks left: ${JSON.stringify(after)}`)
    assert.isAtMost(after.replies, 1, `replies left: ${JSON.stringify(after)}`)
    assert.isAtMost(after.journaled, 1, `tasks left in the journal: ${JSON.stringify(after)}`)
    // The open task goes on and ends after the sweeps.
    assert.strictEqual(yield* Fiber.join(open), "TaskCompleted")
    record({
      suite: "cluster pruning",
      measure: `rows of cluster_messages / cluster_replies after ${ended} tasks, before and after the sweep (keepEndedTasks 6 s)`,
      value: `${before.messages} / ${before.replies} before; ${after.messages} / ${after.replies} after (one task open)`
    })
  }).pipe(Effect.scoped), { timeout: 120_000 })
