// Real threads and real time: what is measured is that the event loop stays free (design: Handler shapes).
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, type Duration, Effect, Layer, Logger, Schedule, Schema } from "effect"
import { Invocation, LanguageModel, Timing, Tool, Toolkit, WorkerPool } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"

const jobs = new URL("./fixtures/workerJobs.ts", import.meta.url)

const burnTool = (pool: WorkerPool.WorkerPool, timeout: Duration.DurationInput = "10 seconds") =>
  Tool.make("burn", {
    description: "Burns CPU for millis.",
    input: { millis: Schema.Number },
    output: Schema.Number,
    timeout
  }, (input) => pool.run<number>("burn", input))

describe("WorkerPool (design: Handler shapes)", () => {
  it.live("while a worker burns 2 s of CPU, an async call and a timer each complete on time", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      // Warm: the thread and tsx are loaded before anything is timed.
      yield* Invocation.run(burnTool(pool), { millis: 1 })
      const sleeper = Tool.make("sleeper", { description: "Sleeps.", input: {}, timeout: "5 seconds" }, () =>
        new Promise<number>((resolve) => {
          const t0 = performance.now()
          setTimeout(() => resolve(performance.now() - t0), 200)
        }))
      const burning = yield* Effect.fork(Invocation.run(burnTool(pool), { millis: 2000 }))
      yield* Effect.sleep("100 millis")
      const t0 = performance.now()
      const slept = yield* Invocation.run(sleeper, {})
      const asyncLate = performance.now() - t0 - 200
      const tick = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const t = performance.now()
          setTimeout(() => resolve(performance.now() - t - 100), 100)
        })
      )
      const burnt = yield* burning
      console.log(`worker burning 2 s: async call ${asyncLate.toFixed(1)} ms late, timer ${tick.toFixed(1)} ms late`)
      assert.strictEqual(burnt.value, 2000)
      assert.isTrue(slept.success)
      assert.isBelow(asyncLate, 50)
      assert.isBelow(tick, 50)
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("while a worker burns 2 s of CPU, a serving process's heartbeats keep their 200 ms spacing", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      const tool = burnTool(pool)
      yield* Invocation.run(tool, { millis: 1 })
      yield* Serve.makeConfig(yield* Toolkit.make(tool))
      const state = yield* PlatformServer.PlatformState
      const beats = () => Effect.map(state.lifecycleCalls("agent-1"), (calls) => calls.heartbeat)
      const burning = yield* Effect.fork(Invocation.run(tool, { millis: 2000 }))
      // Each heartbeat's arrival, polled every 2 ms: the poll runs on the same loop, so it is late if the loop is.
      const arrivals: Array<number> = []
      let seen = yield* beats()
      const until = performance.now() + 1900
      while (performance.now() < until) {
        const now = yield* beats()
        if (now > seen) arrivals.push(performance.now())
        seen = now
        yield* Effect.sleep("2 millis")
      }
      yield* burning
      const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!)
      const worst = Math.max(...gaps.map((gap) => Math.abs(gap - 200)))
      console.log(`worker burning 2 s: ${arrivals.length} heartbeats, gaps ${gaps.map((g) => g.toFixed(0)).join(" ")} ms`)
      assert.isAtLeast(arrivals.length, 8)
      assert.isBelow(worst, 50)
    }).pipe(
      Effect.scoped,
      Effect.provide(PlatformClient.layerTest.pipe(
        Layer.provideMerge(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
        Layer.provide(LanguageModel.layerScripted([])),
        Layer.provideMerge(Timing.layer({ heartbeat: Schedule.spaced("200 millis") })),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]]))))
      ))
    ), { timeout: 20_000 })

  it.live("8 calls on a pool of 2 take about 4 times one call", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 2 })
      const tool = burnTool(pool)
      yield* Effect.all([Invocation.run(tool, { millis: 1 }), Invocation.run(tool, { millis: 1 })], { concurrency: 2 })
      let t0 = performance.now()
      yield* Invocation.run(tool, { millis: 300 })
      const one = performance.now() - t0
      t0 = performance.now()
      const results = yield* Effect.all(Array.from({ length: 8 }, () => Invocation.run(tool, { millis: 300 })), {
        concurrency: "unbounded"
      })
      const eight = performance.now() - t0
      console.log(`one call ${one.toFixed(0)} ms, 8 calls on 2 workers ${eight.toFixed(0)} ms (${(eight / one).toFixed(2)}x)`)
      assert.isTrue(results.every((r) => r.value === 300))
      assert.isAbove(eight / one, 3.5)
      assert.isBelow(eight / one, 5)
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a job past its deadline is stopped, its worker replaced, and the next call succeeds", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      yield* Invocation.run(burnTool(pool), { millis: 1 })
      const t0 = performance.now()
      const late = yield* Invocation.run(burnTool(pool, "300 millis"), { millis: 60_000 })
      const stoppedAfter = performance.now() - t0
      const next = yield* Invocation.run(burnTool(pool), { millis: 10 })
      assert.strictEqual(late.error, "burn timed out after 300 ms; its outcome is unknown")
      assert.isBelow(stoppedAfter, 1000)
      assert.strictEqual(next.value, 10)
      assert.strictEqual(pool.spawned(), 2)
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a crashed worker is a failure result; a thrown error keeps its name; the pool serves on", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      const crash = Tool.make("crash", { description: "Crashes.", input: {}, timeout: "5 seconds" }, () =>
        pool.run("crash", {}))
      const fails = Tool.make("fails", { description: "Fails.", input: {}, timeout: "5 seconds" }, () =>
        pool.run("fails", {}))
      const crashed = yield* Invocation.run(crash, {})
      const failed = yield* Invocation.run(fails, {})
      const next = yield* Invocation.run(burnTool(pool), { millis: 10 })
      assert.match(crashed.error!, /^WorkerCrashed: the worker running crash stopped/)
      assert.strictEqual(failed.error, "RangeError: the score is out of range")
      assert.strictEqual(next.value, 10)
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("a worker whose body throws from a timer after answering is retired without failing the next job, of any tool", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      const logs: Array<string> = []
      const logged = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logs.push(String(message))))
      const later = yield* pool.run("throwsLater", {})
      assert.strictEqual(later, "answered")
      yield* Effect.sleep("50 millis")
      const results = yield* Effect.forEach(Array.from({ length: 30 }, (_, i) => i), (i) => pool.run("echo", i)).pipe(
        Effect.provide(logged)
      )
      assert.deepStrictEqual(results, Array.from({ length: 30 }, (_, i) => i))
      assert.strictEqual(pool.spawned(), 2, "the worker was replaced once")
      assert.isTrue(logs.some((l) => l.includes("was retired: an exception escaped an earlier job (Error: thrown from a timer after the answer)")))
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("an output that cannot cross threads, or a throw with no text, is the call's error; the worker is kept", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      const tool = (fn: string) =>
        Tool.make(fn, { description: fn, input: {}, timeout: "5 seconds" }, () => pool.run(fn, {}))
      const fn = yield* Invocation.run(tool("returnsFunction"), {})
      const symbol = yield* Invocation.run(tool("returnsSymbol"), {})
      const noText = yield* Invocation.run(tool("throwsNoText"), {})
      assert.match(fn.error!, /^InvalidOutput: the output cannot cross threads \(.*could not be cloned/)
      assert.match(symbol.error!, /^InvalidOutput: the output cannot cross threads \(.*could not be cloned/)
      assert.strictEqual(noText.error, "Error: a thrown object that has no text")
      assert.strictEqual(yield* pool.run("echo", 7), 7)
      assert.strictEqual(pool.spawned(), 1, "no worker was lost")
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.live("an output over maxOutputBytes is refused in the worker, before it is copied here; a leak ends only its worker", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({
        module: jobs,
        size: 1,
        maxOutputBytes: 1024 * 1024,
        resourceLimits: { maxOldGenerationSizeMb: 64 }
      })
      const big = yield* Effect.flip(pool.run("big", { bytes: 2 * 1024 * 1024 }))
      assert.strictEqual(big._tag, "InvalidOutput")
      assert.match(big.message, /^the output is \d+ bytes, over the pool's maxOutputBytes \(1048576\)$/)
      assert.strictEqual((yield* pool.run<string>("big", { bytes: 1000 })).length, 1000)
      const before = process.memoryUsage().rss
      const leak = yield* Effect.flip(pool.run("leaks", {}))
      assert.strictEqual(leak._tag, "WorkerCrashed")
      assert.include(leak.message, "the worker running leaks stopped")
      assert.isBelow(process.memoryUsage().rss - before, 512 * 1024 * 1024, "the leak was bounded by its worker's heap")
      assert.strictEqual(yield* pool.run("echo", 1), 1)
    }).pipe(Effect.scoped), { timeout: 30_000 })

  it.live("a pool's workers have a heap bound by default", () =>
    Effect.gen(function*() {
      const pool = yield* WorkerPool.make({ module: jobs, size: 1 })
      const limits = yield* pool.run<{ maxOldGenerationSizeMb: number }>("limits", {})
      assert.strictEqual(limits.maxOldGenerationSizeMb, WorkerPool.defaultResourceLimits.maxOldGenerationSizeMb)
    }).pipe(Effect.scoped), { timeout: 20_000 })

  it.effect("a module that is not there is refused by make, naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(WorkerPool.make({ module: new URL("./fixtures/missing.ts", import.meta.url) }))
      assert.strictEqual(error._tag, "ModuleNotFound")
      assert.match(error.message, /fixtures\/missing\.ts does not exist$/)
    }).pipe(Effect.scoped))
})
