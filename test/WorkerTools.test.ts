/**
 * Sync bodies off the event loop in one line (design: Worker threads): a tool made with
 * `worker: import.meta.url` runs on a worker thread started before the first call; one left on the
 * loop that holds it is named in a warning. Real time is the point here: in the slow project.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, ManagedRuntime, Schema } from "effect"
import { existsSync, readdirSync } from "node:fs"
import { Agent, Invocation, LanguageModel, Tool, Toolkit, WorkerPool } from "../src/index.js"
import { rejects, scoreOnLoop, scorePatiently, scorePriority, scopedOnWorker, spins } from "./fixtures/workerTools.js"
import { timerDelays } from "./support/loopDelays.js"

const echo = Tool.make("echo", { description: "Echo.", input: { text: Schema.String }, timeout: "1 second" }, ({ text }) => text)
const count = Tool.make("count", { description: "Count.", input: { text: Schema.String }, timeout: "1 second" }, async ({ text }) =>
  text.length)

const oneTurn = (score: Tool.Any) =>
  LanguageModel.layerScripted([
    {
      toolCalls: [
        { id: "c1", name: score.name, arguments: JSON.stringify({ ticket: "T-1", millis: 300 }) },
        { id: "c2", name: "echo", arguments: "{\"text\":\"hi\"}" },
        { id: "c3", name: "count", arguments: "{\"text\":\"hello\"}" }
      ]
    },
    { text: "done" }
  ])

/** The threads of this process as the OS counts them (each worker is one), where it shows them (Linux). */
const osThreads = (): number | undefined => existsSync("/proc/self/task") ? readdirSync("/proc/self/task").length : undefined

/** Asserts the OS counts `expected` threads, where it can tell; waits a little for exits to be counted. */
const assertOsThreads = (expected: number | undefined) =>
  Effect.gen(function*() {
    if (expected === undefined) return
    for (let tries = 0; tries < 50 && osThreads() !== expected; tries++) yield* Effect.sleep("20 millis")
    assert.strictEqual(osThreads(), expected)
  })

const scoreArgs = { ticket: "T-1", millis: 1 }

describe("worker: import.meta.url (design: Worker threads)", () => {
  it.live("three tools in one turn, a 300 ms CPU-bound body on a worker: the loop stays free; the first call fits a 1 s timeout", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [scorePriority, echo, count] })
      const { delays, value } = yield* timerDelays(Agent.run(agent, "score it").pipe(Effect.provide(oneTurn(scorePriority))))
      const max = Math.max(...delays)
      console.log(`worker body: ${delays.length} timer ticks, largest delay ${max.toFixed(1)} ms`)
      assert.deepStrictEqual(value.toolCalls.map((c) => c.result.error), [undefined, undefined, undefined])
      assert.deepStrictEqual(value.toolCalls[0]!.result.value, { ticket: "T-1", score: 300, thread: true })
      assert.isBelow(max, 50)
      assert.isAtLeast(delays.length, 20)
    }).pipe(Effect.provide(WorkerPool.layerTools([scorePriority]))), 60_000)

  it.live("without a layer, an agent run starts the workers as it opens: its first call does not pay for them", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [scorePriority, echo, count] })
      const result = yield* Agent.run(agent, "score it").pipe(Effect.provide(oneTurn(scorePriority)))
      assert.strictEqual(result.toolCalls[0]!.result.error, undefined)
    }), 60_000)

  it.live("two runtimes, each with its pools (layerTools): each runs a worker tool; closed, they leave no thread", () =>
    Effect.gen(function*() {
      // Warm: a call's own worker loads the module (and tsx) once before anything is counted.
      assert.strictEqual((yield* Invocation.run(scorePatiently, scoreArgs)).error, undefined)
      const before = osThreads()
      const runtimes = [1, 2].map(() => ManagedRuntime.make(WorkerPool.layerTools([scorePriority], { size: 2 })))
      const pools = []
      for (const runtime of runtimes) {
        const result = yield* Effect.promise(() => runtime.runPromise(Invocation.run(scorePriority, scoreArgs)))
        assert.deepStrictEqual(result.value, { ticket: "T-1", score: 1, thread: true })
        pools.push(yield* Effect.promise(() => runtime.runPromise(WorkerPool.ToolWorkers)))
      }
      assert.deepStrictEqual(pools.map((pool) => pool.threads()), [2, 2])
      // Each worker is a thread of the process or more (a `.ts` module's loader hooks have one of their own).
      if (before !== undefined) assert.isAtLeast(osThreads()!, before + 4)
      yield* Effect.promise(() => runtimes[0]!.dispose())
      assert.deepStrictEqual(pools.map((pool) => pool.threads()), [0, 2])
      yield* Effect.promise(() => runtimes[1]!.dispose())
      assert.deepStrictEqual(pools.map((pool) => pool.threads()), [0, 0])
      yield* assertOsThreads(before)
    }), 60_000)

  it.live("no pools provided: a call runs on a worker of its own, an agent run on pools of its own; none is left after", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* Invocation.run(scorePatiently, scoreArgs)).error, undefined)
      const before = osThreads()
      const own = yield* Invocation.run(scorePatiently, scoreArgs)
      assert.deepStrictEqual(own.value, { ticket: "T-1", score: 1, thread: true })
      yield* assertOsThreads(before)
      const agent = Agent.make({ tools: [scorePriority, echo, count] })
      const result = yield* Agent.run(agent, "score it").pipe(Effect.provide(oneTurn(scorePriority)))
      assert.strictEqual(result.toolCalls[0]!.result.error, undefined)
      yield* assertOsThreads(before)
    }), 60_000)

  it.live("an Effect body on a worker has what a call gives: its ToolContext and its Scope", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(scopedOnWorker, {}, { toolCallId: "call-7" })
      assert.deepStrictEqual(result.value, { toolCallId: "call-7", events: ["inner", "inner released", "call's"], thread: true })
    }), 60_000)

  it.live("the same body left on the loop: the timer waits for it, and a warning names the tool and the line that moves it", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => void lines.push(String(message))))
      const agent = Agent.make({ tools: [scoreOnLoop, echo, count] })
      const { delays } = yield* timerDelays(
        Agent.run(agent, "score it").pipe(Effect.provide(Layer.merge(oneTurn(scoreOnLoop), capture)))
      )
      const max = Math.max(...delays)
      console.log(`body on the loop: largest timer delay ${max.toFixed(1)} ms`)
      assert.isAbove(max, 250)
      const warning = lines.find((line) => line.includes("held the event loop"))
      assert.isDefined(warning)
      assert.match(warning!, /^score_on_loop held the event loop for \d+ ms/)
      assert.include(warning!, "worker: import.meta.url")
    }), 60_000)

  it.live("a worker's throw is the call's error text; a deadline stops the worker; a tool the module does not export is named", () =>
    Effect.gen(function*() {
      const failed = yield* Invocation.run(rejects, {})
      assert.strictEqual(failed.error, "RangeError: the score is out of range")
      const stopped = yield* Invocation.run(spins, {})
      assert.strictEqual(stopped.failure?._tag, "TimedOut")
      const hidden = Tool.make("hidden", { description: "Not exported.", input: {}, timeout: "10 seconds", worker: rejects.worker }, () => 1)
      const missing = yield* Invocation.run(hidden, {})
      assert.match(missing.error!, /exports no tool named hidden: export it/)
    }).pipe(Effect.provide(WorkerPool.layerTools([rejects, spins]))), 60_000)

  it.effect("Toolkit.make refuses a worker that is not a module's URL", () =>
    Effect.gen(function*() {
      const bad = Tool.make("bad", { description: "Bad.", input: {}, timeout: "1 second", worker: "score.ts" }, () => 1)
      const error = yield* Effect.flip(Toolkit.make(bad))
      assert.deepStrictEqual(error.violations.map((v) => v.rule), ["worker-module"])
      assert.include(error.violations[0]!.message, "worker: import.meta.url")
    }))
})
