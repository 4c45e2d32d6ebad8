/**
 * The delivery-dedupe store's cost per served call: calls per second and p50 latency of
 * `Idempotency.once` around a trivial call, SQLite file (WAL) against memory, in one run.
 * Run with `npm run bench`.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Idempotency, Invocation } from "../../src/index.js"
import { report } from "./report.js"
import { add } from "./tools.js"

const calls = 20_000
const warmup = 2_000
const claim = { toolName: "add", timeout: Duration.seconds(10), idempotent: true }

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const measure = (layer: Layer.Layer<Idempotency.Idempotency, unknown>, label: string) =>
  Effect.scoped(Effect.gen(function*() {
    const store = Context.get(yield* Layer.build(layer), Idempotency.Idempotency)
    const run = (i: number) =>
      store.once({ taskId: label, toolCallId: `c${i}` }, claim, Invocation.run(add, "{\"a\":1,\"b\":2}"))
    for (let i = 0; i < warmup; i++) yield* run(-i - 1)
    const latencies: Array<number> = []
    const t0 = performance.now()
    for (let i = 0; i < calls; i++) {
      const start = performance.now()
      yield* run(i)
      latencies.push((performance.now() - start) * 1000)
    }
    const seconds = (performance.now() - t0) / 1000
    return { callsPerSecond: calls / seconds, p50: median(latencies) }
  }))

const main = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "agent-tools-bench-"))
  const memory = yield* measure(Idempotency.layerMemory, "memory")
  const sqlite = yield* measure(Idempotency.layerSql({ filename: join(dir, "claims.sqlite") }), "sqlite")
  rmSync(dir, { recursive: true, force: true })
  report({
    bench: "claims",
    measure: "Idempotency.once around a trivial call, SQLite file (WAL)",
    value: `${sqlite.callsPerSecond.toFixed(0)} calls/s, p50 ${sqlite.p50.toFixed(1)} us`,
    baseline: `${memory.callsPerSecond.toFixed(0)} calls/s, p50 ${memory.p50.toFixed(1)} us (memory store)`,
    ratio: `+${(sqlite.p50 - memory.p50).toFixed(1)} us at p50`
  })
}).pipe(Effect.withTracerEnabled(false))

Effect.runPromise(main)
