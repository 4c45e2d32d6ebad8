/**
 * What the platform keeps is bounded (design: Hostile clients): an ended task keeps only its final event in memory, and
 * in the journal its final event and timeline (its prompt, turns and calls; not the tools it was offered), and goes
 * after `keepEndedTasks` on the platform's sweep, not only at start; a
 * process silent for `evictSilentAfter` heartbeat intervals is forgotten with its manifest.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Layer, Schedule, Stream, TestClock } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Timing, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { record, scale } from "../support/figures.js"

const tasksRun = scale(20, 200)

const tempFile = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-retention-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => join(dir, "journal.sqlite")
)

/** A manifest of one tool whose parameters' schema is about `bytes` long. */
const bigManifest = (bytes: number) => [
  new Toolkit.ManifestEntry({
    name: "big",
    description: "A tool with a large schema.",
    parameters: { type: "object", properties: { x: { type: "string", description: "x".repeat(bytes) } } },
    output: {},
    timeoutMillis: 1000,
    retries: 0,
    idempotent: false
  })
]

const platform = (options: Partial<PlatformServer.Options>) =>
  PlatformClient.layerTest.pipe(
    // Manifests of 1 MB, 30 of them: what is tested is retention, not the manifests' size limits.
    Layer.provideMerge(PlatformServer.layerHandlers({
      tokens: new Map([["tok", "agent-1"]]),
      maxManifestBytes: 2 * 1024 * 1024,
      maxManifestBytesPerAgent: 64 * 1024 * 1024,
      ...options
    })),
    Layer.provide(LanguageModel.layerScripted([{ text: "ok" }], { repeat: true, keepRequests: false })),
    Layer.provideMerge(Timing.layer({ heartbeat: Schedule.spaced("60 seconds"), platformSweep: Schedule.spaced("1 minute") })),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok"]]))))
  )

const caller = { agentId: "agent-1", processId: "p-big" }

/** The journal's tasks table, read by another connection: rows, and bytes of prompt + tools. */
const journalRows = (file: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = Context.get(yield* Layer.build(SqliteClient.layer({ filename: file })), SqlClient.SqlClient)
    const rows = yield* sql<{ readonly n: number; readonly bytes: number | null }>`SELECT COUNT(*) AS n,
      SUM(LENGTH(prompt) + LENGTH(tools)) AS bytes FROM journal_tasks`
    return { tasks: Number(rows[0]?.n ?? 0), bytes: Number(rows[0]?.bytes ?? 0) }
  })).pipe(Effect.orDie)

describe("the platform's retention (design: Hostile clients)", () => {
  it.effect(`${tasksRun} ended tasks with a 1 MB manifest: the journal keeps their ends and timelines, not the tools, then forgets them`, () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      yield* Effect.gen(function*() {
        const client = yield* PlatformClient.PlatformClient
        yield* client.register({ ...caller, manifest: bigManifest(1024 * 1024), manifestHash: "h" })
        const served = yield* Serve.makeConfig(yield* Toolkit.make())
        for (let i = 0; i < tasksRun; i++) {
          yield* served.runTask(`task ${i} ${"p".repeat(10_000)}`)
        }
        const ended = yield* journalRows(file)
        assert.strictEqual(ended.tasks, tasksRun)
        // Each keeps its final event and its prompt (10 KB, for its timeline); the tools it was given (1 MB) are gone.
        const prompts = Array.from({ length: tasksRun }, (_, i) => `task ${i} ${"p".repeat(10_000)}`.length)
        assert.strictEqual(ended.bytes, prompts.reduce((a, b) => a + b, 0) + tasksRun * "[]".length)
        const state = yield* PlatformServer.PlatformState
        assert.strictEqual(yield* state.taskCount, tasksRun)
        // keepEndedTasks (1 s here) later, the sweep forgets them, in memory and in the journal.
        yield* TestClock.adjust("1 minute")
        assert.strictEqual((yield* journalRows(file)).tasks, 0)
        assert.strictEqual(yield* state.taskCount, 0)
        const sizeMb = statSync(file).size / 1024 / 1024
        record({
          suite: "retention",
          measure: `journal after ${tasksRun} ended tasks with a 1 MB manifest (kept / after the sweep)`,
          value: `${ended.bytes} B of prompts and tools / 0 tasks; file ${sizeMb.toFixed(1)} MB`,
          expected: "final events and prompts, no tools"
        })
      }).pipe(Effect.provide(platform({ journal: file, keepEndedTasks: "1 second" })))
    }).pipe(Effect.scoped), 120_000)

  it.effect("an ended task is attachable for its final event until keepEndedTasks has passed on the Clock, then unknown", () =>
    Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make())
      const state = yield* PlatformServer.PlatformState
      const first = [...yield* Stream.runCollect(served.submitTask("go"))]
      const taskId = first[0]!.taskId
      assert.deepStrictEqual(first.map((e) => e._tag), ["TaskStarted", "TurnStarted", "ModelText", "TaskCompleted"])
      // 4 of the 5 minutes later (4 sweeps), it is still there for a client re-attaching.
      yield* TestClock.adjust("4 minutes")
      assert.strictEqual(yield* state.taskCount, 1)
      const again = [...yield* Stream.runCollect(served.attachTask(taskId))]
      assert.deepStrictEqual(again.map((e) => e._tag), ["TaskStarted", "TaskCompleted"])
      // The sweep at 5 minutes forgets it: no real time passed, only the TestClock.
      yield* TestClock.adjust("2 minutes")
      assert.strictEqual(yield* state.taskCount, 0)
      const error = yield* Effect.flip(served.runAttached(taskId))
      assert.strictEqual(error._tag, "UnknownTask")
    }).pipe(Effect.scoped, Effect.provide(platform({ keepEndedTasks: "5 minutes" }))))

  it.effect("30 processes that registered 1 MB manifests and went silent are forgotten after 10 intervals", () =>
    Effect.gen(function*() {
      const client = yield* PlatformClient.PlatformClient
      const state = yield* PlatformServer.PlatformState
      for (let i = 0; i < 30; i++) {
        yield* client.register({ agentId: "agent-1", processId: `p-${i}`, manifest: bigManifest(1024 * 1024), manifestHash: `h${i}` })
        // Registrations spread over time: the lifecycle budget (30 a minute) is not what is tested.
        yield* TestClock.adjust("3 seconds")
      }
      assert.strictEqual(yield* state.processCount("agent-1"), 30)
      yield* TestClock.adjust("9 minutes")
      assert.isAbove(yield* state.processCount("agent-1"), 0, "not before 10 silent intervals")
      yield* TestClock.adjust("3 minutes")
      assert.strictEqual(yield* state.processCount("agent-1"), 0)
      // A process that heartbeats is kept.
      yield* client.register({ agentId: "agent-1", processId: "alive", manifest: bigManifest(10), manifestHash: "a" })
      for (let i = 0; i < 15; i++) {
        yield* TestClock.adjust("60 seconds")
        yield* client.heartbeat({ agentId: "agent-1", processId: "alive", manifestHash: "a" })
      }
      assert.strictEqual(yield* state.processCount("agent-1"), 1)
      record({ suite: "retention", measure: "silent processes with 1 MB manifests held after 10 intervals", value: "0 of 30", expected: "0" })
    }).pipe(Effect.provide(platform({}))))
})
