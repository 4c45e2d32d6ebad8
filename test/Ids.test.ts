// @effect-diagnostics globalErrorInEffectFailure:off
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Stream } from "effect"
import { spawn } from "node:child_process"
import { Agent, Ids, LanguageModel, Tool, ToolContext, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"

// `<kind>-` then a UUID v4: 128 bits less the version nibble (4) and the 2 variant bits = 122 random bits.
const uuidV4 = (kind: string) =>
  new RegExp(`^${kind}-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

/** Runs test/support/idsChild.ts in a process of its own: the task ids its 1,000 runs' tool calls carried. */
const childRuns = Effect.async<ReadonlyArray<string>, Error>((resume) => {
  const child = spawn(process.execPath, ["--import", "tsx", "test/support/idsChild.ts"], {
    env: { ...process.env, RUNS: "1000" },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let err = ""
  child.stdout.on("data", (chunk) => out += String(chunk))
  child.stderr.on("data", (chunk) => err += String(chunk))
  child.on("close", (code) => {
    if (code !== 0) return resume(Effect.fail(new Error(`idsChild exited with ${code}: ${err}`)))
    // Its answer is the one JSON line; a warning the child logged on a loaded machine is not.
    const answer = out.split("\n").find((line) => line.startsWith("{\"seen\""))
    if (answer === undefined) return resume(Effect.fail(new Error(`idsChild printed no answer: ${out.slice(0, 500)}`)))
    resume(Effect.try(() => (JSON.parse(answer) as { seen: ReadonlyArray<string> }).seen))
  })
  return Effect.sync(() => child.kill())
})

const whoami = Tool.make("whoami", { description: "The call's task id.", input: {}, timeout: "5 seconds" }, () =>
  Effect.map(ToolContext.ToolContext, ({ taskId }) => taskId))

const scripted = LanguageModel.layerScripted([
  { toolCalls: [{ id: "c1", name: "whoami", arguments: "{}" }] },
  { text: "done" }
], { repeat: true })

const taskIdsOf = (agent: Agent.Agent<ToolContext.ToolContext>, runs: number) =>
  Effect.forEach(Array.from({ length: runs }), () =>
    Effect.map(Agent.run(agent, "who?"), (result) => result.toolCalls[0]!.result.value as string))

describe("Ids", () => {
  it.live("1,000 agent runs in each of two processes: no run id seen twice", () =>
    Effect.gen(function*() {
      const [a, b] = yield* Effect.all([childRuns, childRuns], { concurrency: 2 })
      assert.strictEqual(a.length, 1000)
      assert.strictEqual(b.length, 1000)
      assert.strictEqual(new Set([...a, ...b]).size, 2000)
      for (const id of [...a, ...b]) assert.match(id, uuidV4("run"))
    }), 120_000)

  it.effect("by default ids are <kind>-<UUID v4>: 122 random bits", () =>
    Effect.gen(function*() {
      const ids = yield* Effect.forEach(Array.from({ length: 10_000 }), () => Ids.make("task"))
      for (const id of ids) assert.match(id, uuidV4("task"))
      assert.strictEqual(new Set(ids).size, ids.length)
      // Every random hex digit takes many values over 10,000 ids: none is fixed or counted.
      const digits = ids.map((id) => id.slice("task-".length).replaceAll("-", ""))
      for (let i = 0; i < 32; i++) {
        if (i === 12) continue // the version nibble, always 4
        const values = new Set(digits.map((d) => d[i]))
        assert.isAtLeast(values.size, i === 16 ? 4 : 16, `hex digit ${i}`)
      }
      assert.match(yield* Ids.make("process"), uuidV4("process"))
    }))

  it.effect("layerDeterministic counts per kind from 1, afresh for each build", () =>
    Effect.gen(function*() {
      const kinds = ["run", "run", "task", "run", "task"] as const
      const first = yield* Effect.forEach(kinds, Ids.make).pipe(Effect.provide(Ids.layerDeterministic))
      assert.deepStrictEqual(first, ["run-1", "run-2", "task-1", "run-3", "task-2"])
      assert.strictEqual(yield* Ids.make("run").pipe(Effect.provide(Ids.layerDeterministic)), "run-1")
    }))

  it.effect("an agent run's id is the task id its tool calls carry: run-1, run-2 under layerDeterministic", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [whoami] })
      assert.deepStrictEqual(yield* taskIdsOf(agent, 3), ["run-1", "run-2", "run-3"])
    }).pipe(Effect.provide(Layer.merge(scripted, Ids.layerDeterministic))))

  it.effect("platform task ids come from Ids: task-1 under layerDeterministic, a UUID by default", () => {
    const settings = new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]])
    const platform = (ids: Layer.Layer<never>) =>
      PlatformClient.layerTest.pipe(
        Layer.provideMerge(
          PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) }).pipe(
            Layer.provide(LanguageModel.layerScripted([{ text: "done" }], { repeat: true })),
            Layer.provide(ids)
          )
        ),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(settings)))
      )
    const taskIds = Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(whoami))
      const ids: Array<string> = []
      for (let i = 0; i < 2; i++) {
        const events = yield* Stream.runCollect(served.submitTask("go"))
        ids.push([...events][0]!.taskId)
      }
      return ids
    }).pipe(Effect.scoped)
    return Effect.gen(function*() {
      const counted = yield* taskIds.pipe(Effect.provide(platform(Ids.layerDeterministic)))
      assert.deepStrictEqual(counted, ["task-1", "task-2"])
      const random = yield* taskIds.pipe(Effect.provide(platform(Layer.empty)))
      for (const id of random) assert.match(id, uuidV4("task"))
    })
  })
})
