/** A session's scenario, the same on every journal (memory, a SQLite file, PostgreSQL): three runs of one session. */
import { assert } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Agent, LanguageModel, Tool } from "../../src/index.js"

/** A tool whose calls the test counts. */
export const countingLookup = (calls: Array<string>) =>
  Tool.make("lookup_order", {
    description: "Look up an order.",
    input: { orderId: Schema.String },
    output: Schema.String,
    timeout: "10 seconds"
  }, ({ orderId }) => Effect.sync(() => {
    calls.push(orderId)
    return `${orderId}: shipped`
  }))

/** The messages of `request` as short lines: `user: ...`, `assistant: ...` (its calls), `tool <id>: ...`. */
export const linesOf = (request: LanguageModel.ModelRequest | undefined): Array<string> =>
  (request?.messages ?? []).map((m) =>
    m._tag === "UserMessage"
      ? `user: ${m.text}`
      : m._tag === "AssistantMessage"
      ? `assistant: ${m.text ?? ""}${m.toolCalls.map((c) => ` [${c.id} ${c.name}]`).join("")}`
      : `tool ${m.toolCallId}: ${m.content}`
  )

/** The script of three runs: the first calls the tool then answers, the second and third answer at once. */
export const threeRunsScript: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [{ id: "c1", name: "lookup_order", arguments: "{\"orderId\":\"A-1\"}" }] },
  { text: "A-1 has shipped." },
  { text: "You asked about A-1." },
  { text: "Third answer." }
]

/**
 * Three runs of the session `session` (each a new run, given the journal in context): the third model request holds
 * the first two runs' turns, the call paired with its result; the model and the journal say so.
 */
export const threeRuns = (session: string) =>
  Effect.gen(function*() {
    const calls: Array<string> = []
    const agent = Agent.make({ tools: [countingLookup(calls)] })
    const first = yield* Agent.run(agent, "Where is A-1?", { session })
    const second = yield* Agent.run(agent, "What did I ask?", { session })
    const third = yield* Agent.run(agent, "And now?", { session })
    const requests = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
    assert.deepStrictEqual([first.output, second.output, third.output], ["A-1 has shipped.", "You asked about A-1.", "Third answer."])
    assert.strictEqual(requests.length, 4)
    assert.deepStrictEqual(linesOf(requests[3]), [
      "user: Where is A-1?",
      "assistant:  [c1 lookup_order]",
      "tool c1: \"A-1: shipped\"",
      "assistant: A-1 has shipped.",
      "user: What did I ask?",
      "assistant: You asked about A-1.",
      "user: And now?"
    ])
    // The tool ran once: the later runs read its result from the session, they do not call it again.
    assert.deepStrictEqual(calls, ["A-1"])
  })
