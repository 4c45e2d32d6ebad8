/**
 * MCP over stdio ends as its clients expect, on in-memory streams: when stdin closes, in flight
 * calls are interrupted and the server ends; a transport error fails it with the reason. The same
 * through a spawned process is test/McpStdioProcess.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Logger } from "effect"
import { PassThrough } from "node:stream"
import { Tool, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { initialize } from "./support/mcpHttp.js"
import { answers, initialized } from "./support/mcpStdio.js"

/** `Mcp.serveStdio` on in-memory streams, running; what it wrote comes back through `answer`, its logs in `logs`. */
const serveOnStreams = <R>(toolkit: Toolkit.Toolkit<R>, options: Partial<Mcp.StdioOptions> = {}) =>
  Effect.gen(function*() {
    const stdin = new PassThrough()
    const stdout = new PassThrough()
    const logs: Array<string> = []
    const logger = Logger.make(({ logLevel, message }) =>
      logs.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
    )
    const fiber = yield* Effect.fork(
      Mcp.serveStdio(toolkit as Toolkit.Toolkit<never>, { ...options, stdin, stdout }).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
    )
    const send = (message: unknown) => stdin.write(JSON.stringify(message) + "\n")
    return { fiber, stdin, send, logs, ...answers(stdout) }
  })

describe("Mcp.serveStdio", () => {
  it.live("ends when stdin closes: the call in flight is interrupted (its finalizer runs), then it succeeds", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finalized = { count: 0 }
      const hold = Tool.make("hold", { description: "Holds.", input: {}, timeout: "60 seconds" }, () =>
        Deferred.succeed(started, undefined).pipe(
          Effect.zipRight(Effect.never),
          Effect.ensuring(Effect.sync(() => finalized.count++))
        ))
      const served = yield* serveOnStreams(yield* Toolkit.make(hold))
      served.send(initialize)
      yield* Effect.promise(() => served.answer(1))
      served.send(initialized)
      served.send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "hold", arguments: {} } })
      yield* Deferred.await(started)
      served.stdin.end()
      const exit = yield* Fiber.await(served.fiber).pipe(Effect.timeout("2 seconds"))
      assert.isTrue(Exit.isSuccess(exit))
      assert.strictEqual(finalized.count, 1)
    }))

  it.live("a message over maxMessageBytes fails it with the reason", () =>
    Effect.gen(function*() {
      const served = yield* serveOnStreams(yield* Toolkit.make(), { maxMessageBytes: 1000 })
      served.stdin.write("x".repeat(2000))
      const exit = yield* Fiber.await(served.fiber).pipe(Effect.timeout("2 seconds"))
      const reason = "ReadBuffer exceeded maximum size of 1000 bytes"
      assert.deepStrictEqual(exit, Exit.fail(new Mcp.McpStdioError({ reason })))
      assert.include(served.logs, `ERROR MCP over stdio failed: ${reason}; the server stops`)
    }))

  it.live("an error on stdin fails it with the reason", () =>
    Effect.gen(function*() {
      const served = yield* serveOnStreams(yield* Toolkit.make())
      yield* Effect.sleep("10 millis")
      served.stdin.destroy(new Error("EIO: i/o error, read"))
      const exit = yield* Fiber.await(served.fiber).pipe(Effect.timeout("2 seconds"))
      assert.deepStrictEqual(exit, Exit.fail(new Mcp.McpStdioError({ reason: "stdin: EIO: i/o error, read" })))
    }))

  it.live("a line that is not JSON-RPC is logged and skipped: the server goes on answering", () =>
    Effect.gen(function*() {
      const served = yield* serveOnStreams(yield* Toolkit.make())
      served.stdin.write("this is not json\n")
      served.send(initialize)
      assert.isDefined((yield* Effect.promise(() => served.answer(1))).result)
      served.send({ jsonrpc: "2.0", id: 2, method: "ping" })
      assert.deepStrictEqual((yield* Effect.promise(() => served.answer(2))).result, {})
      assert.isNull(served.fiber.unsafePoll())
      assert.strictEqual(served.logs.length, 1)
      assert.match(served.logs[0]!, /^WARN MCP over stdio: .*JSON/)
      yield* Fiber.interrupt(served.fiber)
    }))

  it.live("a line nested deeper than 512 levels is dropped unread with a warning; the server goes on answering", () =>
    Effect.gen(function*() {
      const served = yield* serveOnStreams(yield* Toolkit.make())
      served.send(initialize)
      assert.isDefined((yield* Effect.promise(() => served.answer(1))).result)
      const deep = "[".repeat(1_000_000) + "]".repeat(1_000_000)
      served.stdin.write(`{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":${deep}}}\n`)
      served.send({ jsonrpc: "2.0", id: 3, method: "ping" })
      assert.deepStrictEqual((yield* Effect.promise(() => served.answer(3))).result, {})
      assert.isNull(served.fiber.unsafePoll())
      assert.deepStrictEqual(served.logs, ["WARN MCP over stdio: a message nested deeper than 512 levels was dropped unread"])
      yield* Fiber.interrupt(served.fiber)
    }))
})
