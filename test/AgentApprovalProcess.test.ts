/**
 * An approval given from another OS process (design: Durable runs): a run suspends in this process,
 * a second process approves one call and denies another through the journal's SQLite file, and the
 * run resumed here runs the approved call only.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Journal, LanguageModel, Tool } from "../src/index.js"
import { startChild } from "./support/childProcess.js"

const call = (id: string, args: unknown): LanguageModel.ToolCall => ({ id, name: "refund", arguments: JSON.stringify(args) })

describe("Durable runs: approval from a second process", () => {
  it.live("a second process approves one call and denies the other; the resumed run runs the approved one only", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-approve-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const file = join(dir, "journal.sqlite")
      const refunds: Array<string> = []
      const refund = Tool.make("refund", {
        description: "Refunds an order.",
        input: { orderId: Schema.String },
        output: Schema.String,
        timeout: "5 seconds",
        needsApproval: true
      }, ({ orderId }) => Effect.sync(() => (refunds.push(orderId), `refunded ${orderId}`)))
      const agent = Agent.make({ tools: [refund] })
      const script = LanguageModel.layerScripted([
        { toolCalls: [call("r1", { orderId: "A-1" }), call("r2", { orderId: "A-2" })] },
        (request) => ({
          text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join(" | ")
        })
      ], { perConversation: true })
      // A layer per run: each builds its own model and opens the file anew, as a new process would.
      const layer = Layer.merge(script, Journal.layerSql({ filename: file }))

      const first = yield* Effect.exit(Agent.run(agent, "refund both", { runId: "run-1" })).pipe(Effect.provide(layer))
      assert.isTrue(Exit.isFailure(first) && Cause.failureOption(first.cause).pipe((f) => f._tag === "Some" && f.value._tag === "RunSuspended"))

      for (const [callId, decision] of [["r1", "approve"], ["r2", "deny"]] as const) {
        const child = startChild("test/support/approveChild.ts", {
          JOURNAL: file,
          RUN_ID: "run-1",
          CALL_ID: callId,
          DECISION: decision,
          REASON: "not this one"
        })
        const code = yield* Effect.promise(() => child.exited)
        assert.strictEqual(code, 0, child.lines.join("\n"))
        assert.include(child.lines, `decided ${callId}`)
      }

      const resumed = yield* Agent.resume(agent, "run-1").pipe(Effect.provide(layer))
      assert.deepStrictEqual(refunds, ["A-1"])
      assert.strictEqual(
        resumed.output,
        "\"refunded A-1\" | refund: the user denied this call: not this one; it did not run"
      )
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
