/**
 * Durable claims proven by killing the process (design: Delivery dedupe): a serving child process is killed with
 * SIGKILL at random points around its side effect; a new child with the same SQLite file attaches
 * to the task and the platform delivers the call again. The side effect never happens twice.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Timing } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { startChild } from "../support/childProcess.js"
import { record, scale } from "../support/figures.js"

const rounds = scale(20, 50)
const points = ["before", "after-effect", "returning"] as const

// Each task: call append_line once (the call id names the round), then report its result.
const script: LanguageModel.ScriptedTurn = (request) => {
  const results = request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : [])
  if (results.length > 0) return { text: results.join() }
  const first = request.messages[0]
  const prompt = first?._tag === "UserMessage" ? first.text : ""
  return { toolCalls: [{ id: prompt, name: "append_line", arguments: "{}" }] }
}

const startCrashChild = (env: Record<string, string>) => startChild("test/support/crashChild.ts", env)

describe("durable claims under SIGKILL", () => {
  it.live(`${rounds} rounds: an idempotent call's side effect never happens twice; every call ends`, () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "agent-tools-crash-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const effectFile = join(dir, "effects.txt")
      writeFileSync(effectFile, "")
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          // 40 processes come and go within a minute: more lifecycle calls than the default budget allows.
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "crash-agent"]]), lifecycleBudget: 1000 })),
          Layer.provide(LanguageModel.layerScripted([script], { repeat: true, keepRequests: false })),
          Layer.provide(Timing.layer({ redelivery: Schedule.spaced("200 millis") }))
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, context)
      const env = {
        PLATFORM_URL: url,
        AGENT_ID: "crash-agent",
        PLATFORM_TOKEN: "tok",
        CLAIMS_DB: join(dir, "claims.sqlite"),
        EFFECT_FILE: effectFile
      }
      const counts = { killed: 0, finishedBeforeKill: 0, result: 0, unknown: 0, secondEffects: 0 }
      const byPoint: Record<string, number> = {}
      for (let round = 1; round <= rounds; round++) {
        const callId = `round-${round}`
        const point = points[Math.floor(Math.random() * points.length)]!
        const delay = Math.floor(Math.random() * 10)
        const first = startCrashChild({ ...env, MODE: "submit", PROMPT: callId })
        const task = yield* Effect.promise(() => first.waitFor("task:", 60_000))
        assert.isDefined(task, `round ${round}: the task started`)
        const reached = yield* Effect.promise(() => first.waitFor(`point:${point}`, 60_000))
        if (reached !== undefined) {
          yield* Effect.sleep(delay)
          first.process.kill("SIGKILL")
        }
        yield* Effect.promise(() => first.exited)
        const firstOutput = first.lines.find((l) => l.startsWith("output:"))
        if (firstOutput !== undefined) counts.finishedBeforeKill++
        else counts.killed++
        byPoint[point] = (byPoint[point] ?? 0) + 1

        const second = startCrashChild({ ...env, MODE: "attach", TASK_ID: task!.slice("task:".length) })
        const output = yield* Effect.promise(() => second.waitFor("output:", 90_000))
        second.process.kill("SIGTERM")
        yield* Effect.promise(() => second.exited)
        assert.isDefined(output, `round ${round} (${point} +${delay} ms): the task ended, nothing hung`)
        const text = JSON.parse(output!.slice("output:".length)) as string
        if (text === "\"appended\"") counts.result++
        else if (text === "append_line: the earlier attempt did not finish; its outcome is unknown") counts.unknown++
        else assert.fail(`round ${round}: unexpected output ${text}`)

        const lines = readFileSync(effectFile, "utf8").split("\n").filter((l) => l === callId)
        if (lines.length > 1) counts.secondEffects++
        assert.isAtMost(lines.length, 1, `round ${round} (${point} +${delay} ms): the side effect ran twice`)
        // "outcome unknown" is honest only when the effect may have happened: never after a stored result.
        if (text === "\"appended\"") assert.strictEqual(lines.length, 1)
      }
      console.log(
        `crash test, ${rounds} rounds: kill points ${JSON.stringify(byPoint)}; ` +
          `killed ${counts.killed}, finished before the kill ${counts.finishedBeforeKill}; ` +
          `ended with the result ${counts.result}, with "outcome unknown" ${counts.unknown}; ` +
          `a second side effect: never`
      )
      const figure = (measure: string, value: string | number, expected?: string) =>
        record({ suite: "crash (SIGKILL)", measure, value, expected })
      figure("rounds", rounds)
      figure("kill points", Object.entries(byPoint).map(([point, n]) => `${point} ${n}`).join(", "))
      figure("killed mid-call / finished before the kill", `${counts.killed} / ${counts.finishedBeforeKill}`)
      figure("calls ended (result / outcome unknown)", `${counts.result + counts.unknown} (${counts.result} / ${counts.unknown})`, `${rounds}`)
      figure("second side effects", counts.secondEffects, "0")
      assert.strictEqual(counts.result + counts.unknown, rounds)
    }).pipe(Effect.scoped), scale(900_000, 1_800_000))
})
