/** The README's "In 25 lines" example, as it is written there: if this breaks, so does the README. */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Agent, LanguageModel, Tool } from "../src/index.js"

describe("README example", () => {
  it("runs as written", async () => {
    // A tool: typed input and output, a timeout; the handler is an Effect.
    const getWeather = Tool.make("get_weather", {
      description: "Current temperature in a city, in degrees Celsius.",
      input: { city: Schema.String.annotations({ description: "City name, like Lyon" }) },
      output: Schema.Struct({ city: Schema.String, celsius: Schema.Number }),
      timeout: "5 seconds"
    }, ({ city }) => Effect.succeed({ city, celsius: city === "Lyon" ? 21 : 15 }))

    const agent = Agent.make({ tools: [getWeather], instructions: "Answer briefly." })

    // Tested with the scripted model: it calls the tool, then answers from its result.
    const model = LanguageModel.layerScripted([
      { toolCalls: [{ id: "c1", name: "get_weather", arguments: "{\"city\":\"Lyon\"}" }] },
      (request) => {
        const result = request.messages.find((m) => m._tag === "ToolResultMessage")
        return { text: `Lyon: ${JSON.parse(result?._tag === "ToolResultMessage" ? result.content : "{}").celsius} C` }
      }
    ])

    const result = await Effect.runPromise(Agent.run(agent, "How warm is it in Lyon?").pipe(Effect.provide(model)))
    assert.strictEqual(result.output, "Lyon: 21 C")
    assert.deepStrictEqual(result.toolCalls[0]!.result.value, { city: "Lyon", celsius: 21 })
  })

  it("matches the README's text", async () => {
    const { readFileSync } = await import("node:fs")
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8")
    const source = readFileSync(new URL(import.meta.url), "utf8")
    // Every code line of the README example appears, as is, in this test.
    const block = readme.split("## In 25 lines")[1]!.split("```ts")[1]!.split("```")[0]!
    const lines = block.split("\n").map((l) => l.trim()).filter((l) =>
      l !== "" && !l.startsWith("import") && !l.startsWith("// result.")
    )
    for (const line of lines) assert.include(source, line, `README line not mirrored here: ${line}`)
  })
})
