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
