/**
 * The CLI's settings are read through Config (src/internal/cli/settings.ts): a command's layer runs on a
 * map of settings (`ConfigProvider.fromMap`), the environment untouched.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import { approveLayer } from "../../../src/internal/cli/approve.js"
import { runCommand } from "../../../src/internal/cli/command.js"
import { chooseModel } from "../../../src/internal/cli/options.js"
import { serveLayer } from "../../../src/internal/cli/serve.js"
import { logLevel, mcpTokens, settingsUsable } from "../../../src/internal/cli/settings.js"
import { PlatformServer } from "../../../src/exports/platform.js"

/** `effect` with the settings of `entries`, and none else. */
const withSettings = <A, E>(entries: Record<string, string>, effect: Effect.Effect<A, E>) =>
  Effect.provide(effect, Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(entries)))))

/** The message `effect` fails with. */
const failure = <A, E extends { readonly message: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.flip(effect), (error) => error.message)

describe("cli settings, through Config", () => {
  it.effect("mcp --http: MCP_TOKENS set but blank is refused, set is parsed, unset asks none; over stdio it is not read", () =>
    Effect.gen(function*() {
      const tokens = mcpTokens(true, Effect.succeed(PlatformServer.parseTokens))
      for (const blank of ["", " ", " , "]) {
        assert.strictEqual(
          yield* failure(withSettings({ MCP_TOKENS: blank }, tokens)),
          "MCP_TOKENS is set but holds no token:name pair"
        )
      }
      assert.include(yield* failure(withSettings({ MCP_TOKENS: "tok-1:ide,s3cret" }, tokens)), "entry 2 of 2 is not token:name")
      const pairs = yield* withSettings({ MCP_TOKENS: "tok-1:ide,tok-2:ci" }, tokens)
      assert.deepStrictEqual([...pairs ?? []], [["tok-1", "ide"], ["tok-2", "ci"]])
      assert.isUndefined(yield* withSettings({}, tokens))
      assert.isUndefined(yield* withSettings({ MCP_TOKENS: " " }, mcpTokens(false, Effect.die("not loaded over stdio"))))
    }))

  it.effect("the model: --model wins; else the keys set choose it (empty is unset), else the scripted one", () =>
    Effect.gen(function*() {
      const chosen = (entries: Record<string, string>, option = Option.none<string>()) =>
        Effect.map(withSettings(entries, chooseModel(option)), ({ model }) => model)
      assert.strictEqual(yield* chosen({ ANTHROPIC_API_KEY: "k" }, Option.some("openai:gpt-4o")), "openai:gpt-4o")
      assert.strictEqual(yield* chosen({ ANTHROPIC_API_KEY: "k", OPENAI_API_KEY: "o" }), "anthropic:claude-sonnet-4-5")
      assert.strictEqual(yield* chosen({ ANTHROPIC_API_KEY: "", OPENAI_BASE_URL: "http://localhost:11434/v1", OPENAI_MODEL: "llama3" }), "openai:llama3")
      assert.strictEqual(yield* chosen({ OPENAI_API_KEY: "o", OPENAI_MODEL: "" }), "openai:gpt-4.1")
      assert.strictEqual(yield* chosen({ ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "" }), "scripted")
    }))

  it.effect("the log level and the settings' forms: LOG_LEVEL, DEBUG=true, a URL that is none", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* withSettings({}, logLevel))?.label, "INFO")
      assert.strictEqual((yield* withSettings({ LOG_LEVEL: "Warn" }, logLevel))?.label, "WARN")
      assert.strictEqual((yield* withSettings({ LOG_LEVEL: "info", DEBUG: "true" }, logLevel))?.label, "DEBUG")
      assert.isUndefined(yield* withSettings({ LOG_LEVEL: "loud" }, logLevel))
      assert.include(yield* failure(withSettings({ LOG_LEVEL: "loud" }, settingsUsable)), "LOG_LEVEL is malformed: one of all,")
      yield* withSettings({ LOG_LEVEL: "loud", DEBUG: "true" }, settingsUsable)
      assert.strictEqual(
        yield* failure(withSettings({ PLATFORM_URL: "garbage" }, settingsUsable)),
        "PLATFORM_URL is malformed: ws://host:port/rpc (or wss://), or a comma-separated list of them"
      )
    }))

  it.effect("a command's layer on a map: serve names every missing setting; approve's --url stands for PLATFORM_URL", () =>
    Effect.gen(function*() {
      assert.strictEqual(
        yield* failure(withSettings({ AGENT_ID: "a" }, runCommand(serveLayer({ grace: 1, tools: Option.none() })))),
        "PLATFORM_TOKEN, PLATFORM_URL are not set"
      )
      const approve = approveLayer({
        url: Option.some("ws://127.0.0.1:1/rpc"),
        token: Option.none(),
        task: "t",
        call: "c",
        deny: false,
        reason: Option.none()
      })
      assert.strictEqual(yield* failure(withSettings({}, runCommand(approve))), "PLATFORM_TOKEN is not set")
    }))
})
