/**
 * Graceful shutdown proven with real processes (design: Interruption and shutdown): a serving child process with SQLite claims is
 * sent SIGTERM while an idempotent call runs. It drains (the call finishes within the grace period
 * and its answer reaches the task) or, past the grace period, interrupts the call, which then reads
 * "outcome unknown"; a restarted child takes its task back by itself (no task id given).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Idempotency, LanguageModel, Timing } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Child, startChild } from "../support/childProcess.js"
import { record, scale } from "../support/figures.js"

const rounds = scale(3, 20)
const points = ["task", "before", "after-effect", "returning"] as const

/** The platform in this process; each task calls append_line once (id: the prompt), then answers. */
const platform = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "agent-tools-shutdown-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const effectFile = join(dir, "effects.txt")
  writeFileSync(effectFile, "")
  // What the model read back, by call id: set when the task's last turn runs.
  const finals = new Map<string, string>()
  const script: LanguageModel.ScriptedTurn = (request) => {
    const first = request.messages[0]
    const prompt = first?._tag === "UserMessage" ? first.text : ""
    const results = request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : [])
    if (results.length === 0) return { toolCalls: [{ id: prompt, name: "append_line", arguments: "{}" }] }
    finals.set(prompt, results.join())
    return { text: results.join() }
  }
  const context = yield* Layer.build(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "shutdown-agent"]]), lifecycleBudget: 1000 })),
      Layer.provide(LanguageModel.layerScripted([script], { repeat: true, keepRequests: false })),
      Layer.provide(Timing.layer({ redelivery: Schedule.spaced("200 millis") }))
    )
  )
  const env = {
    PLATFORM_URL: yield* Effect.provide(PlatformServer.url, context),
    AGENT_ID: "shutdown-agent",
    PLATFORM_TOKEN: "tok",
    CLAIMS_DB: join(dir, "claims.sqlite"),
    EFFECT_FILE: effectFile
  }
  const effects = (callId: string) => readFileSync(effectFile, "utf8").split("\n").filter((l) => l === callId).length
  /** The model's last read of `callId`, once the task got there (undefined after `timeoutMillis`). */
  const final = (callId: string, timeoutMillis: number) =>
    Effect.gen(function*() {
      const until = Date.now() + timeoutMillis
      while (!finals.has(callId) && Date.now() < until) yield* Effect.sleep("20 millis")
      return finals.get(callId)
    })
  const start = (extra: Record<string, string>) =>
    Effect.acquireRelease(
      Effect.sync(() => startChild("test/support/crashChild.ts", { ...env, ...extra })),
      (child) => Effect.promise(() => stop(child))
    )
  return { effects, final, start }
})

/** SIGTERM, and the time it took to exit (ms). */
const stop = async (child: Child): Promise<number> => {
  const sent = Date.now()
  if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGTERM")
  await child.exited
  return Date.now() - sent
}

const wait = (child: Child, prefix: string) => Effect.promise(() => child.waitFor(prefix, 60_000))

describe("graceful shutdown under SIGTERM (design: Interruption and shutdown)", () => {
  it.live("the default grace period: a refund 1.5 s into its 5 s body completes, and its result reaches the task", () =>
    Effect.gen(function*() {
      const { effects, final, start } = yield* platform
      const child = yield* start({ MODE: "submit", PROMPT: "graceful", BEFORE_MS: "1000", AFTER_MS: "4000" })
      assert.isDefined(yield* wait(child, "point:before"))
      yield* Effect.sleep("1500 millis")
      const tookMillis = yield* Effect.promise(() => stop(child))
      // It waited for the body's last 3.5 s, not longer than the body and a second to close.
      assert.isAtLeast(tookMillis, 3000)
      assert.isBelow(tookMillis, 10_000)
      assert.strictEqual(yield* final("graceful", 10_000), "\"appended\"")
      assert.strictEqual(effects("graceful"), 1)
    }).pipe(Effect.scoped), 60_000)

  it.live("a 1 s grace period: the call is interrupted; a restarted process takes the task back by itself and reads outcome unknown", () =>
    Effect.gen(function*() {
      const { effects, final, start } = yield* platform
      const env = { GRACE_MS: "1000", BEFORE_MS: "1000", AFTER_MS: "4000" }
      const first = yield* start({ ...env, MODE: "submit", PROMPT: "interrupted" })
      assert.isDefined(yield* wait(first, "point:before"))
      yield* Effect.sleep("1500 millis")
      const tookMillis = yield* Effect.promise(() => stop(first))
      // The body had 3.5 s to go: stopping well before that is the grace period at work.
      assert.isBelow(tookMillis, 3400)
      assert.isFalse(first.lines.includes("point:returning"), "the body did not finish")
      assert.strictEqual(effects("interrupted"), 1)
      // No task id: the restarted process finds the task it held in its store.
      const second = yield* start({ ...env, MODE: "resume" })
      assert.isDefined(yield* wait(second, "serving"))
      assert.strictEqual(yield* final("interrupted", 30_000), Idempotency.interruptedUnknown("append_line"))
      assert.strictEqual(effects("interrupted"), 1)
      assert.isFalse(second.lines.includes("point:before"), "the refund did not run again")
    }).pipe(Effect.scoped), 60_000)

  it.live(`${rounds} rounds of SIGTERM at random points: side effects = unique calls, no call lost`, () =>
    Effect.gen(function*() {
      const { effects, final, start } = yield* platform
      const byPoint: Record<string, number> = {}
      let ended = 0
      let sideEffects = 0
      for (let round = 1; round <= rounds; round++) {
        const callId = `round-${round}`
        const point = points[Math.floor(Math.random() * points.length)]!
        const delay = Math.floor(Math.random() * 10)
        byPoint[point] = (byPoint[point] ?? 0) + 1
        yield* Effect.scoped(Effect.gen(function*() {
          const first = yield* start({ MODE: "submit", PROMPT: callId, BEFORE_MS: "50", AFTER_MS: "50" })
          if ((yield* wait(first, point === "task" ? "task:" : `point:${point}`)) !== undefined) yield* Effect.sleep(delay)
          yield* Effect.promise(() => stop(first))
          const second = yield* start({ MODE: "resume" })
          const text = yield* final(callId, 60_000)
          assert.strictEqual(text, "\"appended\"", `round ${round} (${point} +${delay} ms): the call ended with its result`)
          assert.strictEqual(effects(callId), 1, `round ${round} (${point} +${delay} ms): one side effect`)
          yield* Effect.promise(() => stop(second))
          ended++
          sideEffects += effects(callId)
        }))
      }
      const figure = (measure: string, value: string | number, expected?: string) =>
        record({ suite: "shutdown (SIGTERM)", measure, value, expected })
      figure("rounds (default grace period)", rounds)
      figure("SIGTERM points", Object.entries(byPoint).map(([point, n]) => `${point} ${n}`).join(", "))
      figure("side effects = unique calls", `${sideEffects} = ${rounds}`, "equal")
      figure("calls lost", rounds - ended, "0")
    }).pipe(Effect.scoped), scale(300_000, 1_800_000))
})
