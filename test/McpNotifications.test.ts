// @effect-diagnostics globalErrorInEffectFailure:off
import { assert, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { LoggingMessageNotificationSchema, type Progress } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Redacted } from "effect"
import { mcpClient, mcpSession } from "./support/mcpHttp.js"
import { mcpStdioClient } from "./support/mcpStreams.js"
import { Tool, ToolContext, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"

const steps = Tool.make("steps", { description: "Counts to three.", input: {}, timeout: "5 seconds" }, () =>
  Effect.gen(function*() {
    yield* ToolContext.progress(1, 3, "one")
    yield* ToolContext.progress(2, 3)
    yield* ToolContext.progress(2, 3, "again") // not rising: MCP requires rising values, so it is dropped
    yield* ToolContext.progress(3, 3, "done")
    return "counted"
  }))

const plainSteps = Tool.make("plain_steps", { description: "Counts, without Effect.", input: {}, timeout: "5 seconds" },
  async (_, call) => {
    call.progress(1, 2)
    call.progress(2, 2, "done")
    return "counted"
  })

const logs = Tool.make("logs", { description: "Logs at four levels.", input: {}, timeout: "5 seconds" }, (_, call) =>
  Effect.gen(function*() {
    yield* ToolContext.log("debug", "looking up the order")
    call.log("info", "found it")
    yield* ToolContext.log("warning", `the key ${Redacted.make("k-123")} expires soon`)
    yield* ToolContext.log("error", { user: "ada", token: Redacted.make("s3cret") })
    return "logged"
  }))

const toolkit = Effect.runSync(Toolkit.make(steps, plainSteps, logs))

const callWithProgress = (client: Client, name: string) =>
  Effect.promise(async () => {
    const seen: Array<Progress> = []
    const result = await client.callTool({ name, arguments: {} }, undefined, { onprogress: (p) => seen.push(p) })
    return { result, seen }
  })

/** The log lines the client has been sent, as `level data`. */
const logLines = (client: Client) => {
  const lines: Array<string> = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    lines.push(`${n.params.level} ${n.params.logger} ${String(n.params.data)}`)
  })
  return lines
}

describe("Mcp: progress", () => {
  it.live("over stdio, each report of a call made with a progress token reaches onprogress, in order", () =>
    Effect.gen(function*() {
      const { client } = yield* mcpStdioClient(toolkit)
      const { result, seen } = yield* callWithProgress(client, "steps")
      assert.deepStrictEqual(result.structuredContent, { result: "counted" })
      assert.deepStrictEqual(seen, [
        { progress: 1, total: 3, message: "one" },
        { progress: 2, total: 3 },
        { progress: 3, total: 3, message: "done" }
      ])
      const plain = yield* callWithProgress(client, "plain_steps")
      assert.deepStrictEqual(plain.seen, [{ progress: 1, total: 2 }, { progress: 2, total: 2, message: "done" }])
    }).pipe(Effect.scoped))

  it.live("without a progress token, no notifications/progress is sent", () =>
    Effect.gen(function*() {
      const { client, received } = yield* mcpStdioClient(toolkit)
      const result = yield* Effect.promise(() => client.callTool({ name: "steps", arguments: {} }))
      assert.deepStrictEqual(result.structuredContent, { result: "counted" })
      const methods = received.map((m) => ("method" in m ? m.method : "answer"))
      assert.notInclude(methods, "notifications/progress")
      assert.strictEqual(methods.filter((m) => m === "answer").length, 2) // initialize, tools/call
    }).pipe(Effect.scoped))

  it.live("over HTTP, reports reach onprogress on the session's stream", () =>
    Effect.gen(function*() {
      const heard = yield* Deferred.make<void>()
      // Reports until the client heard one: the session's GET stream opens just after initialize.
      const ticking = Tool.make("ticking", { description: "Ticks.", input: {}, timeout: "10 seconds" }, () =>
        Effect.gen(function*() {
          for (let i = 1; i <= 200 && !(yield* Deferred.isDone(heard)); i++) {
            yield* ToolContext.progress(i, undefined, `tick ${i}`)
            yield* Effect.sleep("20 millis")
          }
          return "ticked"
        }))
      const { client } = yield* mcpClient(yield* Toolkit.make(ticking))
      const seen: Array<Progress> = []
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "ticking", arguments: {} }, undefined, {
          onprogress: (p) => {
            seen.push(p)
            Deferred.unsafeDone(heard, Effect.void)
          }
        })
      )
      assert.deepStrictEqual(result.structuredContent, { result: "ticked" })
      assert.isAtLeast(seen.length, 1)
      assert.strictEqual(seen[0]!.message, `tick ${seen[0]!.progress}`)
      for (let i = 1; i < seen.length; i++) assert.isAbove(seen[i]!.progress, seen[i - 1]!.progress)
    }).pipe(Effect.scoped))
})

describe("Mcp: log lines", () => {
  it.live("the server declares logging; after logging/setLevel, lines at or above it arrive, Redacted as <redacted>", () =>
    Effect.gen(function*() {
      const { client, received } = yield* mcpStdioClient(toolkit)
      assert.isDefined(client.getServerCapabilities()?.logging)
      const lines = logLines(client)
      yield* Effect.promise(() => client.setLoggingLevel("warning"))
      const result = yield* Effect.promise(() => client.callTool({ name: "logs", arguments: {} }))
      assert.deepStrictEqual(result.structuredContent, { result: "logged" })
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => lines.length >= 2 }).pipe(Effect.timeout("5 seconds"))
      assert.deepStrictEqual(lines, [
        "warning logs the key <redacted> expires soon",
        "error logs {\"user\":\"ada\",\"token\":\"<redacted>\"}"
      ])
      assert.notInclude(JSON.stringify(received), "s3cret")
      assert.notInclude(JSON.stringify(received), "k-123")
      // A lower level lets the lower lines through.
      yield* Effect.promise(() => client.setLoggingLevel("debug"))
      lines.length = 0
      yield* Effect.promise(() => client.callTool({ name: "logs", arguments: {} }))
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => lines.length >= 4 }).pipe(Effect.timeout("5 seconds"))
      assert.deepStrictEqual(lines.map((l) => l.split(" ")[0]), ["debug", "info", "warning", "error"])
    }).pipe(Effect.scoped))

  it.live("over HTTP, the level is per session: each session gets its own lines", () =>
    Effect.gen(function*() {
      const { client, port } = yield* mcpClient(toolkit)
      const other = yield* mcpSession(port)
      const lines = logLines(client)
      const otherLines = logLines(other)
      yield* Effect.promise(() => client.setLoggingLevel("error"))
      yield* Effect.promise(() => other.setLoggingLevel("info"))
      // The session's GET stream opens just after initialize: call until the first line arrives.
      const until = (got: Array<string>, c: Client) =>
        Effect.promise(() => c.callTool({ name: "logs", arguments: {} })).pipe(
          Effect.zipRight(Effect.sleep("50 millis")),
          Effect.repeat({ until: () => got.length > 0 }),
          Effect.timeout("5 seconds")
        )
      yield* until(lines, client)
      yield* until(otherLines, other)
      // Both streams open now: one more call each, every line of it.
      lines.length = 0
      otherLines.length = 0
      yield* Effect.promise(() => client.callTool({ name: "logs", arguments: {} }))
      yield* Effect.promise(() => other.callTool({ name: "logs", arguments: {} }))
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => lines.length >= 1 && otherLines.length >= 3 }).pipe(
        Effect.timeout("5 seconds")
      )
      yield* Effect.sleep("50 millis")
      assert.deepStrictEqual(lines, ["error logs {\"user\":\"ada\",\"token\":\"<redacted>\"}"])
      assert.deepStrictEqual(otherLines.map((l) => l.split(" ")[0]), ["info", "warning", "error"])
    }).pipe(Effect.scoped))
})

describe("Mcp: progress of a remote tool", () => {
  it.live("a remote server's progress reaches our client through Mcp.toolkit and our server", () =>
    Effect.gen(function*() {
      const heard = yield* Deferred.make<void>()
      const ticking = Tool.make("ticking", { description: "Ticks.", input: {}, timeout: "10 seconds" }, () =>
        Effect.gen(function*() {
          for (let i = 1; i <= 200 && !(yield* Deferred.isDone(heard)); i++) {
            yield* ToolContext.progress(i, 200)
            yield* Effect.sleep("20 millis")
          }
          return "ticked"
        }))
      // The remote server over HTTP; its tools served again by ours, over stdio framing.
      const { url } = yield* mcpClient(yield* Toolkit.make(ticking))
      const remote = yield* Mcp.toolkit({ url, prefix: "far_" })
      const { client } = yield* mcpStdioClient(yield* remote.toolkit)
      const seen: Array<Progress> = []
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "far_ticking", arguments: {} }, undefined, {
          onprogress: (p) => {
            seen.push(p)
            Deferred.unsafeDone(heard, Effect.void)
          }
        })
      )
      assert.deepStrictEqual(result.structuredContent, { result: "ticked" })
      assert.isAtLeast(seen.length, 1)
      assert.strictEqual(seen[0]!.total, 200)
    }).pipe(Effect.scoped))
})
