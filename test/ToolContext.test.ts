import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Redacted } from "effect"
import { Invocation, Tool, ToolContext } from "../src/index.js"

describe("ToolContext.progress and ToolContext.log outside MCP", () => {
  it.effect("progress is heard by nobody; a log line goes to Effect's logger at the matching level, Redacted hidden", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        lines.push(`${logLevel.label} ${(Array.isArray(message) ? message : [message]).map(String).join(" ")}`)
      })
      const tool = Tool.make("work", { description: "Works.", input: {}, timeout: "5 seconds" }, () =>
        Effect.gen(function*() {
          yield* ToolContext.progress(1, 2, "half")
          yield* ToolContext.log("warning", `key ${Redacted.make("k-1")}`)
          yield* ToolContext.log("critical", { token: Redacted.make("s3cret") })
          return "done"
        }))
      // A body that is not an Effect: its Call's log goes through the caller's logger too.
      const plain = Tool.make("plain", { description: "Works.", input: {}, timeout: "5 seconds" }, async (_, call) => {
        call.progress(1)
        call.log("notice", "plain line")
        return "done too"
      })
      const withLogger = Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      const result = yield* Invocation.run(tool, {}).pipe(withLogger)
      const plainResult = yield* Invocation.run(plain, {}).pipe(withLogger)
      assert.strictEqual(result.value, "done")
      assert.strictEqual(plainResult.value, "done too")
      assert.deepStrictEqual(lines, ["WARN key <redacted>", "FATAL {\"token\":\"<redacted>\"}", "INFO plain line"])
    }))
})
