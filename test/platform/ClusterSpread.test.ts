/**
 * Serving processes spread again after a rolling restart (slow project): two runner processes on a real
 * PostgreSQL, each on a fixed URL; serving process A lists r0 first, B lists r1 first. r0 is stopped and
 * started again, then r1: each time the processes on the stopped runner fail over to the other. Once both
 * runners are back, A is again on r0 and B on r1 (each moved back to its first URL): their new tasks run
 * there (a task runs on the runner its submitter is connected to).
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted, Stream } from "effect"
import * as Cluster from "../../src/platform/Cluster.js"
import { asksFile, countingTool, readAsks, type Runner, serving, startRunner } from "../support/clusterRunners.js"
import { record } from "../support/figures.js"
import * as Pg from "../support/postgres.js"

it.live("after a rolling restart of two runners, both serving processes are on their first runner again", () =>
  Effect.gen(function*() {
    const asks = yield* asksFile
    const server = yield* Pg.postgres()
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))
    const ports = yield* Effect.promise(() => Promise.all([Pg.freePort(), Pg.freePort()]))
    const start = (i: 0 | 1) => startRunner(`r${i}`, server.url, asks, { WS_PORT: String(ports[i]) })
    let r0: Runner = yield* start(0)
    let r1: Runner = yield* start(1)
    const effects = new Map<string, number>()
    const a = yield* serving([r0.url, r1.url], countingTool("alpha", effects, 10))
    const b = yield* serving([r1.url, r0.url], countingTool("beta", effects, 10))

    let n = 0
    /** The runner a task of `side` runs on now. */
    const runsOn = (side: typeof a) =>
      Effect.gen(function*() {
        const prompt = `probe ${n++}`
        yield* Stream.runDrain(side.serve.submitTask(prompt))
        return readAsks(asks).find((ask) => ask.prompt === prompt.replace(" ", "_"))?.runner
      })
    // Once both runners hold shards (a runner just started holds none yet, and its tasks run on the other).
    let first: Array<string | undefined> = []
    for (let tries = 0; tries < 30; tries++) {
      first = [yield* runsOn(a), yield* runsOn(b)]
      if (first[0] === "r0" && first[1] === "r1") break
      yield* Effect.sleep("500 millis")
    }
    assert.deepStrictEqual(first, ["r0", "r1"])

    // The rolling restart: r0 stopped and started again, then r1.
    const restart = (runner: Runner, i: 0 | 1) =>
      Effect.gen(function*() {
        runner.child.process.kill("SIGTERM")
        yield* Effect.promise(() => runner.child.exited)
        return yield* start(i)
      })
    r0 = yield* restart(r0, 0)
    r1 = yield* restart(r1, 1)
    const backAt = Date.now()

    // Within about the client's interval (10 s), each is back on its first runner.
    let where: Array<string | undefined> = []
    for (let tries = 0; tries < 30; tries++) {
      where = [yield* runsOn(a), yield* runsOn(b)]
      if (where[0] === "r0" && where[1] === "r1") break
      yield* Effect.sleep("1 second")
    }
    assert.deepStrictEqual(where, ["r0", "r1"], "the serving processes did not spread again")
    record({
      suite: "cluster spreading",
      measure: "after a rolling restart of 2 runners: both serving processes back on their first runner",
      value: `${Date.now() - backAt} ms after the last runner was back`,
      expected: "within about 10 s (the client's interval)"
    })
  }).pipe(Effect.scoped), { timeout: 150_000 })
