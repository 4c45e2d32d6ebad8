/**
 * The platform checks a manifest against the form its tasks' model requires (design: Providers): a
 * tool whose input that model's provider cannot be sent in its strict mode (`StrictSchema`) is refused
 * at registration (`strict-schema`, naming the tool, the field and the provider), not at a task's
 * first model turn; the same manifest registers on a platform whose model is not in strict mode.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schedule, Schema } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { Category } from "../support/recursiveSchema.js"

const tokens = new Map([["tok-1", "agent-1"]])
const agentOne = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]])))
const policy = Timing.layer({ heartbeat: Schedule.spaced("60 seconds") })

/**
 * A platform in this process whose tasks' model is `provider`'s, requiring its strict form when `strict`; with
 * `agentOwn`, agent-1's own model (its settings) is `agentOwn`'s, in its strict mode.
 */
const platformOn = (provider: string, strict = true, agentOwn?: string) =>
  PlatformClient.layerTest.pipe(
    Layer.provideMerge(
      Layer.unwrapEffect(Effect.map(LanguageModel.LanguageModel, (model) =>
        PlatformServer.layerHandlers({
          tokens,
          ...(agentOwn === undefined ? {} : {
            agents: { "agent-1": { model: { ...model, provider: agentOwn, strictSchemas: agentOwn } } }
          })
        }))).pipe(
          Layer.provide(Layer.effect(
            LanguageModel.LanguageModel,
            Effect.map(LanguageModel.LanguageModel, (model) => ({ ...model, provider, ...(strict ? { strictSchemas: provider } : {}) }))
          ).pipe(Layer.provide(LanguageModel.layerScripted([], { repeat: false }))))
        )
    ),
    Layer.provideMerge(policy),
    Layer.provide(agentOne)
  )

const file = Tool.make("file", { description: "Files it.", input: { under: Category }, timeout: "5 seconds" }, () => "filed")
const tag = Tool.make("tag", {
  description: "Tags it.",
  input: { labels: Schema.Record({ key: Schema.String, value: Schema.String }) },
  timeout: "5 seconds"
}, () => "tagged")
const fine = Tool.make("lookup", { description: "Looks up.", input: { id: Schema.String }, timeout: "5 seconds" }, () => "found")

describe("the platform refuses at registration what its model's provider cannot be sent", () => {
  it.effect("anthropic: the recursive tool and the map are refused, each naming its field; the fine tool alone would pass", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(file, tag, fine)))
      assert.strictEqual(error._tag, "ManifestRejected")
      if (error._tag !== "ManifestRejected") return
      assert.deepStrictEqual(error.violations.map((v) => [v.tool, v.rule]), [["file", "strict-schema"], ["tag", "strict-schema"]])
      assert.match(error.violations[0]!.message, /^tool file: field under\.sub\[\]\.sub\[\] cannot be sent to anthropic in its strict mode: the schema refers to itself/)
      assert.match(error.violations[1]!.message, /^tool tag: field labels cannot be sent to anthropic in its strict mode: a map/)
      yield* Serve.makeConfig(yield* Toolkit.make(fine))
      const state = yield* PlatformServer.PlatformState
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), ["lookup"])
    }).pipe(Effect.scoped, Effect.provide(platformOn("anthropic"))))

  it.effect("openai takes a recursive schema (as $ref), not a map", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(file, tag)))
      assert.strictEqual(error._tag, "ManifestRejected")
      if (error._tag !== "ManifestRejected") return
      assert.deepStrictEqual(error.violations.map((v) => v.tool), ["tag"])
    }).pipe(Effect.scoped, Effect.provide(platformOn("openai"))))

  it.effect("an agent with a model of its own (its settings) has its manifests checked against that model's provider", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(file, tag, fine)))
      assert.strictEqual(error._tag, "ManifestRejected")
      if (error._tag !== "ManifestRejected") return
      assert.deepStrictEqual(error.violations.map((v) => v.tool), ["file", "tag"])
    }).pipe(Effect.scoped, Effect.provide(platformOn("openai", false, "anthropic"))))

  it.effect("a model not in strict mode (anthropic, as our own client runs by default) registers them all", () =>
    Effect.gen(function*() {
      yield* Serve.makeConfig(yield* Toolkit.make(file, tag, fine))
      const state = yield* PlatformServer.PlatformState
      assert.deepStrictEqual([...(yield* state.visibleTools("agent-1"))].sort(), ["file", "lookup", "tag"])
    }).pipe(Effect.scoped, Effect.provide(platformOn("anthropic", false))))
})
