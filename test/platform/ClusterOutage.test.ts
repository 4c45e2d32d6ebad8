/**
 * Cluster mode when its database goes away (slow project): three runner processes
 * on a real PostgreSQL, two serving processes (here, in this process). Ten tasks of four tool calls
 * each are under way, with calls in flight, when the PostgreSQL server crashes (SIGKILL to the
 * postmaster and its backends); it comes back on the same port and data folder after 1 s, and in a
 * second test after 5 s. While it is away each task's stream says so (`TaskWaiting`); every task goes
 * on within seconds of the restart and completes, no call has a second side effect, and no model
 * turn is asked again but one whose answer was on its way as its task moved to another runner.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Fiber, Redacted, Schedule, Stream } from "effect"
import { Timing } from "../../src/index.js"
import type { TaskEvent } from "../../src/protocol/Protocol.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { asksFile, countingTool, readAsks, type Runner, serving, startRunner } from "../support/clusterRunners.js"
import { record } from "../support/figures.js"
import * as Pg from "../support/postgres.js"

/** The serving processes reconnect for two minutes: the outage may last a while. */
const patient = Timing.layer({
  redelivery: Schedule.spaced("2 seconds"),
  reconnect: Schedule.spaced("200 millis").pipe(Schedule.intersect(Schedule.recurs(600)))
})

const tasks = 10
const turns = 4

/** Calls running now, by tool. */
const running = new Map<string, number>()
const runningNow = () => [...running.values()].reduce((x, y) => x + y, 0)

/** The model turns asked, each with its key (prompt and step). */
const asked = (file: string) => readAsks(file).map((ask) => ({ ...ask, key: `${ask.prompt}#${ask.step}` }))

for (const outageMillis of [1_000, 5_000]) {
  it.live(`PostgreSQL crashed with calls in flight, back after ${outageMillis / 1000} s: every task completes within seconds, side effects = unique calls, turns asked again only as a task moved`, () =>
    Effect.gen(function*() {
      const asksPath = yield* asksFile
      // A commit the server acknowledged survives its crash, as on a production server.
      const server = yield* Pg.postgres({ crashSafe: true })
      yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))

      const runners: Array<Runner> = []
      for (let i = 0; i < 3; i++) runners.push(yield* startRunner(`r${i}`, server.url, asksPath))
      const urls = runners.map((runner) => runner.url)

      const effects = new Map<string, number>()
      // The tools take a second, so that calls are in flight when the database goes.
      const served = (urls: ReadonlyArray<string>, tool: string) =>
        Effect.map(
          serving(urls, countingTool(tool, effects, { millis: 1_000, timeout: "120 seconds", running }), {}, patient),
          ({ serve }) => serve
        )
      const a = yield* served(urls, "alpha")
      const b = yield* served([urls[1]!, urls[2]!, urls[0]!], "beta")

      // Each task's events, with the time each came.
      const seen: Array<Array<{ readonly at: number; readonly event: TaskEvent }>> = Array.from({ length: tasks }, () => [])
      const runs = yield* Effect.forEach(
        Array.from({ length: tasks }, (_, i) => i),
        (i) =>
          (i % 2 === 0 ? a : b).submitTask(`task ${i}`).pipe(
            Stream.runForEach((event) => Effect.sync(() => seen[i]!.push({ at: Date.now(), event }))),
            Effect.timeout("60 seconds"),
            Effect.either
          ),
        { concurrency: "unbounded" }
      ).pipe(Effect.fork)

      // Crash the database once every task is under way (each asked its model once: a submit still waiting for
      // its start has no stream to tell yet) and calls are in flight.
      const underWay = () => new Set(asked(asksPath).map((ask) => ask.key.split("#")[0])).size
      yield* Effect.promise(async () => {
        while (underWay() < tasks || runningNow() < 5) await new Promise((r) => setTimeout(r, 10))
      })
      const inFlight = runningNow()
      const crashedAt = Date.now()
      yield* Effect.promise(() => server.crash())
      yield* Effect.sleep(outageMillis)
      yield* Effect.promise(() => server.restart())
      const restartedAt = Date.now()
      const outcomes = yield* Fiber.join(runs)

      const ends = seen.map((events) => events.find(({ event }) => event._tag === "TaskCompleted" || event._tag === "TaskFailed"))
      const done = ends.filter((end) => end?.event._tag === "TaskCompleted").length
      const lastEnd = Math.max(...ends.map((end) => end?.at ?? Number.NaN))
      // When each task went on after the restart: its first turn, answered call or end after it.
      const wentOn = seen.map((events) =>
        events.find(({ at, event }) =>
          at >= restartedAt &&
          (event._tag === "TurnStarted" || event._tag === "ToolCallCompleted" || event._tag === "TaskCompleted")
        )?.at ?? Number.NaN
      )
      const allWentOn = Math.max(...wentOn) - restartedAt
      // What each task's stream said while the database was away.
      const waited = seen.map((events) => events.find(({ event }) => event._tag === "TaskWaiting"))
      const asks = asked(asksPath)
      const distinct = new Set(asks.map((ask) => ask.key))
      const sideEffects = [...effects.values()].reduce((x, y) => x + y, 0)
      const line = `cluster outage: PostgreSQL crashed with ${inFlight} call(s) in flight, restarted ${restartedAt - crashedAt} ms later; ` +
        `${waited.filter((w) => w !== undefined).length} of ${tasks} streams said TaskWaiting (the first ` +
        `${Math.min(...waited.map((w) => w?.at ?? Number.NaN).filter((at) => !Number.isNaN(at))) - crashedAt} ms after the crash); ` +
        `every task went on within ${allWentOn} ms of the restart; ${done} of ${tasks} tasks completed, the last ` +
        `${lastEnd - restartedAt} ms after the restart (each had calls of 1 s left); ` +
        `model turns asked ${asks.length}, distinct ${distinct.size}; calls ${effects.size}, side effects ${sideEffects}`
      console.log(line)
      const counted = new Map<string, Array<string>>()
      for (const ask of asks) counted.set(ask.key, [...(counted.get(ask.key) ?? []), `${ask.runner}@${ask.at - crashedAt}`])
      for (const [key, times] of counted) if (times.length > 1) console.log(`asked again: ${key} ${times.join(" ")} (ms after the crash)`)
      // What the runners logged at warning and above, each message once with its count.
      for (const [i, runner] of runners.entries()) {
        const counts = new Map<string, number>()
        for (const logged of runner.child.lines) {
          const match = /^\[[\d:.]+\] (WARN|ERROR|FATAL) \(#\d+\): (.*)$/.exec(logged)
          if (match === null) continue
          const key = `${match[1]} ${match[2]!.replace(/task-[\w-]+/g, "<task>").slice(0, 160)}`
          counts.set(key, (counts.get(key) ?? 0) + 1)
        }
        for (const [key, n] of counts) console.log(`r${i} x${n}: ${key}`)
      }
      for (const [i, events] of seen.entries()) {
        if (ends[i]?.event._tag !== "TaskCompleted" || waited[i] === undefined) {
          console.log(`task ${i} (ms after the crash): ${events.map(({ at, event }) => `${event._tag}@${at - crashedAt}`).join(" ")}`)
        }
      }

      for (const [i, outcome] of outcomes.entries()) {
        assert.strictEqual(outcome._tag, "Right", `task ${i} did not end in time: ${seen[i]!.map((e) => e.event._tag).join(" ")}`)
        assert.strictEqual(ends[i]?.event._tag, "TaskCompleted", `task ${i}: ${seen[i]!.map((e) => e.event._tag).join(" ")}`)
      }
      // While it was down, clients were told: TaskWaiting on each stream, and only then (up to 2 s late:
      // a runner asks the database every second, an owner says it is there every second). A 1 s outage
      // may be over before anyone finds it.
      for (const wait of waited) {
        if (wait === undefined) continue
        assert.isAbove(wait.at, crashedAt)
        assert.isBelow(wait.at, restartedAt + 2_000)
        assert.match(wait.event._tag === "TaskWaiting" ? wait.event.reason : "", /^the platform's database cannot be reached \(.+\); the task goes on/)
      }
      if (outageMillis >= 5_000) {
        for (const [i, wait] of waited.entries()) assert.isDefined(wait, `task ${i}: no TaskWaiting while the database was away`)
      }
      // Within seconds, not the engine's 10 s backoff of a defective entity (nor its 10 minutes before a read message is read again).
      assert.isBelow(allWentOn, 10_000)
      // Side effects = unique calls, and every model turn asked once, but for the edge no design closes:
      // the database away, every runner lets its shards go (the engine's rule while it cannot hold their
      // locks), and a turn whose answer was on its way when its task moved had no journaled answer for
      // the runner that took the task up, which asked it again. Such a turn is asked twice at most, the
      // second time by another runner.
      assert.strictEqual(effects.size, tasks * turns)
      assert.deepStrictEqual([...effects].filter(([, n]) => n > 1), [])
      assert.strictEqual(distinct.size, tasks * (turns + 1))
      for (const [key, times] of counted) {
        assert.isAtMost(times.length, 2, `model turn ${key} asked ${times.length} times: ${times.join(" ")}`)
        const [first, second] = asks.filter((ask) => ask.key === key)
        if (second !== undefined) assert.notStrictEqual(second.runner, first!.runner, `model turn ${key} asked twice by one runner`)
      }
      record({
        suite: "cluster outage",
        measure: `PostgreSQL crashed mid-run, back after ${outageMillis / 1000} s: restart to every task going on`,
        value: `${allWentOn} ms`
      })
      record({
        suite: "cluster outage",
        measure: `PostgreSQL crashed mid-run, back after ${outageMillis / 1000} s: restart to the last task's end`,
        value: `${lastEnd - restartedAt} ms`
      })
      record({
        suite: "cluster outage",
        measure: `${outageMillis / 1000} s outage: model turns asked / distinct; side effects / unique calls`,
        value: `${asks.length} / ${distinct.size}; ${sideEffects} / ${effects.size}`,
        expected: "side effects equal; a turn under way as its task moved asked again"
      })
    }).pipe(Effect.scoped), { timeout: 180_000 })
}
