/**
 * The agent a platform task runs is made once for its agent's settings and tools and run again by the agent's next
 * tasks while they stay the same: what each task is offered, and where each of its calls goes, are still its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule, Schema } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { Serve } from "../../src/exports/serve.js"
import { clientLayer, resultsText } from "../support/platform.js"

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

/** The platform on a real WebSocket on 127.0.0.1; each task's model calls `lookup`, then answers its result. */
const platform = (offered: Array<string>) =>
  Effect.flatMap(
    Layer.build(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
        Layer.provide(LanguageModel.layerScripted([
          (request) => {
            offered.push(request.tools.map((tool) => tool.name).join(", "))
            return { toolCalls: [{ id: "x", name: "lookup", arguments: JSON.stringify({ id: "1" }) }] }
          },
          (request) => ({ text: resultsText(request) })
        ], { perConversation: true })),
        Layer.provide(policy)
      )
    ),
    (context) => Effect.provide(PlatformServer.url, context)
  )

describe("the agents the platform's tasks run", () => {
  it.live("tasks of the same tools from a process that serves them and from one that does not: each call goes where it is served", () =>
    Effect.gen(function*() {
      const offered: Array<string> = []
      const url = yield* platform(offered)
      const ran: Array<string> = []
      const lookup = Tool.make("lookup", { description: "Look up.", input: { id: Schema.String }, timeout: "30 seconds" }, ({ id }) =>
        Effect.sync(() => {
          ran.push(id)
          return `found ${id}`
        }))
      yield* Effect.gen(function*() {
        const server = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
        // Twice from the process that serves `lookup`: the second task runs the agent the first one made.
        assert.strictEqual(yield* server.runTask("go"), "x:\"found 1\"")
        assert.strictEqual(yield* server.runTask("go"), "x:\"found 1\"")
        yield* Effect.gen(function*() {
          // The same tools for a task of a process that serves none: its call is given to the one that serves it.
          const submitter = yield* Serve.makeConfig(yield* Toolkit.make())
          assert.strictEqual(yield* submitter.runTask("go"), "x:\"found 1\"")
          // And the serving process's next task delivers on its own stream again.
          assert.strictEqual(yield* server.runTask("go"), "x:\"found 1\"")
        }).pipe(Effect.scoped, Effect.provide(clientLayer({ url }, policy)))
      }).pipe(Effect.scoped, Effect.provide(clientLayer({ url }, policy)))
      assert.deepStrictEqual(ran, ["1", "1", "1", "1"])
      assert.deepStrictEqual(offered, ["lookup", "lookup", "lookup", "lookup"])
    }).pipe(Effect.scoped))
})
