/**
 * What journaling costs an agent run (design: Durable runs): runs of 6 turns with 2 calls a turn,
 * journaled to a SQLite file (WAL) and unjournaled, alternated in one process; the overhead per turn
 * is the difference of the medians divided by the turns. Run with `npm run bench`.
 */
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Journal, LanguageModel } from "../../src/index.js"
import { report } from "./report.js"
import { add } from "./tools.js"

const turns = 6
const runs = 300
const warmup = 30

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  ...Array.from({ length: turns - 1 }, (_, i) => ({
    toolCalls: [
      { id: `c${i}-a`, name: "add", arguments: `{"a":${i},"b":1}` },
      { id: `c${i}-b`, name: "add", arguments: `{"a":${i},"b":2}` }
    ]
  })),
  { text: "done" }
]

const agent = Agent.make({ tools: [add] })
const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "agent-tools-bench-journal-"))
  const model = LanguageModel.layerScripted(script, { perConversation: true, keepRequests: false })
  const plain = yield* Layer.build(model)
  const journaled = yield* Layer.build(Layer.merge(model, Journal.layerSql({ filename: join(dir, "journal.sqlite") })))
  const once = (context: typeof plain | typeof journaled) =>
    Effect.gen(function*() {
      const start = performance.now()
      yield* Effect.provide(Agent.run(agent, "go"), context)
      return (performance.now() - start) * 1000
    })
  for (let i = 0; i < warmup; i++) {
    yield* once(plain)
    yield* once(journaled)
  }
  const without: Array<number> = []
  const withJournal: Array<number> = []
  for (let i = 0; i < runs; i++) {
    without.push(yield* once(plain))
    withJournal.push(yield* once(journaled))
  }
  rmSync(dir, { recursive: true, force: true })
  const [a, b] = [median(without), median(withJournal)]
  report({
    bench: "journal",
    measure: `Agent.run of ${turns} turns, 2 calls a turn, journaled to a SQLite file (WAL), median of ${runs}`,
    value: `${(b / 1000).toFixed(2)} ms a run`,
    baseline: `${(a / 1000).toFixed(2)} ms a run unjournaled`,
    ratio: `+${((b - a) / turns / 1000).toFixed(2)} ms a turn`
  })
}).pipe(Effect.scoped, Effect.withTracerEnabled(false))

Effect.runPromise(main)
