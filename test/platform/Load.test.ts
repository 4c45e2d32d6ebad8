/**
 * Load: many concurrent tasks of 10 tool calls each, through the platform on a real
 * WebSocket on 127.0.0.1 and one serving process. Every task ends with the right output, every call
 * runs exactly once; calls per second, per-call latency, and the heap after the run back within 20%
 * of the heap before it. `npm test`: 100 tasks; `npm run soak`: 1,000.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, ConfigProvider, Duration, Effect, Layer, Schedule, Schema, Stream } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Hooks, Idempotency, LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { record, scale } from "../support/figures.js"

const tasks = scale(100, 1_000)
// Two turns of five calls: the usual agent shape (design: Calls in a turn; calls of one turn run at once; the second
// turn depends on the first's results), and five calls in flight per task.
const turns = 2
const width = 5
const calls = tasks * turns * width
// Long enough that no call comes near it, however slow the machine; the dedupe store keeps calls as long.
const timeout = Duration.minutes(5)

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

/** Heap used after full collections, once pending callbacks have run. */
const settledHeap = Effect.promise(async () => {
  for (let i = 0; i < 4; i++) {
    gc()
    await new Promise((resolve) => setImmediate(resolve))
  }
  return process.memoryUsage().heapUsed
})

const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)

// Instruments allocated once, before the heap is measured: the run itself adds nothing of the test's.
const runs = new Uint8Array(calls)
const latencies = new Float64Array(calls)
let latencyCount = 0

/** The platform's model: the prompt is the task's number; two turns of five calls, then the results. */
const script: LanguageModel.ScriptedTurn = (request) => {
  const first = request.messages[0]
  const task = first?._tag === "UserMessage" ? Number(first.text) : -1
  const results = request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : [])
  const turn = results.length / width
  if (turn >= turns) return { text: results.join(",") }
  return {
    toolCalls: Array.from({ length: width }, (_, i) => {
      const n = turn * width + i
      return { id: `c${n}`, name: "step", arguments: JSON.stringify({ task, n }) }
    })
  }
}

const expected = (task: number) => Array.from({ length: turns * width }, (_, n) => `"${task}:${n}"`).join(",")

const step = Tool.make("step", {
  description: "Step n of a task.",
  input: { task: Schema.Number, n: Schema.Number },
  output: Schema.String,
  timeout
}, ({ n, task }) =>
  Effect.sync(() => {
    runs[task * turns * width + n]!++
    return `${task}:${n}`
  }))

// Latency of a call as the platform sees it: from delivering it on the task's stream to receiving its
// answer (a tool hook around the platform's side of the call).
const timing = Hooks.layer({
  tool: [(_, proceed) =>
    Effect.suspend(() => {
      const start = performance.now()
      return Effect.tap(proceed, () =>
        Effect.sync(() => {
          latencies[latencyCount++ % calls] = performance.now() - start
        }))
    })]
})

// The dedupe store keeps each call for its tool's timeout (design: Delivery dedupe). Its clock can skip ahead, so that the
// test sees the store after that time without waiting a minute.
let skippedMillis = 0
const live = Clock.make()
const skipping: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() + skippedMillis,
  currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() + skippedMillis),
  unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos() + BigInt(skippedMillis) * 1_000_000n,
  currentTimeNanos: Effect.sync(() => live.unsafeCurrentTimeNanos() + BigInt(skippedMillis) * 1_000_000n),
  sleep: (duration) => live.sleep(duration)
}
const sweepOften = Timing.layer({ dedupeSweep: Schedule.spaced("100 millis") })
const store = Layer.scopedContext(
  // The store's clock only: `Layer.setClock` would reach the serving process's deadlines too.
  Effect.withClock(Layer.build(Idempotency.layerMemory.pipe(Layer.provide(sweepOften))), skipping)
)

describe("load", () => {
  it.live(`${tasks} concurrent tasks of ${turns * width} calls through the platform over WebSocket`, () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "load"]]) })),
          Layer.provide(LanguageModel.layerScripted([script], { repeat: true, keepRequests: false })),
          Layer.provide(timing)
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, context)
      const settings = Layer.setConfigProvider(
        ConfigProvider.fromMap(new Map([["AGENT_ID", "load"], ["PLATFORM_TOKEN", "tok"], ["PLATFORM_URL", url]]))
      )
      yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(step))
        const dedupe = yield* Idempotency.Idempotency

        /** All tasks at once; how many ended with the wrong output, and how many deliveries the calls took. */
        const load = Effect.gen(function*() {
          runs.fill(0)
          latencyCount = 0
          let wrong = 0
          let deliveries = 0
          yield* Effect.forEach(
            Array.from({ length: tasks }, (_, task) => task),
            (task) =>
              Effect.map(
                Stream.runFold(served.submitTask(String(task)), "", (output, event) => {
                  if (event._tag === "ToolCallRequested") deliveries++
                  return event._tag === "TaskCompleted" ? event.output : output
                }),
                (output) => {
                  if (output !== expected(task)) wrong++
                }
              ),
            { concurrency: "unbounded", discard: true }
          )
          return { wrong, deliveries }
        })

        /** Past every call's timeout, the dedupe store has let go of all of them; then its clock is back. */
        const expire = Effect.gen(function*() {
          skippedMillis = Duration.toMillis(timeout) + 1_000
          const sweeps = Schedule.spaced("20 millis").pipe(Schedule.upTo("5 seconds"))
          yield* Effect.repeat(dedupe.size, { until: (size) => size === 0, schedule: sweeps })
          skippedMillis = 0
          assert.strictEqual(yield* dedupe.size, 0, "the dedupe store let go of every call past its timeout")
        })

        // Warm-up: the same load, so JIT code, pools and one-time caches are in place before measuring.
        assert.strictEqual((yield* load).wrong, 0)
        yield* expire
        const before = yield* settledHeap

        const started = performance.now()
        const { deliveries, wrong } = yield* load
        const seconds = (performance.now() - started) / 1000

        assert.strictEqual(wrong, 0, "every task ended with its calls' results, in order")
        assert.strictEqual(runs.filter((n) => n === 1).length, calls, "every call ran exactly once")
        assert.strictEqual(latencyCount, calls, "every call was timed once")
        assert.isAtLeast(deliveries, calls, "every call was delivered")
        const held = yield* dedupe.size
        assert.strictEqual(held, calls, "the dedupe store holds every call until its timeout")
        const sorted = Array.from(latencies).sort((a, b) => a - b)
        const p50 = sorted[Math.floor(calls * 0.5)]!
        const p99 = sorted[Math.floor(calls * 0.99)]!

        yield* expire
        const after = yield* settledHeap
        const ratio = after / before
        const callsPerSecond = calls / seconds

        const figures: Array<[string, string | number, string?]> = [
          ["tasks completed", `${tasks - wrong} of ${tasks}`, `= ${tasks}`],
          ["tool calls run exactly once", calls, `= ${calls}`],
          // At least once: a call unanswered after the redelivery interval is delivered again (design: The platform).
          ["deliveries (a redelivery joins the first run)", deliveries, `>= ${calls}`],
          ["duration", `${seconds.toFixed(2)} s`],
          ["calls/s", Math.round(callsPerSecond)],
          ["call latency p50 (platform delivers -> answer received)", `${p50.toFixed(1)} ms`],
          ["call latency p99", `${p99.toFixed(1)} ms`],
          ["dedupe entries: after the run / past the tool timeout", `${held} / 0`],
          ["heap before (after warm-up, GC)", `${mb(before)} MB`],
          ["heap after (GC, dedupe entries expired)", `${mb(after)} MB`],
          ["heap after / before", ratio.toFixed(2), "<= 1.20"]
        ]
        for (const [measure, value, bar] of figures) record({ suite: "load", measure, value, expected: bar })
        console.log(`load: ${figures.map(([m, v]) => `${m}: ${v}`).join("; ")}`)
        assert.isAtMost(ratio, 1.2, `heap after the run ${mb(after)} MB, before ${mb(before)} MB: more than 20% up`)
      }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(Layer.provideMerge(PlatformClient.layer, settings), store)))
    }).pipe(Effect.scoped, Effect.withTracerEnabled(false)), scale(60_000, 600_000))
})
