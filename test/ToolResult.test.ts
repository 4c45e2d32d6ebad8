import { assert, describe, it } from "@effect/vitest"
import { Cause, Schema } from "effect"
import { ToolResult } from "../src/index.js"

describe("ToolResult", () => {
  it("success and failure: value, failure, error text, success", () => {
    const ok = ToolResult.ToolResult.success({ n: 1 })
    assert.deepStrictEqual([ok.value, ok.failure, ok.error, ok.success], [{ n: 1 }, undefined, undefined, true])
    const timedOut = new ToolResult.TimedOut({ toolName: "slow", allowedMillis: 5_000 })
    const failed = ToolResult.ToolResult.failure(timedOut)
    assert.deepStrictEqual([failed.value, failed.failure, failed.success], [undefined, timedOut, false])
    assert.strictEqual(failed.error, "slow timed out after 5 s; its outcome is unknown")
  })

  it("a plain text is an Unclassified failure with that text", () => {
    const result = ToolResult.ToolResult.failure("person: denied by policy")
    assert.strictEqual(result.failure?._tag, "Unclassified")
    assert.strictEqual(result.error, "person: denied by policy")
  })

  it("the error text is cut to maxErrorLength; the failure keeps the whole text", () => {
    const failure = new ToolResult.Unclassified({ text: "m".repeat(100) })
    const result = ToolResult.ToolResult.failure(failure, 10)
    assert.strictEqual(result.error, "mmmmmmmmm…")
    assert.strictEqual(result.failure?.text.length, 100)
  })

  it("each kind's text is the model-facing text", () => {
    const cause = Cause.fail(new Error("down"))
    const texts = [
      new ToolResult.InvalidInput({ toolName: "t", reason: "n: Expected number, actual \"one\"" }),
      new ToolResult.DeadlinePassed({ toolName: "t" }),
      new ToolResult.TimedOut({ toolName: "t", allowedMillis: 2_000 }),
      new ToolResult.HandlerFailed({ toolName: "t", cause, text: "Error: down" }),
      new ToolResult.Interrupted({ toolName: "t" }),
      new ToolResult.InvalidOutput({ toolName: "t", reason: "a Map is not JSON" }),
      new ToolResult.InvalidOutput({ reason: "the result is 9 bytes, over the platform's frame limit of 8" }),
      new ToolResult.HookFailed({ toolName: "t", cause }),
      new ToolResult.Denied({ toolName: "t", reason: "the user did not approve this call; it did not run" }),
      new ToolResult.UnknownTool({ toolName: "t", available: ["a", "b"] }),
      new ToolResult.UnknownTool({ toolName: "t" }),
      new ToolResult.OutcomeUnknown({ toolName: "t", earlierAttempt: "interrupted" }),
      new ToolResult.OutcomeUnknown({ toolName: "t", earlierAttempt: "unfinished" })
    ].map((failure) => ToolResult.ToolResult.failure(failure).error)
    assert.deepStrictEqual(texts, [
      "t: invalid input: n: Expected number, actual \"one\"",
      "t: its deadline passed before it started; it did not run",
      "t timed out after 2 s; its outcome is unknown",
      "Error: down",
      "t: the call was interrupted; its outcome is unknown",
      "t: invalid output: a Map is not JSON",
      "invalid output: the result is 9 bytes, over the platform's frame limit of 8",
      "t: a hook failed: Error: down",
      "t: the user did not approve this call; it did not run",
      "t: no such tool; the available tools are a, b",
      "t: this process does not serve this tool",
      "t: the earlier attempt was interrupted; its outcome is unknown",
      "t: the earlier attempt did not finish; its outcome is unknown"
    ])
  })

  it("on the wire only the text travels: a decoded failure is Unclassified with the same text", () => {
    const codec = Schema.parseJson(ToolResult.ToolResultFromJson)
    const sent = ToolResult.ToolResult.failure(new ToolResult.TimedOut({ toolName: "slow", allowedMillis: 1_000 }))
    const text = Schema.encodeSync(codec)(sent)
    assert.strictEqual(text, "{\"error\":\"slow timed out after 1 s; its outcome is unknown\"}")
    const received = Schema.decodeSync(codec)(text)
    assert.deepStrictEqual([received.failure?._tag, received.error], ["Unclassified", sent.error])
    assert.strictEqual(Schema.decodeSync(codec)("{\"value\":3}").value, 3)
  })
})
