/**
 * `Serve`'s task streams (`submitTask`, `attachTask`): the follower behind a stream stops when its reader
 * does, so a task nobody reads any more has no calls run for it here, until a reader attaches again.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Deferred, Effect, Layer, Schedule, Schema, Stream } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"

const settings = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]])))
const policy = Timing.layer({
  heartbeat: Schedule.spaced("60 seconds"),
  redelivery: Schedule.spaced("10 seconds"),
  reconnect: Schedule.spaced("1 second").pipe(Schedule.intersect(Schedule.recurs(5))),
  dedupeSweep: Schedule.spaced("1 second")
})

describe("Serve: a task's stream and its follower", () => {
  it.live("a reader that stops stops the follower: the task's call waits for the next reader, and runs once then", () => {
    const runs: Array<string> = []
    const lookup = Tool.make("lookup", { description: "Look up.", input: { id: Schema.String }, timeout: "30 seconds" }, ({ id }) =>
      Effect.sync(() => {
        runs.push(id)
        return `found ${id}`
      }))
    return Effect.gen(function*() {
      // The model's first turn waits for the test: the task's start reaches the reader alone.
      const go = yield* Deferred.make<void>()
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        () => Effect.as(Deferred.await(go), { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"id\":\"x\"}" }] }),
        (request) => ({ text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join() })
      ]
      const layer = PlatformClient.layerTest.pipe(
        Layer.provideMerge(
          PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) }).pipe(
            Layer.provide(LanguageModel.layerScripted(script))
          )
        ),
        Layer.provideMerge(policy),
        Layer.provide(settings)
      )
      yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
        const first = [...yield* Stream.runCollect(Stream.take(served.submitTask("go"), 1))]
        assert.deepStrictEqual(first.map((event) => event._tag), ["TaskStarted"])
        // The model calls the tool now; a follower left running would run it.
        yield* Deferred.succeed(go, undefined)
        yield* Effect.sleep("200 millis")
        assert.deepStrictEqual(runs, [])
        const rest = [...yield* Stream.runCollect(served.attachTask(first[0]!.taskId))]
        assert.deepStrictEqual(rest.at(-1)?._tag, "TaskCompleted")
        assert.deepStrictEqual(runs, ["x"])
      }).pipe(Effect.scoped, Effect.provide(layer))
    })
  })
})
