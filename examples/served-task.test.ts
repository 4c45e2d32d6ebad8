/** A served task, whole, in a test: the platform in process (no sockets), a scripted model, the settings. */
// #region test
import { assert, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schema } from "effect"
import { LanguageModel, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"

const lookup = Tool.make("lookup", { description: "Look up.", input: { id: Schema.String }, timeout: "30 seconds" },
  ({ id }) => Effect.succeed(`found ${id}`))

it.scoped("a served task, in process", () =>
  Effect.gen(function*() {
    const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
    assert.strictEqual(yield* served.runTask("Look up x"), "\"found x\"")
  }).pipe(Effect.provide(
    PlatformClient.layerTest.pipe(
      Layer.provideMerge(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
      Layer.provide(LanguageModel.layerScripted([
        { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"id\":\"x\"}" }] },
        (request) => ({
          text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join()
        })
      ])),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([
        ["AGENT_ID", "agent-1"],
        ["PLATFORM_TOKEN", "tok-1"]
      ]))))
    )
  )))
// #endregion
