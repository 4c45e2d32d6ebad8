/**
 * A process for the run-id test: RUNS agent runs (default 1,000) in this process, each calling
 * `whoami` once, and prints `{"seen": [...]}`: the task id each run's tool call carried in its
 * `ToolContext`, in run order.
 */
import { Console, Effect } from "effect"
import { Agent, LanguageModel, Tool, ToolContext } from "../../src/index.js"

const seen: Array<string> = []

const whoami = Tool.make("whoami", { description: "The call's task id.", input: {}, timeout: "5 seconds" }, () =>
  Effect.map(ToolContext.ToolContext, ({ taskId }) => {
    seen.push(taskId)
    return taskId
  }))

const agent = Agent.make({ tools: [whoami] })

const model = LanguageModel.layerScripted([
  { toolCalls: [{ id: "c1", name: "whoami", arguments: "{}" }] },
  { text: "done" }
], { repeat: true })

const runs = Number(process.env.RUNS ?? 1000)

const program = Effect.gen(function*() {
  for (let i = 0; i < runs; i++) yield* Agent.run(agent, "who am I?")
  yield* Console.log(JSON.stringify({ seen }))
}).pipe(Effect.provide(model))

Effect.runPromise(program).catch((error) => {
  console.error(error)
  process.exitCode = 1
})
