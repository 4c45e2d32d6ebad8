/**
 * One journaled agent run in a process of its own, for the agent crash test (test/AgentCrash.test.ts):
 * MODE=run starts the run RUN_ID, MODE=resume goes on with it (`Agent.resume`; a run the journal does
 * not have yet, because the process before was killed before it journaled the start, is started).
 * The journal is the SQLite file JOURNAL_DB, or the PostgreSQL database at JOURNAL_URL.
 *
 * The model is scripted by step (the assistant messages in the request, plus one), so a replayed
 * run asks the same as the first: 6 turns, each with concurrent calls of `lookup` (idempotent; its
 * keys repeat within and across turns, so per-run reuse matters) and `append` (not idempotent); the
 * 6th also calls `task_complete`. Each model ask appends `<step> <pid>` to ASKS_FILE before it
 * answers; each tool's side effect appends `<tool> <key> <call id> <pid>` to EFFECTS_FILE, between
 * two short random sleeps, so a kill can land before, during or after it.
 *
 * It prints `ready` once the journal is open, then the run's `RunResult` as one line of JSON, and
 * exits 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Logger, LogLevel, Random, Redacted, Schema } from "effect"
import { appendFileSync } from "node:fs"
import { Agent, Journal, LanguageModel, Tool } from "../../src/index.js"

/** The keys `lookup` is called with, turn by turn: repeats within a turn (1) and across turns. */
const lookups: ReadonlyArray<ReadonlyArray<string>> = [
  ["a", "b", "a"],
  ["c", "b"],
  ["d", "a", "e"],
  ["c", "f"],
  ["e", "g", "d"],
  ["a", "g"]
]
/** `append` calls per turn. */
const appendsPerTurn = 2
const turns = lookups.length
const output = `done after ${turns} turns`

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))
const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`agentRunChild: ${name} is not set`)
  return value
}

/** A few random milliseconds, a side effect logged, a few more. */
const effect = (tool: string, key: string, callId: string) =>
  Effect.gen(function*() {
    yield* Effect.sleep(yield* Random.nextIntBetween(2, 21))
    appendFileSync(env("EFFECTS_FILE"), `${tool} ${key} ${callId} ${process.pid}\n`)
    yield* Effect.sleep(yield* Random.nextIntBetween(2, 21))
  })

const lookup = Tool.make("lookup", {
  description: "Look a key up.",
  input: { key: Schema.String },
  // Long enough that a resumed non-idempotent call runs again rather than timing out.
  timeout: "10 minutes",
  idempotent: true
}, ({ key }, call) => Effect.as(effect("lookup", key, call.toolCallId), `value-${key}`))

const append = Tool.make("append", {
  description: "Append an entry.",
  input: { entry: Schema.String },
  timeout: "10 minutes"
}, ({ entry }, call) => Effect.as(effect("append", entry, call.toolCallId), `appended-${entry}`))

const agent = Agent.make({ name: "crash-agent", tools: [lookup, append], completion: "explicit" })

/** The model's turn at `step`: a function of the step alone. */
const turnAt = (step: number): LanguageModel.ModelTurn => {
  const toolCalls: Array<LanguageModel.ToolCall> = []
  lookups[step - 1]!.forEach((key, j) => {
    toolCalls.push({ id: `s${step}-lookup-${j}`, name: "lookup", arguments: JSON.stringify({ key }) })
    if (j < appendsPerTurn) {
      toolCalls.push({ id: `s${step}-append-${j}`, name: "append", arguments: JSON.stringify({ entry: `s${step}-${j}` }) })
    }
  })
  if (step === turns) {
    toolCalls.push({ id: `s${step}-complete`, name: "task_complete", arguments: JSON.stringify({ result: output }) })
  }
  return { toolCalls, finishReason: "tool_calls", usage: { inputTokens: 10, outputTokens: 5 } }
}

const generate = (request: LanguageModel.ModelRequest) =>
  Effect.suspend(() => {
    const step = request.messages.filter((m) => m._tag === "AssistantMessage").length + 1
    if (step > turns) {
      return Effect.fail(new LanguageModel.ModelError({ message: `asked for turn ${step}`, transient: false }))
    }
    // Logged before the answer goes back: a kill after this line is an ask the model answered.
    appendFileSync(env("ASKS_FILE"), `${step} ${process.pid}\n`)
    return Effect.succeed(turnAt(step))
  })

const model = Layer.succeed(
  LanguageModel.LanguageModel,
  LanguageModel.LanguageModel.of({ generate, stream: LanguageModel.streamOf(generate) })
)

const journal = (): Layer.Layer<Journal.Journal, Journal.JournalUnavailable> => {
  const url = process.env.JOURNAL_URL
  if (url !== undefined && url !== "") {
    // Named by pid: the test waits for the server to be done with a killed process's connections.
    const client = PgClient.layer({ url: Redacted.make(url), applicationName: `agent-run-child-${process.pid}` })
    return Journal.layerSqlClient.pipe(Layer.provide(Layer.orDie(client)))
  }
  return Journal.layerSql({ filename: env("JOURNAL_DB") })
}

const program = Effect.gen(function*() {
  yield* Journal.Journal
  yield* say("ready")
  const runId = env("RUN_ID")
  const prompt = `crash run ${runId}`
  const result = process.env.MODE === "resume"
    ? yield* Agent.resume(agent, runId).pipe(
      // Killed before the run's start was journaled: there is nothing to resume, so it starts.
      Effect.catchTag("UnknownRun", () => Agent.run(agent, prompt, { runId }))
    )
    : yield* Agent.run(agent, prompt, { runId })
  yield* say(JSON.stringify(yield* Effect.orDie(Schema.encode(Agent.RunResult)(result))))
}).pipe(Effect.provide(Layer.merge(journal(), model)), Logger.withMinimumLogLevel(LogLevel.Warning))

NodeRuntime.runMain(program)
