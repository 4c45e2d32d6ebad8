/**
 * A process for the young-collection test (`test/GcSurvivors.test.ts`, run with `node --trace-gc-nvp`): WARMUP
 * then RUNS agent runs (2 turns x 3 calls, a new scripted model given in each run's options), printing `measure`
 * before the measured runs and `end` after, so that the parent sums what V8's young collections kept between the
 * two lines.
 */
import { Effect } from "effect"
import { Agent, LanguageModel } from "../../src/index.js"
import { add } from "../bench/tools.js"

const warmup = Number(process.env.WARMUP ?? 2000)
const runs = Number(process.env.RUNS ?? 4000)

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  {
    toolCalls: [
      { id: "c1", name: "add", arguments: "{\"a\":1,\"b\":2}" },
      { id: "c2", name: "add", arguments: "{\"a\":3,\"b\":4}" },
      { id: "c3", name: "add", arguments: "{\"a\":5,\"b\":6}" }
    ]
  },
  { text: "21" }
]
const agent = Agent.make({ tools: [add] })
const once = Effect.suspend(() => Agent.run(agent, "add them", { model: LanguageModel.scripted(script) }))

const program = Effect.gen(function*() {
  for (let i = 0; i < warmup; i++) yield* once
  process.stdout.write("measure\n")
  for (let i = 0; i < runs; i++) yield* once
  process.stdout.write("end\n")
})

Effect.runPromise(program).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
