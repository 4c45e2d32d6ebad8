import { Effect, Schema } from "effect"
import { Agent, LanguageModel, Tool } from "../src/index.js"

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

export const main = Agent.run(agent, "How warm is it in Lyon?").pipe(Effect.provide(model))
// await Effect.runPromise(main): { output: "Lyon: 21 C", toolCalls: [{ name: "get_weather",
//   result: { value: { city: "Lyon", celsius: 21 } }, ... }], steps: 2, usage }
