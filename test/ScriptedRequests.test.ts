import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Agent, LanguageModel } from "../src/index.js"

const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)

/** Runs `n` one-turn runs, the prompt of run i being `p<i>`; the prompts of the requests the model kept, oldest first. */
const promptsKept = (n: number) =>
  Effect.gen(function*() {
    const agent = Agent.make({ tools: [] })
    for (let i = 0; i < n; i++) assert.strictEqual((yield* Agent.run(agent, `p${i}`)).output, "ok")
    return (yield* requests).map((r) => (r.messages[0] as { readonly text: string }).text)
  })

const prompts = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `p${from + i}`)

describe("LanguageModel.layerScripted: the requests it keeps", () => {
  it.effect("keeps the latest 100 by default, oldest first: a model serving many runs keeps no more", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* promptsKept(60), prompts(0, 60))
      // 60 + 190 requests (the second runs' prompts p0..p189): the latest 100, in the order they came.
      assert.deepStrictEqual(yield* promptsKept(190), prompts(90, 190))
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: "ok" }], { repeat: true }))))

  it.effect("a number keeps the latest that many", () =>
    promptsKept(7).pipe(
      Effect.map((kept) => assert.deepStrictEqual(kept, prompts(4, 7))),
      Effect.provide(LanguageModel.layerScripted([{ text: "ok" }], { repeat: true, keepRequests: 3 }))
    ))

  it.effect("keepRequests: true keeps every one", () =>
    promptsKept(250).pipe(
      Effect.map((kept) => assert.deepStrictEqual(kept, prompts(0, 250))),
      Effect.provide(LanguageModel.layerScripted([{ text: "ok" }], { repeat: true, keepRequests: true }))
    ))
})

describe("LanguageModel.scripted: a model as a value, provided without a layer", () => {
  it.effect("each one is a new model: its own place in the script and its own requests", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [] })
      const script = [{ text: "first" }, { text: "second" }]
      const a = LanguageModel.scripted(script)
      const b = LanguageModel.scripted(script)
      const run = (model: LanguageModel.ScriptedModel, prompt: string) =>
        Effect.map(Effect.provideService(Agent.run(agent, prompt), LanguageModel.LanguageModel, model), (r) => r.output)
      // b starts at the script's first turn although a answered one before it; a goes on to its second.
      assert.strictEqual(yield* run(a, "to a"), "first")
      assert.strictEqual(yield* run(b, "to b"), "first")
      assert.strictEqual(yield* run(a, "to a again"), "second")
      const prompts = (model: LanguageModel.ScriptedModel) =>
        Effect.map(model.requests, (rs) => rs.map((r) => (r.messages[0] as { readonly text: string }).text))
      assert.deepStrictEqual(yield* prompts(a), ["to a", "to a again"])
      assert.deepStrictEqual(yield* prompts(b), ["to b"])
      // Past the end of its script, a fails as the layer's model does; b still has its second turn.
      const past = yield* Effect.flip(run(a, "once more"))
      assert.match(past.message, /the script has 2 turn\(s\) and request 3 came in/)
      assert.strictEqual(yield* run(b, "to b again"), "second")
    }))

  it.effect("the layer is built on it: each build a new model, Scripted reading its requests", () =>
    Effect.gen(function*() {
      const layer = LanguageModel.layerScripted([{ text: "only" }])
      const once = (prompt: string) =>
        Effect.gen(function*() {
          const result = yield* Agent.run(Agent.make({ tools: [] }), prompt)
          return [result.output, ...(yield* requests).map((r) => (r.messages[0] as { readonly text: string }).text)]
        }).pipe(Effect.provide(layer))
      assert.deepStrictEqual(yield* once("x"), ["only", "x"])
      assert.deepStrictEqual(yield* once("y"), ["only", "y"])
    }))
})

describe("Agent.run's model option: a run's own model, no LanguageModel in context", () => {
  it.effect("the run asks the model it is given, which keeps its place in its script from run to run", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [] })
      const model = LanguageModel.scripted([{ text: "first" }, { text: "second" }])
      // No LanguageModel is provided: the options give the run its model (the type needs none).
      assert.strictEqual((yield* Agent.run(agent, "one", { model })).output, "first")
      assert.strictEqual((yield* Agent.run(agent, "two", { model })).output, "second")
      // Given in the options, it is asked rather than the context's.
      const inContext = yield* Effect.provideService(
        Agent.run(agent, "three", { model: LanguageModel.scripted([{ text: "given" }]) }),
        LanguageModel.LanguageModel,
        LanguageModel.scripted([{ text: "context's" }])
      )
      assert.strictEqual(inContext.output, "given")
    }))

  it.effect("the agents its tools run ask it too", () =>
    Effect.gen(function*() {
      const child = Agent.make({ name: "child", tools: [] })
      const parent = Agent.make({ tools: [Agent.asTool(child, { name: "ask_child", description: "Asks the child." })] })
      // The parent's turn 1 calls the child, whose one turn is turn 2; the parent's last turn is turn 3.
      const model = LanguageModel.scripted([
        { toolCalls: [{ id: "k1", name: "ask_child", arguments: "{\"prompt\":\"hi\"}" }] },
        { text: "from the child" },
        (request) => ({ text: `parent read: ${request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : [])}` })
      ])
      // The sub-agent tool's type asks for a LanguageModel; none is provided: the run's own is the child's.
      const result = yield* (Agent.run(parent, "go", { model }) as Effect.Effect<Agent.Result<never>, Agent.AgentError>)
      assert.strictEqual(result.output, "parent read: \"from the child\"")
      assert.strictEqual((yield* model.requests).length, 3)
    }))

  it.effect("a run with no model at all dies saying how to give it one", () =>
    Effect.gen(function*() {
      const run = Agent.run(Agent.make({ tools: [] }), "x") as Effect.Effect<unknown, unknown>
      const exit = yield* Effect.exit(run)
      assert.isTrue(exit._tag === "Failure")
      assert.match(String(exit._tag === "Failure" ? exit.cause : ""), /the run has no model: provide a LanguageModel .* or give it one in the run's options/)
    }))

  it.effect("a copy of a scripted model ({ ...model, provider }) asks the same script", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [] })
      const model = LanguageModel.scripted([{ text: "first" }, { text: "second" }])
      const copy = { ...model, provider: "renamed" }
      assert.strictEqual((yield* Agent.run(agent, "one", { model })).output, "first")
      assert.strictEqual((yield* Agent.run(agent, "two", { model: copy })).output, "second")
      assert.strictEqual((yield* model.requests).length, 2)
    }))
})
