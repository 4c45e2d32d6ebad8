/**
 * The platform as a job queue in cluster mode, with real processes (design: The platform, Cluster mode): three
 * runners on a real PostgreSQL; two workers of one agent, `agent-tools serve --tools` sharing a claims file
 * (`IDEMPOTENCY_DB`), w1 connected to the first runner, w2 to the second; a submitter that serves nothing, connected
 * to the third, submits 20 tasks. w1 holds its calls and is killed with SIGKILL mid-call; then, while w2 holds the
 * calls w1 went away with (waiting on w1's claims), w2's runner is SIGKILLed too. Every task completes, each call's side effect happened
 * once, the calls ran on the two workers only, and the submitter's stream said `TaskWaiting` meanwhile.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Protocol } from "../../src/exports/protocol.js"
import * as Cluster from "../../src/platform/Cluster.js"
import type { Child } from "../support/childProcess.js"
import { record } from "../support/figures.js"
import * as Pg from "../support/postgres.js"
import { assertQueueOutcome, cliWorker, eventsOf, eventually, line, registeredAs, start } from "../support/queue.js"

const tasks = 20

it.live(`cluster: ${tasks} tasks from a submitter on a third runner; a worker, then a runner killed mid-call: all complete, each side effect once`, () =>
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-cluster-queue-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    )
    const effectFile = join(dir, "effects.txt")
    writeFileSync(effectFile, "")
    const server = yield* Pg.postgres()
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))
    // Three runners, one after the other (each waits for its socket before the next starts).
    const runners: Array<{ readonly child: Child; readonly url: string }> = []
    for (let i = 0; i < 3; i++) {
      const port = yield* Effect.promise(() => Pg.freePort())
      const child = yield* start("test/support/queueChild.ts", { MODE: "runner", DATABASE_URL: server.url, RUNNER_PORT: String(port) })
      runners.push({ child, url: yield* line(child, "url ", 60) })
    }
    const [r1, r2, r3] = runners as [typeof runners[0], typeof runners[0], typeof runners[0]]
    // The CLI's workers, each its own runner first, then the others to fail over to: w1 holds every call it takes (it
    // will be killed holding them); w2 takes 1.5 s a call.
    const claims = join(dir, "claims.sqlite")
    const w1 = yield* cliWorker({ name: "w1", urls: [r1.url, r3.url], holdMillis: 600_000, claims, effectFile })
    const w2 = yield* cliWorker({ name: "w2", urls: [r2.url, r3.url, r1.url], holdMillis: 1500, claims, effectFile })
    // Both registered (the platform has their tools), then watching for calls.
    yield* Effect.all([registeredAs(w1, 60), registeredAs(w2, 60)])
    yield* Effect.sleep("1 second")
    const submitter = yield* start("test/support/queueChild.ts", { PLATFORM_URL: r3.url, PLATFORM_TOKEN: "tok-1", MODE: "submit", TASKS: String(tasks) })
    const effects = () => readFileSync(effectFile, "utf8").split("\n").filter((l) => l !== "")
    const ended = () => eventsOf(submitter).filter((e) => e._tag === "TaskCompleted" || e._tag === "TaskFailed")
    // Every call answered by w2 or held by w1: then w1 is killed, holding its calls mid-run.
    yield* eventually(
      () => ended().length + effects().filter((l) => l.startsWith("w1 ")).length === tasks,
      "every call answered by w2 or held by w1",
      90
    )
    const held = effects().filter((l) => l.startsWith("w1 ")).length
    assert.isAbove(held, 0, "w1 took some of the calls")
    assert.isBelow(held, tasks, "w2 took some of the calls")
    const killedAt = Date.now()
    w1.process.kill("SIGKILL")
    // Past the grace (3 s) w2 is given the calls w1 went away with, and waits on w1's claims (their lease, 10 s,
    // lapses 7-10 s after the kill; the tool is idempotent, so their outcome is then unknown): w2's runner is killed
    // while w2 holds them.
    yield* Effect.sleep("5 seconds")
    r2.child.process.kill("SIGKILL")
    yield* line(submitter, "done", 120).pipe(
      Effect.tapDefect(() =>
        Effect.sync(() => console.log(`not done; the submitter's last lines:\n${submitter.lines.slice(-10).join("\n")}`))
      )
    )
    const tookMillis = Date.now() - killedAt

    const events = eventsOf(submitter)
    const ends = ended()
    // Every task completed (on w2, or with the outcome unknown for the calls w1 held); each side effect once.
    assertQueueOutcome({ ends, effects: effects(), held, tasks })
    // Meanwhile each task w1 held said why it waited: its worker went away with its call.
    const waited = events.filter((e): e is Extract<Protocol.TaskEvent, { _tag: "TaskWaiting" }> => e._tag === "TaskWaiting")
    const w1Tasks = new Set(effects().filter((l) => l.startsWith("w1 ")).map((l) => l.split(" ")[1]!.split("/")[0]!))
    for (const taskId of w1Tasks) {
      const said = waited.filter((e) => e.taskId === taskId).map((e) => e.reason)
      assert.isTrue(
        said.some((reason) => /process \S+ of agent agent-1, which was given call c1 of this task, went away/.test(reason)),
        `${taskId}: ${said.join(" | ")}`
      )
    }
    console.log(`cluster job queue: ${tasks} tasks, ${held} held by the worker killed; all ended ${tookMillis} ms after the kill`)
    const figure = (measure: string, value: string | number, expected?: string) =>
      record({ suite: "cluster job queue (SIGKILL a worker, then a runner)", measure, value, expected })
    figure("tasks / held by the killed worker", `${tasks} / ${held}`)
    figure("tasks completed", ends.filter((e) => e._tag === "TaskCompleted").length, `${tasks}`)
    figure("side effects per call", "1", "1")
    figure("all ended after the worker's kill (ms)", tookMillis)
  }).pipe(Effect.scoped), 300_000)
