/**
 * Cluster mode when a runner dies (slow project): three runner processes on a real PostgreSQL, two
 * serving processes (here, in this process) each connected first to a different runner with the
 * other runners' URLs to go on to. First 20 tasks of 4 tool calls each run across the runners and
 * all complete; then 10 more, and SIGKILL takes one runner away with tasks running on it and a call
 * in flight on a serving process's socket to it (and, in a second test, SIGTERM stops it as a deploy
 * would). Every task completes on the others, no journaled turn is asked again, and no call has a
 * second side effect.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Cause, Effect, Fiber, Redacted, Stream } from "effect"
import type { TaskEvent } from "../../src/protocol/Protocol.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { type Ask, asksFile, countingTool, readAsks, type Runner, serving, startRunner } from "../support/clusterRunners.js"
import { record } from "../support/figures.js"
import * as Pg from "../support/postgres.js"

const tasks = 10
const turns = 4 // the runners' script (clusterRunners.ts)

/** Calls running now, per tool. */
const running = new Map<string, number>()

// SIGKILL: the runner dies at once (its shard locks expire); SIGTERM: a deploy stops it (it hands its shards over).
for (const signal of ["SIGKILL", "SIGTERM"] as const) {
  it.live(`${signal} of a runner with tasks and a socket on it: every task completes on the others, turns asked once, side effects = unique calls`, () =>
    Effect.gen(function*() {
      const asksPath = yield* asksFile
      const server = yield* Pg.postgres()
      yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))

      // Three runners, one after the other (each waits for its socket before the next starts).
      const runners: Array<Runner> = []
      for (let i = 0; i < 3; i++) runners.push(yield* startRunner(`r${i}`, server.url, asksPath))
      const [r0, r1, r2] = runners as [typeof runners[0], typeof runners[0], typeof runners[0]]

      const effects = new Map<string, number>()
      const served = (urls: ReadonlyArray<string>, tool: string) =>
        Effect.map(serving(urls, countingTool(tool, effects, { running })), ({ serve }) => serve)
      // A's socket is on the runner that will die; B's on another.
      const a = yield* served([r0.url, r1.url, r2.url], "alpha")
      const b = yield* served([r1.url, r2.url, r0.url], "beta")

      /**
       * `count` tasks at once (`<label> <i>`, on A and B in turn), each to its end within 120 s: one that
       * does not end fails the test with where each task not ended stood (its id, its last events, the
       * turns asked for it: which runner, which step, when since `since`).
       */
      const runAll = (label: string, count: number, since: () => number) => {
        const seenBy = Array.from({ length: count }, () => [] as Array<TaskEvent>)
        const notEnded = () =>
          seenBy.flatMap((events, i) => {
            const last = events[events.length - 1]
            if (last?._tag === "TaskCompleted" || last?._tag === "TaskFailed") return []
            const taskId = events.find((e) => e._tag === "TaskStarted")?.taskId ?? "(no TaskStarted)"
            const asked = readAsks(asksPath).filter((ask) => ask.prompt === `${label}_${i}`)
              .map((ask) => `${ask.runner}:${ask.step}@${ask.at - since()}ms`)
            const tail = events.slice(-6).map((e) => e._tag === "ToolCallRequested" ? `${e._tag}(${e.toolCallId})` : e._tag)
            return [`${label} ${i} (${taskId}): ${events.length} events, the last ${tail.join(" ")}; turns asked (runner:step@ms) ${asked.join(" ")}`]
          })
        return Effect.forEach(
          Array.from({ length: count }, (_, i) => i),
          (i) =>
            (i % 2 === 0 ? a : b).submitTask(`${label} ${i}`).pipe(
              Stream.tap((event) => Effect.sync(() => seenBy[i]!.push(event))),
              Stream.runCollect,
              Effect.map((events) => [...events]),
              Effect.timeoutFailCause({
                duration: "120 seconds",
                onTimeout: () => Cause.die(new Error(`${label} ${i} did not end within 120 s; not ended:\n${notEnded().join("\n")}`))
              })
            ),
          { concurrency: "unbounded" }
        )
      }

      // First, 20 tasks at once with no runner lost: every one completes, its events in order.
      const warmStarted = Date.now()
      const warm = yield* runAll("warm", 20, () => warmStarted)
      const warmMillis = Date.now() - warmStarted
      for (const [i, events] of warm.entries()) {
        // `TaskWaiting` may come at any point, first too: a runner says it whenever its check of the
        // database (every second) had no answer within 1 s, as on a loaded machine.
        const tags = events.map((e) => e._tag).filter((tag) => tag !== "TaskWaiting")
        assert.strictEqual(tags[0], "TaskStarted", `warm ${i}: ${tags}`)
        assert.strictEqual(tags[tags.length - 1], "TaskCompleted", `warm ${i}: ${tags}`)
        const last = events[events.length - 1]!
        assert.strictEqual(last._tag === "TaskCompleted" ? last.output : "", `done warm ${i}`)
      }
      assert.strictEqual(effects.size, 20 * turns)
      assert.deepStrictEqual([...effects].filter(([, n]) => n > 1), [])
      effects.clear()
      const asksBefore = readAsks(asksPath).length

      let killedAt = Number.NaN
      const runs = yield* Effect.fork(runAll("task", tasks, () => killedAt))

      // Kill r0 once the tasks are under way: some of them run on it, A's calls go out on its socket.
      // ... with a call of A's in flight on r0's socket.
      yield* Effect.promise(async () => {
        while (readAsks(asksPath).length < asksBefore + tasks * 2 || (running.get("alpha") ?? 0) === 0) {
          await new Promise((r) => setTimeout(r, 10))
        }
      })
      const inFlight = running.get("alpha") ?? 0
      const asksOnR0 = readAsks(asksPath).slice(asksBefore).filter((ask) => ask.runner === "r0").length
      killedAt = Date.now()
      const exited = r0.child.exited.then(() => Date.now())
      r0.child.process.kill(signal)
      const results = yield* Fiber.join(runs)
      const exitedAt = yield* Effect.promise(() => exited)
      const doneMillis = Date.now() - killedAt

      for (const [i, events] of results.entries()) {
        const last = events[events.length - 1]!
        assert.strictEqual(last._tag, "TaskCompleted", `task ${i}: ${events.map((e) => e._tag).join(" ")}`)
        assert.strictEqual(last._tag === "TaskCompleted" ? last.output : "", `done task ${i}`)
      }
      // Side effects = unique calls: every (tool, task, step) ran exactly once.
      assert.strictEqual(effects.size, tasks * turns)
      const twice = [...effects].filter(([, n]) => n > 1)
      assert.deepStrictEqual(twice, [])

      const asks = readAsks(asksPath).slice(asksBefore)
      const seen = new Map<string, Ask>()
      let askedAgain = 0
      for (const ask of asks) {
        const key = `${ask.prompt}#${ask.step}`
        const first = seen.get(key)
        if (first === undefined) {
          seen.set(key, ask)
          continue
        }
        askedAgain++
        // Only a reply lost with the dead runner before its journal held it may be asked again.
        assert.strictEqual(first.runner, "r0", `${key} asked again though ${first.runner} did not die`)
        assert.isBelow(first.at, killedAt + 1, `${key} asked again after the kill`)
      }
      assert.strictEqual(seen.size, tasks * (turns + 1))
      const movedTasks = new Set(asks.filter((ask) => ask.runner === "r0").map((ask) => ask.prompt))
      // The tasks of the runner that were not over when its process ended: each of them went on on another.
      // (Under SIGTERM the runner may end the turns it has before it stops, and then none is left open.)
      const openAtExit = [...movedTasks].filter((prompt) =>
        asks.filter((ask) => ask.prompt === prompt && ask.at <= exitedAt).length < turns + 1
      )
      for (const prompt of openAtExit) {
        assert.isDefined(
          asks.find((ask) => ask.prompt === prompt && ask.at > killedAt && ask.runner !== "r0"),
          `${prompt} was open when r0 ended and did not go on elsewhere`
        )
      }
      if (signal === "SIGKILL") assert.isAbove(openAtExit.length, 0, "SIGKILL left no task of r0 open")
      const resumed = asks.find((ask) => ask.at > killedAt && ask.runner !== "r0" && movedTasks.has(ask.prompt))
      const failoverMillis = resumed === undefined ? Number.NaN : resumed.at - killedAt
      const line = `cluster: 3 runner processes, 20 tasks x ${turns} calls in ${warmMillis} ms, all completed, side effects = unique calls; ` +
        `then ${tasks} tasks x ${turns} calls, ${signal} of a runner after ${asksOnR0} asks on it with ${inFlight} call(s) of A's in flight on its socket ` +
        `(${movedTasks.size} tasks had run there, ${openAtExit.length} open when it ended ${exitedAt - killedAt} ms later); first resumed turn ${failoverMillis} ms after the kill; ` +
        `model turns asked ${asks.length}, distinct ${seen.size} (asked again, the reply lost with the runner: ${askedAgain}); ` +
        `calls ${tasks * turns}, side effects ${[...effects.values()].reduce((x, y) => x + y, 0)}; all tasks ended ${doneMillis} ms after the kill`
      console.log(line)
      record({ suite: "cluster failover", measure: `${signal} of one of 3 runners mid-run: first resumed turn after it`, value: resumed === undefined ? "none: every task of the runner ended on it" : `${failoverMillis} ms` })
      record({ suite: "cluster failover", measure: "model turns asked / distinct; side effects / unique calls", value: `${asks.length} / ${seen.size}; ${[...effects.values()].reduce((x, y) => x + y, 0)} / ${effects.size}`, expected: "side effects = unique calls" })
    }).pipe(Effect.scoped), { timeout: 240_000 })
}
