/**
 * The platform's configuration file (docs: configuration, "The platform's agents"): each agent's tasks ask the model
 * the file gives it, with its instructions (a fake OpenAI-compatible server on 127.0.0.1 records what each request
 * carried); a file that cannot be used is refused, naming the field; a reload with a bad file keeps the running
 * configuration, a reload with a good one gives new tasks the new model.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schema, Stream } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Model from "../../src/Model.js"
import * as AgentConfig from "../../src/platform/AgentConfig.js"
import { limitsOf } from "../../src/platform/Options.js"
import { fixture, fixtureServer } from "../support/fixtureServer.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-agentconfig-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Writes `content` (JSON unless a string) to `dir/name`; its path. */
const write = (dir: string, content: unknown, name = "platform.json") => {
  const file = join(dir, name)
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content))
  return file
}

const twoAgents = (billingModel = "openai:gpt-billing") => ({
  agents: {
    billing: {
      model: billingModel,
      instructions: "You are the billing agent.",
      maxSteps: 3,
      tokens: ["tok-billing"]
    },
    support: { model: "openai:gpt-support", instructions: "You are the support agent.", calls: ["billing"], tokens: ["tok-support"] }
  }
})

const toolkit = Toolkit.make(Tool.make("ping", {
  description: "Answers pong.",
  input: { text: Schema.String },
  output: Schema.String,
  timeout: "10 seconds"
}, () => Effect.succeed("pong")))

/** The platform in this process on `file`'s configuration (its models made as the CLI makes them); a client per token. */
const platformOn = (file: string) =>
  Effect.gen(function*() {
    const running = yield* AgentConfig.live(file, AgentConfig.modelsFrom((model) => Effect.succeed(Model.layer(model))))
    const handlers = yield* Layer.build(
      PlatformServer.layerHandlers({ tokens: running.tokens, agents: running.agents }).pipe(
        Layer.provideMerge(LanguageModel.layerScripted([{ text: "the platform's own model" }]))
      )
    )
    /** Submits a task as `agentId` (serving `toolkit`), to its end: the final event's tag and text. */
    const ask = (agentId: string, token: string) =>
      Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* toolkit)
        const events = yield* served.submitTask("hello").pipe(Stream.runCollect, Effect.timeout("10 seconds"))
        return [...events].at(-1)
      }).pipe(
        Effect.scoped,
        Effect.provide(PlatformClient.layerTest.pipe(Layer.provide(Layer.succeedContext(handlers)))),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", agentId], ["PLATFORM_TOKEN", token]])))
      )
    return { running, ask }
  })

/** The OpenAI-compatible server's settings: each model of the file asks it. */
const openAiAt = (url: string) =>
  ConfigProvider.fromMap(new Map([["OPENAI_API_KEY", "sk-test-0123456789abcdef7890"], ["OPENAI_BASE_URL", `${url}/v1`]]))

/** What a recorded request asked: its model, and its system message. */
const asked = (body: any) => ({
  model: body.model,
  system: body.messages.find((m: any) => m.role === "system")?.content
})

const answer = { status: 200, body: fixture("openai/response_text.json") }

describe("the platform's configuration file", () => {
  it.scoped("two agents of one file ask each its own model, with its own instructions", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([answer, answer])
      const file = write(yield* tempDir, twoAgents())
      const { ask } = yield* platformOn(file).pipe(Effect.withConfigProvider(openAiAt(server.url)))
      const billing = yield* ask("billing", "tok-billing")
      const support = yield* ask("support", "tok-support")
      assert.strictEqual(billing?._tag, "TaskCompleted")
      assert.strictEqual(support?._tag, "TaskCompleted")
      assert.deepStrictEqual(server.received.map((r) => asked(r.body)), [
        { model: "gpt-billing", system: "You are the billing agent." },
        { model: "gpt-support", system: "You are the support agent." }
      ])
    }))

  it.scoped("an agent the file does not name has the platform's model; a token it gives nobody is refused", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = write(dir, { ...twoAgents(), tokens: { "tok-other": "other" } })
      const { ask } = yield* platformOn(file).pipe(Effect.withConfigProvider(openAiAt("http://127.0.0.1:9")))
      const other = yield* ask("other", "tok-other")
      assert.deepStrictEqual(other?._tag === "TaskCompleted" && other.output, "the platform's own model")
      const stranger = yield* Effect.flip(ask("other", "tok-unknown"))
      assert.include(String(stranger), "token")
    }))

  it.effect.each([
    [{ agents: { billing: { maxSteps: 0 } } }, "agents.billing.maxSteps: expected a positive integer"],
    [{ agents: { billing: { model: "gpt-4o" } } }, "agents.billing.model: \"gpt-4o\" is not a model string; use one of scripted"],
    [{ agents: { billing: { limits: { maxTasksPerAgent: -1 } } } }, "agents.billing.limits.maxTasksPerAgent: expected a positive integer"],
    [{ agents: { billing: { modle: "openai:x" } } }, "agents.billing.modle: is not a field of the file"],
    [{ agents: { support: { calls: ["billing"] } } }, "agents.support.calls.0: \"billing\" is not an agent of the file"],
    [{}, "agents: is missing"],
    ["{ not json", "is not JSON"]
  ] as const)("a file that cannot be used is refused, naming the field: %s", ([content, message]) =>
    Effect.gen(function*() {
      const file = write(yield* tempDir, content)
      const error = yield* Effect.flip(AgentConfig.read(file))
      assert.include(error.message, message)
      assert.include(error.message, file)
    }).pipe(Effect.scoped))

  it.scoped("YAML is read too", () =>
    Effect.gen(function*() {
      const file = write(yield* tempDir, "agents:\n  billing:\n    model: openai:gpt-4o-mini\n    maxSteps: 12\n", "platform.yaml")
      const config = yield* AgentConfig.read(file)
      assert.deepStrictEqual(config.agents.billing, { model: "openai:gpt-4o-mini", maxSteps: 12 })
    }))

  it.scoped("a reload with a bad file keeps the running configuration; with a good one, new tasks take its model", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([answer, answer, answer])
      const dir = yield* tempDir
      const file = write(dir, twoAgents())
      const { ask, running } = yield* platformOn(file).pipe(Effect.withConfigProvider(openAiAt(server.url)))
      write(dir, { agents: { billing: { maxSteps: "many" } } })
      assert.isFalse(yield* running.reload)
      yield* ask("billing", "tok-billing")
      write(dir, twoAgents("openai:gpt-billing-2"))
      assert.isTrue(yield* running.reload.pipe(Effect.withConfigProvider(openAiAt(server.url))))
      yield* ask("billing", "tok-billing")
      // The tokens of the new file are those in force: support's, that it still gives, too.
      yield* ask("support", "tok-support")
      assert.deepStrictEqual(server.received.map((r) => asked(r.body).model), ["gpt-billing", "gpt-billing-2", "gpt-support"])
    }))

  it("an agent's limits are its own, the platform's for the others", () => {
    const limits = limitsOf({
      tokens: new Map(),
      maxTasksPerAgent: 10,
      agents: { billing: { limits: { maxTasksPerAgent: 2 } } }
    })
    assert.strictEqual(limits.forAgent("billing").maxTasksPerAgent, 2)
    assert.strictEqual(limits.forAgent("support").maxTasksPerAgent, 10)
    assert.strictEqual(limits.forAgent("billing").maxPromptBytesPerAgent, limits.maxPromptBytesPerAgent)
  })
})
