/**
 * A journaled tree of agent runs in a process of its own, for the sub-agent crash test
 * (test/SubAgentCrash.test.ts): `root` calls `mid` twice at once (calls m1, m2), each `mid` calls `leaf`
 * (call l1), each `leaf` calls `charge` (idempotent) and `note` (not), then `charge` again with the same key
 * (reused). With TREE=handoff the run is one conversation instead: `front` writes a `note`, then hands the run
 * to `billing` (`transfer_to_billing`), which calls `charge` and answers with every result of the conversation.
 * MODE=run starts the root run RUN_ID, MODE=resume goes on with it (a root the journal does not have yet, because
 * the process before was killed before it journaled the start, is started). The journal is the SQLite file
 * JOURNAL_DB.
 *
 * The model is scripted by agent (its instructions) and step; an agent asked with another agent's tools is a model
 * error (the run fails). Each ask appends `<agent>|<prompt> <step> <pid>`
 * to ASKS_FILE before it answers; each tool's side effect appends `<tool> <key> <pid>` to EFFECTS_FILE between
 * two short random sleeps, so that a kill can land before, during or after it. It prints `ready` once the
 * journal is open, then the root's output as a line `output <text>`, and exits 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Logger, LogLevel, Random, Schema } from "effect"
import { appendFileSync } from "node:fs"
import { Agent, Journal, LanguageModel, Tool } from "../../src/index.js"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`agentTreeChild: ${name} is not set`)
  return value
}

const effect = (tool: string, key: string) =>
  Effect.gen(function*() {
    yield* Effect.sleep(yield* Random.nextIntBetween(2, 21))
    appendFileSync(env("EFFECTS_FILE"), `${tool} ${key} ${process.pid}\n`)
    // A test that kills the process inside a charge holds it here, its effect done and its outcome not journaled.
    const hold = Number(process.env.HOLD_AFTER_CHARGE_MS ?? "0")
    yield* Effect.sleep(tool === "charge" && hold > 0 ? hold : yield* Random.nextIntBetween(2, 21))
  })

const charge = Tool.make("charge", {
  description: "Charges once per key.",
  input: { key: Schema.String },
  timeout: "10 minutes",
  idempotent: true
}, ({ key }) => Effect.as(effect("charge", key), `charged-${key}`))

const note = Tool.make("note", {
  description: "Writes a note.",
  input: { entry: Schema.String },
  timeout: "10 minutes"
}, ({ entry }) => Effect.as(effect("note", entry), `noted-${entry}`))

const leaf = Agent.make({ name: "leaf", instructions: "leaf", tools: [charge, note] })
const mid = Agent.make({
  name: "mid",
  instructions: "mid",
  tools: [Agent.asTool(leaf, { name: "leaf", description: "The leaf agent." })]
})
const root = Agent.make({
  name: "root",
  instructions: "root",
  tools: [Agent.asTool(mid, { name: "mid", description: "The mid agent." })]
})

/** TREE=handoff: the agent that holds the run after the transfer, and the one that hands it over. */
const billing = Agent.make({ name: "billing", instructions: "billing", tools: [charge, note] })
const front = Agent.make({ name: "front", instructions: "front", tools: [note], handoffs: [billing] })

/** The tools each agent's turns are asked with. */
const toolsOf: Record<string, string> = {
  root: "mid",
  mid: "leaf",
  leaf: "charge note",
  front: "note transfer_to_billing",
  billing: "charge note"
}

const call = (id: string, name: string, args: unknown): LanguageModel.ToolCall => ({
  id,
  name,
  arguments: JSON.stringify(args)
})

const results = (request: LanguageModel.ModelRequest) =>
  request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}=${m.content}`] : []).join(" ")

/** An agent's turn at `step`, from its instructions and its prompt: the same in every process. */
const turnAt = (agent: string, prompt: string, step: number, request: LanguageModel.ModelRequest): LanguageModel.ModelTurn | undefined => {
  const calls = (toolCalls: ReadonlyArray<LanguageModel.ToolCall>): LanguageModel.ModelTurn => ({
    toolCalls,
    finishReason: "tool_calls",
    usage: { inputTokens: 1, outputTokens: 1 }
  })
  const text = (text: string): LanguageModel.ModelTurn => ({ text, toolCalls: [], finishReason: "stop", usage: { inputTokens: 1, outputTokens: 1 } })
  switch (`${agent} ${step}`) {
    case "root 1":
      return calls([call("m1", "mid", { prompt: "part A" }), call("m2", "mid", { prompt: "part B" })])
    case "root 2":
      return text(`root: ${results(request)}`)
    case "mid 1":
      return calls([call("l1", "leaf", { prompt: `${prompt} leaf` })])
    case "mid 2":
      return text(`mid(${prompt}): ${results(request)}`)
    case "leaf 1":
      return calls([call("c1", "charge", { key: prompt }), call("n1", "note", { entry: prompt })])
    case "leaf 2":
      return calls([call("c2", "charge", { key: prompt })])
    case "leaf 3":
      return text(`leaf(${prompt}): ${results(request)}`)
    // The handoff's conversation: its steps go on across the transfer.
    case "front 1":
      return calls([call("n1", "note", { entry: prompt })])
    case "front 2":
      return calls([call("t1", "transfer_to_billing", {})])
    case "billing 3":
      return calls([call("c1", "charge", { key: prompt })])
    case "billing 4":
      return text(`billing: ${results(request)}`)
  }
  return undefined
}

const generate = (request: LanguageModel.ModelRequest) =>
  Effect.suspend(() => {
    const agent = request.instructions ?? ""
    const first = request.messages[0]
    const prompt = first?._tag === "UserMessage" ? first.text : ""
    const step = request.messages.filter((m) => m._tag === "AssistantMessage").length + 1
    const turn = turnAt(agent, prompt, step, request)
    const tools = request.tools.map((t) => t.name).sort().join(" ")
    if (turn === undefined || tools !== toolsOf[agent]) {
      return Effect.fail(new LanguageModel.ModelError({ message: `${agent} asked for turn ${step} with tools ${tools}`, transient: false }))
    }
    // Logged before the answer goes back: a kill after this line is an ask the model answered.
    appendFileSync(env("ASKS_FILE"), `${agent}|${prompt} ${step} ${process.pid}\n`)
    return Effect.succeed(turn)
  })

const model = Layer.succeed(
  LanguageModel.LanguageModel,
  LanguageModel.LanguageModel.of({ generate, stream: LanguageModel.streamOf(generate) })
)

const program = Effect.gen(function*() {
  yield* Journal.Journal
  process.stdout.write("ready\n")
  const runId = env("RUN_ID")
  const handoff = process.env.TREE === "handoff"
  const agent = handoff ? front : root
  const prompt = `${handoff ? "handoff" : "tree"} ${runId}`
  const result = process.env.MODE === "resume"
    ? yield* Agent.resume(agent, runId).pipe(Effect.catchTag("UnknownRun", () => Agent.run(agent, prompt, { runId })))
    : yield* Agent.run(agent, prompt, { runId })
  process.stdout.write(`output ${result.output}\n`)
}).pipe(
  Effect.provide(Layer.merge(Journal.layerSql({ filename: env("JOURNAL_DB") }), model)),
  Logger.withMinimumLogLevel(LogLevel.Warning)
)

NodeRuntime.runMain(program)
