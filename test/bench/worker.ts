/**
 * A worker call's round trip (design: Handler shapes; `WorkerPool.run` of an echo) beside a bare `worker_threads`
 * postMessage echo, sequential, both in this process. Run with `npm run bench` or `tsx test/bench/worker.ts`.
 */
import { Effect } from "effect"
import * as WorkerThreads from "node:worker_threads"
import * as WorkerPool from "../../src/WorkerPool.js"
import { report } from "./report.js"

const calls = 2_000
const rounds = 3

const bare = Effect.promise(async () => {
  const thread = new WorkerThreads.Worker(
    "require(\"node:worker_threads\").parentPort.on(\"message\", (m) => require(\"node:worker_threads\").parentPort.postMessage(m))",
    { eval: true }
  )
  const echo = (message: unknown) =>
    new Promise<unknown>((resolve) => {
      thread.once("message", resolve)
      thread.postMessage(message)
    })
  await echo({ warm: true })
  const times: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    const t0 = performance.now()
    for (let i = 0; i < calls; i++) await echo({ fn: "echo", input: { i } })
    times.push((performance.now() - t0) * 1000 / calls)
  }
  await thread.terminate()
  return median(times)
})

const pooled = Effect.scoped(Effect.gen(function*() {
  const pool = yield* WorkerPool.make({ module: new URL("../fixtures/workerJobs.ts", import.meta.url), size: 1 })
  yield* pool.run("echo", { warm: true })
  const times: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    const t0 = performance.now()
    for (let i = 0; i < calls; i++) yield* pool.run("echo", { i })
    times.push((performance.now() - t0) * 1000 / calls)
  }
  return median(times)
}))

const median = (xs: Array<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

Effect.runPromise(Effect.gen(function*() {
  const b = yield* bare
  const m = yield* pooled
  report({
    bench: "worker",
    measure: "WorkerPool.run round trip (echo), sequential",
    value: `${m.toFixed(1)} us/call`,
    baseline: `${b.toFixed(1)} us/call (bare worker_threads postMessage echo)`,
    ratio: (m / b).toFixed(1),
    target: undefined
  })
})).then(() => process.exit(0))
