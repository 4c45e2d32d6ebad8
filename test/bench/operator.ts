/**
 * The operator API's listing on a journal of 10,000 tasks (docs: operations): the latency of the first page of
 * `GET /api/v1/tasks?status=waiting-for-approval&agent=...`, over real HTTP to the embedded platform on
 * 127.0.0.1, its journal a SQLite file (WAL). The tasks are written to the journal while the platform runs (20
 * agents; 70 % ended, 20 % running, 10 % waiting for approval, made over the last ten minutes), so that none of
 * them runs. Baseline: the same read through the `Journal` in process, no HTTP. Run with `npm run bench`.
 */
import { Context, Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Journal, LanguageModel } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { clockAt } from "../support/operators.js"
import { report } from "./report.js"

const tasks = 10_000
const agents = 20
const requests = 500
const warmup = 50
const token = "bench-operator-token-0123456789"

const percentile = (xs: ReadonlyArray<number>, p: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)]!

/** 10,000 tasks of 20 agents: every tenth waiting for approval, two in ten running, the rest ended. */
const fill = (journal: Journal.Journal["Type"]) =>
  Effect.gen(function*() {
    const now = Date.now()
    for (let i = 0; i < tasks; i++) {
      const taskId = `task-${String(i).padStart(5, "0")}`
      const record = { runId: taskId, kind: "task" as const, agentId: `agent-${i % agents}`, processId: "p", prompt: "go", tools: [] }
      yield* Effect.withClock(journal.started(record), clockAt(now - 600_000 + i * 60))
      const kind = Math.floor(i / agents) % 10
      if (kind === 0) {
        const approval = { toolCallId: "r1", toolName: "refund", input: "{}", inputKey: "{}", fingerprint: "f", expiresAt: now + 3_600_000 }
        yield* journal.suspended(taskId, [approval])
      } else if (kind >= 3) {
        yield* journal.ended(taskId, { final: JSON.stringify({ _tag: "TaskCompleted", taskId, output: "ok" }) }, now)
      }
    }
  })

const main = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "agent-tools-bench-operator-"))
  const handlers = yield* Layer.build(
    PlatformServer.layerHandlers({
      tokens: new Map([["tok", "agent-0"]]),
      journal: join(dir, "journal.sqlite"),
      operatorTokens: [{ token: Redacted.make(token), role: "viewer", name: "bench" }]
    }).pipe(Layer.provideMerge(LanguageModel.layerScripted([])))
  )
  const listening = yield* Layer.build(PlatformServer.layerWebSocket({ port: 0 }).pipe(Layer.provide(Layer.succeedContext(handlers))))
  const { port } = Context.get(listening, PlatformServer.Listening)
  // The platform's own journal: the one its API reads.
  const journal = Context.get(yield* Layer.build(Journal.layerSql({ filename: join(dir, "journal.sqlite") })), Journal.Journal)
  const filling = performance.now()
  yield* fill(journal)
  const filled = performance.now() - filling
  const url = `http://127.0.0.1:${port}/api/v1/tasks?status=waiting-for-approval&agent=agent-7`
  const page = () =>
    Effect.promise(async () => {
      const start = performance.now()
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } })
      const body = await response.json() as { readonly tasks: ReadonlyArray<unknown> }
      if (response.status !== 200 || body.tasks.length !== 50) throw new Error(`status ${response.status}, ${body.tasks.length} tasks`)
      return performance.now() - start
    })
  const direct = () =>
    Effect.gen(function*() {
      const start = performance.now()
      yield* Effect.orDie(journal.listTasks({ agentId: "agent-7", status: "suspended", limit: 51 }))
      return performance.now() - start
    })
  for (let i = 0; i < warmup; i++) yield* Effect.zip(page(), direct())
  const overHttp: Array<number> = []
  const inProcess: Array<number> = []
  for (let i = 0; i < requests; i++) {
    overHttp.push(yield* page())
    inProcess.push(yield* direct())
  }
  rmSync(dir, { recursive: true, force: true })
  const [p50, p95] = [percentile(overHttp, 0.5), percentile(overHttp, 0.95)]
  report({
    bench: "operator",
    measure: `GET /api/v1/tasks?status=waiting-for-approval&agent=..., first page (50) of ${tasks} journaled tasks ` +
      `(SQLite file, WAL; written in ${(filled / 1000).toFixed(1)} s), p50 and p95 of ${requests}`,
    value: `${p50.toFixed(2)} ms (p95 ${p95.toFixed(2)} ms)`,
    baseline: `${percentile(inProcess, 0.5).toFixed(2)} ms the journal's read in process`,
    ratio: `${(p50 / percentile(inProcess, 0.5)).toFixed(1)}x`,
    target: "p95 < 50 ms"
  })
}).pipe(Effect.scoped, Effect.withTracerEnabled(false))

Effect.runPromise(main)
