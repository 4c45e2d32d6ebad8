/**
 * Cancelling a task whose call cannot be stopped (design: Cancelling a task): its handler waits, in an
 * uninterruptible region, until the test lets it go. The serving process interrupts it, waits a second, no longer,
 * then says in a warning that it could not stop the call, naming the task, the call and the tool; the task's stream
 * ends `TaskCancelled` meanwhile, and once the handler ends at last the process says so, having answered nothing. Real WebSocket server
 * on 127.0.0.1, the scripted model; real time for the second the process waits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Fiber, Layer, Logger, Schedule, Schema, Stream } from "effect"
import { Journal, LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { call, stepOf } from "../support/execAgent.js"
import { clientLayer } from "../support/platform.js"

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

describe("cancelling a task whose call cannot be stopped", { timeout: 20_000 }, () => {
  it.scopedLive("the serving process warns, naming task, call and tool, and says when the call ended at last", () => {
    const lines: Array<readonly [string, string]> = []
    const logger = Logger.replace(
      Logger.defaultLogger,
      Logger.make(({ logLevel, message }) =>
        void lines.push([logLevel.label, Array.isArray(message) ? message.join(" ") : String(message)]))
    )
    return Effect.gen(function*() {
      const model: LanguageModel.ScriptedTurn = (request) =>
        stepOf(request) > 0 ? { text: "done" } : { toolCalls: [call("s1", "stubborn")] }
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-a", "agent-a"]]) })),
          Layer.provide(Journal.layerMemory),
          Layer.provide(LanguageModel.layerScripted([model], { repeat: true })),
          Layer.provide(policy)
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, context)
      const started = yield* Deferred.make<void>()
      const letGo = yield* Deferred.make<void>()
      const ended = yield* Deferred.make<void>()
      const stubborn = Tool.make("stubborn", {
        description: "Waits until it is let go, and cannot be interrupted.",
        input: {},
        output: Schema.String,
        timeout: "60 seconds"
      }, () =>
        Effect.uninterruptible(Effect.gen(function*() {
          yield* Deferred.succeed(started, undefined)
          yield* Deferred.await(letGo)
          yield* Deferred.succeed(ended, undefined)
          return "slept"
        })))
      const client = yield* Layer.build(clientLayer({ url, agentId: "agent-a", token: "tok-a" }, policy))
      const served = yield* Serve.makeConfig(yield* Toolkit.make(stubborn), { shutdownGrace: "100 millis" }).pipe(
        Effect.provide(client)
      )
      const id = yield* Deferred.make<string>()
      const events = yield* served.submitTask("Sleep on it.").pipe(
        Stream.tap((event) => event._tag === "TaskStarted" ? Deferred.succeed(id, event.taskId) : Effect.void),
        Stream.runCollect,
        Effect.map(Chunk.toReadonlyArray),
        Effect.fork
      )
      const taskId = yield* Deferred.await(id)
      yield* Deferred.await(started)

      assert.deepStrictEqual(
        yield* Context.get(client, PlatformClient.PlatformClient).cancel(taskId, "no longer needed"),
        { cancelled: true }
      )
      // The stream ends TaskCancelled while the handler still waits; the warning came before it.
      const end = (yield* Fiber.join(events)).at(-1)
      assert.deepInclude(end, { _tag: "TaskCancelled", taskId, by: "agent agent-a", reason: "no longer needed" })
      assert.isFalse(yield* Deferred.isDone(ended))
      const warnings = lines.filter(([level]) => level === "WARN").map(([, text]) => text)
      assert.lengthOf(warnings, 1, warnings.join("\n"))
      assert.match(warnings[0]!, new RegExp(`^task ${taskId}: call s1 \\(tool stubborn\\) was cancelled but could not be stopped within 1s`))

      // Once it ends at last: said, and nothing answered.
      yield* Deferred.succeed(letGo, undefined)
      yield* Deferred.await(ended)
      const said = `task ${taskId}: call s1 (tool stubborn), which could not be stopped when it was cancelled, has ended; it answered nothing`
      yield* Effect.retry(
        Effect.filterOrFail(Effect.sync(() => lines.some(([, text]) => text === said)), (found) => found, () => "not yet"),
        Schedule.spaced("20 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
      )
      assert.isFalse(lines.some(([, text]) => text.includes("call s1 was cancelled; it was interrupted here")))
    }).pipe(Effect.provide(logger))
  })
})
