/**
 * A call's id is the run's, unique within it (design: The loop): a model that repeats an id, across turns or
 * within one, or a server that leaves ids out, never makes a call read another's result. The journal, the
 * platform's delivery, approvals and child runs key on the run's id; the model reads back its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Layer, Option, Schema, Stream } from "effect"
import { Agent, Journal, LanguageModel, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Model } from "../src/exports/providers.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { fixtureServer, type Reply } from "./support/fixtureServer.js"
import { makeTools, resultsOf } from "./support/refundTools.js"

/** An OpenAI-compatible chat completion with these tool calls. */
const completion = (toolCalls: ReadonlyArray<unknown>): Reply => ({
  status: 200,
  body: {
    id: "chatcmpl-1",
    object: "chat.completion",
    model: "gpt-4.1",
    choices: [{
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: null,
        tool_calls: toolCalls
      }
    }],
    usage: { prompt_tokens: 10, completion_tokens: 5 }
  }
})

/** A chat completion whose tool calls carry no id (a server that leaves them out). */
const noIds = (...calls: ReadonlyArray<readonly [string, unknown]>): Reply =>
  completion(calls.map(([name, args]) => ({ type: "function", function: { name, arguments: JSON.stringify(args) } })))

/** The same server's final answer. */
const answer = (text: string): Reply => ({
  status: 200,
  body: {
    id: "chatcmpl-2",
    object: "chat.completion",
    model: "gpt-4.1",
    choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: text } }],
    usage: { prompt_tokens: 10, completion_tokens: 5 }
  }
})

/** `openai:gpt-4.1` on the server at `url`. */
const openAiAt = (url: string) =>
  Model.layer("openai:gpt-4.1").pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(
      new Map([["OPENAI_API_KEY", "sk-test-0123456789abcdef7890"], ["OPENAI_BASE_URL", `${url}/v1`]])
    )))
  )

/** The tool results a request to the server sent back, as `tool_call_id=content`. */
const sentBack = (body: any): Array<string> =>
  (body.messages as Array<any>).flatMap((m) => m.role === "tool" ? [`${m.tool_call_id}=${m.content}`] : [])

const call = (id: string, name: string, args: unknown): LanguageModel.ToolCall => ({ id, name, arguments: JSON.stringify(args) })

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  if (Option.isNone(failure)) throw new Error(`the run should have failed: ${Exit.isSuccess(exit) ? "it completed" : Cause.pretty(exit.cause)}`)
  return failure.value
}

describe("call ids a model repeats (a server that leaves them out)", () => {
  it.scoped("a journaled run: turn 2's call with turn 1's id runs, and the model reads each call's own result", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([noIds(["lookup", { orderId: "A-1" }]), noIds(["lookup", { orderId: "B-2" }]), answer("done")])
      const { runs, tools } = makeTools()
      const result = yield* Agent.run(Agent.make({ tools }), "look up A-1 then B-2", { runId: "run-ids" }).pipe(
        Effect.provide(Layer.merge(openAiAt(server.url), Journal.layerMemory))
      )
      assert.deepStrictEqual(runs, ["lookup A-1", "lookup B-2"], "B-2 ran")
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.result.value]), [
        ["call_0", "order A-1: paid"],
        ["call_0~2", "order B-2: paid"]
      ])
      // The model reads back the ids it was given (here the reader's), each with its own call's result.
      assert.deepStrictEqual(sentBack(server.received[2]!.body), ["call_0=\"order A-1: paid\"", "call_0=\"order B-2: paid\""])
    }))

  it.scoped("a journaled run: three calls with one id in one turn each run once and each reads its own result", () =>
    Effect.gen(function*() {
      const dup = (orderId: string) => ({ id: "dup", type: "function", function: { name: "lookup", arguments: JSON.stringify({ orderId }) } })
      const server = yield* fixtureServer([completion([dup("A-1"), dup("B-2"), dup("C-3")]), answer("done")])
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const result = yield* Agent.run(agent, "three lookups", { runId: "run-dup" }).pipe(Effect.provide(openAiAt(server.url)))
      assert.deepStrictEqual(runs, ["lookup A-1", "lookup B-2", "lookup C-3"])
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.result.value]), [
        ["dup", "order A-1: paid"],
        ["dup~1", "order B-2: paid"],
        ["dup~1.2", "order C-3: paid"]
      ])
      assert.deepStrictEqual(sentBack(server.received[1]!.body), [
        "dup=\"order A-1: paid\"",
        "dup=\"order B-2: paid\"",
        "dup=\"order C-3: paid\""
      ])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("a journaled run resumed: its turns replayed give the calls the same ids, so each reads its own journaled outcome", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [call("x", "lookup", { orderId: "A-1" }), call("x", "refund", { orderId: "A-1", amount: 5 })] },
        { toolCalls: [call("x", "lookup", { orderId: "B-2" })] },
        (request) => ({ text: resultsOf(request).join(" | ") })
      ]
      const model = LanguageModel.layerScripted(script, { perConversation: true })
      const first = yield* Effect.exit(Agent.run(agent, "refund", { runId: "run-r" }).pipe(Effect.provide(model)))
      const suspended = failureOf(first) as Agent.RunSuspended
      assert.deepStrictEqual(suspended.pending.map((p) => p.toolCallId), ["x~1"], "the refund waits under its own id")
      yield* Agent.approve("run-r", "x~1")
      const done = yield* Agent.resume(agent, "run-r").pipe(Effect.provide(model))
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1", "lookup B-2"])
      assert.strictEqual(done.output, "x=\"order A-1: paid\" | x=\"refunded 5 on A-1\" | x=\"order B-2: paid\"")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("an approval of d1 does not let a second d1 in a later turn run unasked", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [call("d1", "refund", { orderId: "A-1", amount: 5 })] },
        { toolCalls: [call("d1", "refund", { orderId: "B-2", amount: 500 })] },
        (request) => ({ text: resultsOf(request).join(" | ") })
      ]
      const model = LanguageModel.layerScripted(script, { perConversation: true })
      failureOf(yield* Effect.exit(Agent.run(agent, "refund", { runId: "run-d" }).pipe(Effect.provide(model))))
      yield* Agent.approve("run-d", "d1")
      const again = failureOf(yield* Effect.exit(Agent.resume(agent, "run-d").pipe(Effect.provide(model)))) as Agent.RunSuspended
      assert.strictEqual(again._tag, "RunSuspended")
      assert.deepStrictEqual(again.pending.map((p) => [p.toolCallId, p.input]), [["d1~2", { orderId: "B-2", amount: 500 }]])
      assert.deepStrictEqual(runs, ["refund A-1"], "the second refund waits for its own decision")
      yield* Agent.deny("run-d", "d1~2", { reason: "too much" })
      const done = yield* Agent.resume(agent, "run-d").pipe(Effect.provide(model))
      assert.deepStrictEqual(runs, ["refund A-1"])
      assert.include(done.output, "d1=\"refunded 5 on A-1\" | d1!")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("a second Agent.asTool call reusing an id runs its own child run", () =>
    Effect.gen(function*() {
      const child = Agent.make({ name: "child", instructions: "child", tools: [] })
      const ask = Agent.asTool(child, { name: "ask_child", description: "Asks the child." })
      const parent = Agent.make({ name: "parent", instructions: "parent", tools: [ask] })
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [(request) =>
        request.instructions === "child"
          ? { text: `child read: ${(request.messages[0] as { text: string }).text}` }
          : request.messages.length === 1
          ? { toolCalls: [call("c1", "ask_child", { prompt: "first" })] }
          : request.messages.length === 3
          ? { toolCalls: [call("c1", "ask_child", { prompt: "second" })] }
          : { text: resultsOf(request).join(" | ") }]
      const done = yield* Agent.run(parent, "ask twice", { runId: "run-c" }).pipe(
        Effect.provide(LanguageModel.layerScripted(script, { repeat: true }))
      )
      assert.strictEqual(done.output, "c1=\"child read: first\" | c1=\"child read: second\"")
    }).pipe(Effect.provide(Journal.layerMemory)))
})

describe("call ids a model repeats, on the platform", () => {
  const tokens = new Map([["tok-1", "agent-1"]])
  const settings = (url: string) =>
    ConfigProvider.fromMap(
      new Map([
        ["AGENT_ID", "agent-1"],
        ["PLATFORM_TOKEN", "tok-1"],
        ["OPENAI_API_KEY", "sk-test-0123456789abcdef7890"],
        ["OPENAI_BASE_URL", `${url}/v1`]
      ])
    )

  /** The embedded platform (journaled or not) on the OpenAI-compatible server at `url`, a client of it for agent-1. */
  const platformOn = (url: string, journal: boolean) =>
    PlatformClient.layerTest.pipe(
      Layer.provide(PlatformServer.layerHandlers({ tokens, journal: journal ? ":memory:" : undefined })),
      Layer.provide(Model.layer("openai:gpt-4.1")),
      Layer.provide(Layer.setConfigProvider(settings(url)))
    )

  for (const journal of [false, true]) {
    it.scoped(`turn 2's call with turn 1's id is delivered and run; the model reads each result (${journal ? "journaled" : "in memory"})`, () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([
          noIds(["lookup", { orderId: "A-1" }]),
          noIds(["lookup", { orderId: "B-2" }], ["lookup", { orderId: "C-3" }]),
          answer("done")
        ])
        const runs: Array<string> = []
        const lookup = Tool.make("lookup", {
          description: "Looks an order up.",
          input: { orderId: Schema.String },
          output: Schema.String,
          timeout: "5 seconds"
        }, ({ orderId }) => Effect.sync(() => (runs.push(orderId), `order ${orderId}: paid`)))
        const events = yield* Effect.gen(function*() {
          const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
          return [...yield* Stream.runCollect(served.submitTask("look up orders"))]
        }).pipe(Effect.provide(platformOn(server.url, journal)), Effect.withConfigProvider(settings(server.url)), Effect.timeout("10 seconds"))
        assert.strictEqual(events[events.length - 1]?._tag, "TaskCompleted")
        assert.deepStrictEqual(runs, ["A-1", "B-2", "C-3"])
        assert.deepStrictEqual(sentBack(server.received[2]!.body), [
          "call_0=\"order A-1: paid\"",
          "call_0=\"order B-2: paid\"",
          "call_1=\"order C-3: paid\""
        ])
      }))
  }
})
