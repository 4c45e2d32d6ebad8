/**
 * The platform as a job queue, with real processes (design: The platform): a platform process, two workers of one
 * agent (`agent-tools serve --tools`) sharing a claims file (`IDEMPOTENCY_DB`), and a submitter process that serves nothing and
 * submits 20 tasks. One worker holds its calls and is killed with SIGKILL mid-call: the submitter's stream says
 * `TaskWaiting` (who went away, which call waits), every task completes on the other worker, and each call's
 * side effect happened once (a call killed mid-run reads "outcome unknown": its tool is idempotent).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Protocol } from "../../src/exports/protocol.js"
import { record } from "../support/figures.js"
import { assertQueueOutcome, cliWorker, eventsOf, eventually, line, registeredAs, start } from "../support/queue.js"

const tasks = 20

describe("the platform as a job queue, with processes (design: The platform)", () => {
  it.live(`${tasks} tasks from a submitter serving nothing; a worker killed mid-call: all complete on the other, each side effect once`, () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-queue-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const effectFile = join(dir, "effects.txt")
      writeFileSync(effectFile, "")
      const platform = yield* start("test/support/queueChild.ts", { MODE: "platform" })
      const url = yield* line(platform, "url ", 60)
      // The CLI's workers: w1 holds every call it takes (it will be killed holding them); w2 answers at once.
      const claims = join(dir, "claims.sqlite")
      const w1 = yield* cliWorker({ name: "w1", urls: [url], holdMillis: 600_000, claims, effectFile })
      const w2 = yield* cliWorker({ name: "w2", urls: [url], holdMillis: 20, claims, effectFile })
      const w1Id = yield* registeredAs(w1, 60)
      yield* registeredAs(w2, 60)
      // Their streams of assignments open just after they registered.
      yield* Effect.sleep("1 second")
      const submitter = yield* start("test/support/queueChild.ts", { PLATFORM_URL: url, PLATFORM_TOKEN: "tok-1", MODE: "submit", TASKS: String(tasks) })
      const effects = () => readFileSync(effectFile, "utf8").split("\n").filter((l) => l !== "")
      const ended = () => eventsOf(submitter).filter((e) => e._tag === "TaskCompleted" || e._tag === "TaskFailed")
      // Every call is answered by w2 or held by w1: then w1 is killed, holding its calls mid-run.
      yield* eventually(
        () => ended().length + effects().filter((l) => l.startsWith("w1 ")).length === tasks,
        "every call answered by w2 or held by w1",
        60
      )
      const held = effects().filter((l) => l.startsWith("w1 ")).length
      assert.isAbove(held, 0, "w1 took some of the calls")
      const killedAt = Date.now()
      w1.process.kill("SIGKILL")
      yield* line(submitter, "done", 90)
      const tookMillis = Date.now() - killedAt

      const events = eventsOf(submitter)
      const ends = ended()
      // Every task completed (on w2, or with the outcome unknown for the calls w1 held); each side effect once.
      assertQueueOutcome({ ends, effects: effects(), held, tasks })
      // Meanwhile each task w1 held said why it waited: w1 went away with its call.
      const waited = events.filter((e): e is Extract<Protocol.TaskEvent, { _tag: "TaskWaiting" }> => e._tag === "TaskWaiting")
      assert.strictEqual(new Set(waited.map((e) => e.taskId)).size, held)
      for (const event of waited) {
        assert.include(event.reason, `process ${w1Id} of agent agent-1, which was given call c1 of this task, went away (its connection closed)`)
      }
      console.log(`job queue: ${tasks} tasks, ${held} held by the worker killed; all ended ${tookMillis} ms after the kill`)
      const figure = (measure: string, value: string | number, expected?: string) =>
        record({ suite: "job queue (SIGKILL a worker)", measure, value, expected })
      figure("tasks / held by the killed worker", `${tasks} / ${held}`)
      figure("tasks completed", ends.filter((e) => e._tag === "TaskCompleted").length, `${tasks}`)
      figure("side effects per call", "1", "1")
      figure("all ended after the kill (ms)", tookMillis)
    }).pipe(Effect.scoped), 240_000)
})
