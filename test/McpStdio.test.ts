/**
 * MCP over stdio ends as its clients expect: when stdin closes, in flight calls
 * are interrupted and the process exits at once; a transport error is logged and exits non-zero.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Logger } from "effect"
import { spawn } from "node:child_process"
import { PassThrough } from "node:stream"
import { fileURLToPath } from "node:url"
import { Mcp, Tool, Toolkit } from "../src/index.js"
import { record } from "./support/figures.js"
import { initialize } from "./support/mcpHttp.js"

const root = fileURLToPath(new URL("..", import.meta.url))

const initialized = { jsonrpc: "2.0", method: "notifications/initialized" }

/** The JSON-RPC answers on a stream, one a line, and a wait for the one with `id`; lines that are not JSON. */
const answers = (stream: NodeJS.ReadableStream) => {
  const seen: Array<{ id?: unknown; result?: unknown; error?: unknown }> = []
  const noise: Array<string> = []
  const waiting = new Set<() => void>()
  let buffer = ""
  stream.on("data", (chunk) => {
    buffer += String(chunk)
    const lines = buffer.split("\n")
    buffer = lines.pop() ?? ""
    for (const line of lines) {
      if (line.trim() === "") continue
      try {
        seen.push(JSON.parse(line))
      } catch {
        noise.push(line)
      }
    }
    for (const wake of waiting) wake()
  })
  const answer = (id: number) =>
    new Promise<{ result?: unknown; error?: unknown }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to ${id} within 20 s`)), 20_000)
      const check = () => {
        const found = seen.find((message) => message.id === id)
        if (found === undefined) return
        waiting.delete(check)
        clearTimeout(timer)
        resolve(found)
      }
      waiting.add(check)
      check()
    })
  return { answer, noise }
}

/** `node --import tsx src/main.ts mcp`, with its debug log (which says when it serves) on a pipe. */
const spawnMcp = () => {
  const env = { ...process.env, LOG_LEVEL: "debug", ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "" }
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "mcp"], { cwd: root, env, stdio: "pipe" })
  let stderr = ""
  // Whether it said it serves within 15 s; a test goes on either way, and asserts what it sees then.
  const serving = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 15_000)
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk)
      if (stderr.includes("MCP over stdio: serving")) {
        clearTimeout(timer)
        resolve(true)
      }
    })
  })
  // The child may be gone when the test writes its last bytes.
  child.stdin.on("error", () => undefined)
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  /** Milliseconds from now to the child's exit, and its code; "still running" after `millis`. */
  const exitWithin = (millis: number) => {
    const start = Date.now()
    return Promise.race([
      exited.then((code) => ({ code, millis: Date.now() - start })),
      new Promise<"still running">((resolve) => setTimeout(() => resolve("still running"), millis))
    ]).finally(() => child.kill("SIGKILL"))
  }
  const send = (message: unknown) => child.stdin.write(JSON.stringify(message) + "\n")
  return { child, serving, exitWithin, send, stderr: () => stderr, ...answers(child.stdout) }
}

const figures: Array<string> = []

describe("Mcp over stdio: the process, spawned as an MCP client would", () => {
  it("exits, code 0, within a second or two of stdin closing, fresh", async () => {
    const mcp = spawnMcp()
    await mcp.serving
    mcp.child.stdin.end()
    const exit = await mcp.exitWithin(3_000)
    assert.notStrictEqual(exit, "still running", mcp.stderr())
    if (exit !== "still running") {
      assert.strictEqual(exit.code, 0, mcp.stderr())
      figures.push(`fresh ${(exit.millis / 1000).toFixed(2)} s`)
    }
  }, 60_000)

  it("exits, code 0, within a second or two of stdin closing, after traffic", async () => {
    const mcp = spawnMcp()
    mcp.send(initialize)
    assert.isDefined((await mcp.answer(1)).result)
    mcp.send(initialized)
    mcp.send({ jsonrpc: "2.0", id: 2, method: "tools/list" })
    const args = { customer_id: "cus-1207" }
    mcp.send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "lookup_customer", arguments: args } })
    assert.isDefined((await mcp.answer(2)).result)
    assert.deepStrictEqual((await mcp.answer(3)).result, {
      content: [{ type: "text", text: "{\"id\":\"cus-1207\",\"name\":\"Ada Moreau\",\"tier\":\"gold\"}" }],
      structuredContent: { id: "cus-1207", name: "Ada Moreau", tier: "gold" }
    })
    mcp.child.stdin.end()
    const exit = await mcp.exitWithin(3_000)
    // Only protocol messages on stdout.
    assert.deepStrictEqual(mcp.noise, [])
    assert.notStrictEqual(exit, "still running", mcp.stderr())
    if (exit !== "still running") {
      assert.strictEqual(exit.code, 0, mcp.stderr())
      figures.push(`after traffic ${(exit.millis / 1000).toFixed(2)} s`)
    }
    record({
      suite: "hostile input",
      measure: "stdio exit after stdin closes",
      value: figures.join(", "),
      expected: "< 3 s, code 0"
    })
  }, 60_000)

  it("a line over the SDK's 10 MiB limit: the reason on stderr and a non-zero exit", async () => {
    const mcp = spawnMcp()
    mcp.send(initialize)
    assert.isDefined((await mcp.answer(1)).result)
    mcp.child.stdin.write(Buffer.alloc(10 * 1024 * 1024 + 1024, "a"))
    const exit = await mcp.exitWithin(10_000)
    assert.notStrictEqual(exit, "still running", mcp.stderr())
    if (exit !== "still running") assert.notStrictEqual(exit.code, 0)
    assert.match(
      mcp.stderr(),
      /level=ERROR .*MCP over stdio failed: ReadBuffer exceeded maximum size of 10485760 bytes; the server stops/
    )
  }, 60_000)
})

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
})
