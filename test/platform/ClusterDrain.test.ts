/**
 * A runner's drain (slow project): two runner processes on a real PostgreSQL, two serving processes (here)
 * each connected first to a different runner. Tasks run on both; SIGTERM reaches one (r0) with tasks under
 * way on it and a call of its serving process in flight. It logs each step of its drain (draining, shards
 * handed over, calls in flight finished, drained), its tasks' next turns are asked on the other runner and
 * none on it after the handover, every task completes, and every call has one side effect.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Cause, Effect, Fiber, Redacted, Stream } from "effect"
import { readFileSync } from "node:fs"
import type { TaskEvent } from "../../src/protocol/Protocol.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { asksFile, countingTool, readAsks, readyzOf, serving, shardsSettled, startRunner, timeOf } from "../support/clusterRunners.js"
import { record } from "../support/figures.js"
import * as Pg from "../support/postgres.js"

const tasks = 6

it.live("SIGTERM drains a runner: each step logged, its tasks go on on the other runner, every call once", () =>
  Effect.gen(function*() {
    const asks = yield* asksFile
    const server = yield* Pg.postgres()
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))
    const r0 = yield* startRunner("r0", server.url, asks, { LOG_LEVEL: "Info" })
    const r1 = yield* startRunner("r1", server.url, asks, { LOG_LEVEL: "Info" })
    // Each serving process's tasks are placed on its runner's shards: settled first, so that A's stay on r0.
    yield* shardsSettled([r0, r1])

    const effects = new Map<string, number>()
    const a = yield* serving([r0.url, r1.url], countingTool("alpha", effects, 500))
    const b = yield* serving([r1.url, r0.url], countingTool("beta", effects, 500))

    // When each task's events came.
    const seenAt = Array.from({ length: tasks }, () => [] as Array<number>)
    const runs = yield* Effect.fork(Effect.forEach(
      Array.from({ length: tasks }, (_, i) => i),
      (i) =>
        (i % 2 === 0 ? a : b).serve.submitTask(`task ${i}`).pipe(
          Stream.tap(() => Effect.sync(() => seenAt[i]!.push(Date.now()))),
          Stream.runCollect,
          Effect.map((events): Array<TaskEvent> => [...events]),
          Effect.timeoutFailCause({ duration: "90 seconds", onTimeout: () => Cause.die(new Error(`task ${i} did not end`)) })
        ),
      { concurrency: "unbounded" }
    ))
    // SIGTERM once every task is under way and r0 has asked a turn of a task of A's past its first.
    // Bounded: if the tasks do not get there, what each runner asked and logged, and each task's events so far.
    const underWay = yield* Effect.promise(async () => {
      for (const until = Date.now() + 45_000; Date.now() < until;) {
        if (readAsks(asks).length >= tasks * 2 && readAsks(asks).some((ask) => ask.runner === "r0" && ask.step >= 1)) return true
        await new Promise((r) => setTimeout(r, 10))
      }
      return false
    })
    if (!underWay) {
      return yield* Effect.dieMessage(
        `the tasks were not under way on r0 within 45 s; events a task ${seenAt.map((at) => at.length).join(", ")}\n` +
          `asks:\n${readFileSync(asks, "utf8")}\nr0:\n${r0.child.lines.join("\n")}\nr1:\n${r1.child.lines.join("\n")}`
      )
    }
    const readyz = readyzOf(r0)
    const before = yield* Effect.promise(() => fetch(readyz, { signal: AbortSignal.timeout(10_000) }).then((r) => r.status, String))
    const termAt = Date.now()
    r0.child.process.kill("SIGTERM")
    // Draining, it is no longer ready (while it still answers).
    const during = yield* Effect.promise(async () => {
      for (let tries = 0; tries < 40; tries++) {
        const status = await fetch(readyz, { signal: AbortSignal.timeout(5_000) }).then((r) => r.status, () => undefined)
        if (status !== 200) return status
        await new Promise((r) => setTimeout(r, 25))
      }
      return 200
    })
    assert.deepStrictEqual([before, during], [200, 503], "ready, then not ready once draining")
    const results = yield* Fiber.join(runs)
    // Bounded too: a runner that does not stop after its drain is this test's failure, with what it logged.
    const code = yield* Effect.promise(() =>
      Promise.race([r0.child.exited, new Promise<"running">((r) => setTimeout(() => r("running"), 30_000))])
    )
    if (code === "running") return yield* Effect.dieMessage(`r0 had not stopped 30 s after its tasks ended:\n${r0.child.lines.join("\n")}`)

    for (const [i, events] of results.entries()) {
      const last = events[events.length - 1]!
      assert.strictEqual(last._tag, "TaskCompleted", `task ${i}: ${events.map((e) => e._tag).join(" ")}`)
    }
    assert.strictEqual(effects.size, tasks * 4)
    assert.deepStrictEqual([...effects].filter(([, n]) => n > 1), [])

    // Each step logged, in order.
    const lines = r0.child.lines
    const step = (text: string) => lines.findIndex((line) => line.includes(text))
    const steps = ["draining (SIGTERM): not ready", "draining: shards handed over in", "calls in flight finished", "drained in"]
      .map(step)
    assert.isTrue(steps.every((at, i) => at >= 0 && (i === 0 || at > steps[i - 1]!)), `drain steps ${steps}:\n${lines.join("\n")}`)
    const handedAt = timeOf(lines[steps[1]!]!)
    assert.isFalse(Number.isNaN(handedAt), lines[steps[1]!]!)

    // The runner's open tasks went on on r1; no turn was asked on r0 once it had handed its shards over.
    const after = readAsks(asks).filter((ask) => ask.at > handedAt)
    assert.deepStrictEqual(after.filter((ask) => ask.runner === "r0"), [])
    const moved = [...new Set(readAsks(asks).filter((ask) => ask.runner === "r0" && ask.at <= handedAt).map((ask) => ask.prompt))]
      .filter((prompt) => after.some((ask) => ask.prompt === prompt))
    assert.isAbove(moved.length, 0, "no task of r0 was open at the handover")
    const firstOnR1 = Math.min(...moved.map((prompt) => after.find((ask) => ask.prompt === prompt)!.at))
    const nextEvents = moved.map((prompt) => seenAt[Number(prompt.split("_")[1])]!.find((at) => at > handedAt))
      .filter((at) => at !== undefined).map((at) => at - handedAt)
    record({
      suite: "cluster drain",
      measure: "SIGTERM of one of 2 runners mid-run: its tasks' next event at their client, and next turn asked elsewhere, after the handover",
      value: `events ${nextEvents.join(", ")} ms; turn ${firstOnR1 - handedAt} ms (handover ${handedAt - termAt} ms after SIGTERM; ` +
        `${moved.length} tasks moved; exit code ${code})`,
      expected: "about 1 s"
    })
  }).pipe(Effect.scoped), { timeout: 120_000 })
