/**
 * A SQLite file locked by another process costs a wait, not the event loop (design: Hostile
 * clients): a statement waits for the lock at most `busyWaitMillis` on the loop, then is tried again
 * later, so timers (heartbeats, other agents' calls) run meanwhile and the write lands once the lock
 * is released. Real time is the point: the lock is held for 600 ms by a second connection.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { createRequire } from "node:module"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Idempotency, Invocation, Journal, Tool } from "../src/index.js"
import { timerDelays } from "./support/loopDelays.js"

/** The driver the SQL stores use, as a second connection to the same file. */
interface Connection {
  readonly prepare: (sql: string) => { readonly run: () => unknown }
  readonly close: () => void
}
const Database = createRequire(import.meta.url)("better-sqlite3") as new(file: string) => Connection

describe("a locked SQLite file", () => {
  it.live("a journal write waits for another connection's write lock with the loop free, then lands", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "agent-tools-locked-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const file = join(dir, "journal.sqlite")
      const journal = Context.get(yield* Layer.build(Journal.layerSql({ filename: file })), Journal.Journal)
      // Another process's write lock, as `BEGIN IMMEDIATE` takes it, released 600 ms later by a timer of this loop.
      const other = new Database(file)
      other.prepare("BEGIN IMMEDIATE").run()
      const started = performance.now()
      let released = 0
      setTimeout(() => {
        other.prepare("COMMIT").run()
        other.close()
        released = performance.now() - started
      }, 600)
      const { delays } = yield* timerDelays(
        journal.started({ runId: "run-1", kind: "task", agentId: "agent-1", processId: "p-1", prompt: "go", tools: [] })
      )
      const took = performance.now() - started
      const worst = Math.max(...delays)
      console.log(`locked for ${released.toFixed(0)} ms: the write took ${took.toFixed(0)} ms; the loop's worst timer delay ${worst.toFixed(1)} ms`)
      assert.isAbove(released, 0)
      assert.isAtLeast(took, 590)
      assert.isBelow(worst, 100)
      const run = yield* journal.run("run-1")
      assert.isTrue(run !== undefined && "prompt" in run && run.prompt === "go")
    }).pipe(Effect.scoped), 30_000)

  it.live("a claim whose lease cannot be renewed (the file locked past it) stops its call: it cannot run twice", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "agent-tools-locked-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const file = join(dir, "claims.sqlite")
      const store = Context.get(yield* Layer.build(Idempotency.layerSql({ filename: file, lease: "300 millis" })), Idempotency.Idempotency)
      const events: Array<string> = []
      const other = new Database(file)
      let unlock: ReturnType<typeof setTimeout> | undefined
      const release = () => {
        if (unlock === undefined) return
        clearTimeout(unlock)
        unlock = undefined
        other.prepare("COMMIT").run()
      }
      yield* Effect.addFinalizer(() => Effect.sync(() => (release(), other.close())))
      // The handler runs 3 s; as it starts, another connection takes the write lock for 1.5 s.
      const slow = Tool.make("slow_refund", { description: "Slow.", input: {}, timeout: "10 seconds", idempotent: true }, () =>
        Effect.gen(function*() {
          other.prepare("BEGIN IMMEDIATE").run()
          unlock = setTimeout(release, 1_500)
          events.push("started")
          yield* Effect.sleep("3 seconds")
          events.push("finished")
          return "refunded"
        }).pipe(Effect.onInterrupt(() => Effect.sync(() => events.push("stopped")))))
      const key = { taskId: "task-1", toolCallId: "call-1" }
      const started = performance.now()
      const { result } = yield* store.once(key, { toolName: slow.name, timeout: slow.timeout, idempotent: true }, Invocation.run(slow, {}, key))
      const took = performance.now() - started
      console.log(`lease 300 ms, file locked 1.5 s: the call ended after ${took.toFixed(0)} ms: ${result.error}`)
      assert.deepStrictEqual(events, ["started", "stopped"])
      assert.strictEqual(result.failure?._tag, "OutcomeUnknown")
      assert.include(result.error, "the call was stopped when its claim could not be renewed")
      assert.isBelow(took, 2_500)
    }).pipe(Effect.scoped), 30_000)
})
