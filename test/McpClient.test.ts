/**
 * Remote MCP tools through our pipeline (`Mcp.toolkit`), against real servers: our own (src/Mcp.ts)
 * over stdio, in a child process, and over Streamable HTTP on 127.0.0.1; a server whose list changes
 * (the SDK's low-level `Server`, in a child); and the SDK's example Streamable HTTP server, spawned.
 * Real time, short: the servers are real processes and sockets.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Chunk, ConfigProvider, Effect, Either, Exit, Layer, Logger, LogLevel, Schedule, Schema, Scope, Stream } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createRequire } from "node:module"
import { Agent, Ids, Invocation, LanguageModel, Timing, Tool, ToolContext, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { bundleChild } from "./support/childProcess.js"
import { mcpServer } from "./support/mcpHttp.js"
import { makeSeen, remoteTools, type Seen } from "./support/mcpRemoteTools.js"

// Bundled once: a child on the bundle starts in a fraction of the time tsx needs.
const remoteChild = bundleChild("test/support/mcpRemoteChild.ts", mkdtempSync(join(tmpdir(), "mcpc-remote-")))
const listChild = bundleChild("test/support/mcpListChild.ts", mkdtempSync(join(tmpdir(), "mcpc-list-")))

/** Our server's tools over stdio, in a child process. */
const overStdio = (options?: Partial<Mcp.ToolkitOptions>) =>
  Effect.flatMap(Effect.promise(() => remoteChild), (bundle) =>
    Mcp.toolkit({ command: process.execPath, args: [bundle], ...options } as Mcp.ToolkitOptions))

/** Our server's tools over HTTP, in this process, counting into `seen`. */
const overHttp = (seen: Seen, options?: Partial<Mcp.ToolkitOptions>) =>
  Effect.gen(function*() {
    const port = yield* mcpServer(yield* Toolkit.make(...remoteTools(seen)))
    return yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp`, ...options } as Mcp.ToolkitOptions)
  })

const byName = (tools: ReadonlyArray<Mcp.RemoteTool>, name: string): Mcp.RemoteTool => {
  const tool = tools.find((t) => t.name === name)
  if (tool === undefined) throw new Error(`no tool ${name} among ${tools.map((t) => t.name).join(", ")}`)
  return tool
}

/** Calls the remote tool `name` through the pipeline. */
const call = (remote: Mcp.RemoteToolkit, name: string, args: unknown) =>
  Effect.flatMap(remote.tools, (tools) => Invocation.run(byName(tools, name), args))

/** Waits (real time, a few seconds at most) until `check` holds. */
const eventually = <A>(effect: Effect.Effect<A>, check: (a: A) => boolean) =>
  effect.pipe(
    Effect.filterOrFail(check, () => "not yet"),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.upTo("5 seconds"))),
    Effect.orElse(() => effect)
  )

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const freePort = () =>
  Effect.promise(() =>
    new Promise<number>((resolve) => {
      const server = createServer()
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
      })
    })
  )

// The examples of the SDK's ESM build, beside the CommonJS one that require.resolve finds (dist/cjs/client/index.js).
const sdkExamples = join(
  createRequire(import.meta.url).resolve("@modelcontextprotocol/sdk/client/index.js"),
  "../../../esm/examples/server"
)

/** The SDK's example Streamable HTTP server, spawned on `port`; ended with the scope. */
const sdkExampleServer = (port: number) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<ChildProcess>((resolve, reject) => {
        const child = spawn(process.execPath, [join(sdkExamples, "simpleStreamableHttp.js")], {
          env: { ...process.env, MCP_PORT: String(port) },
          stdio: ["ignore", "pipe", "ignore"]
        })
        let out = ""
        const onData = (chunk: unknown) => {
          out += String(chunk)
          if (!out.includes("listening on port")) return
          // It logs every request: read on, keep nothing.
          child.stdout.off("data", onData)
          child.stdout.resume()
          resolve(child)
        }
        child.stdout.on("data", onData)
        child.once("exit", (code) => reject(new Error(`the example server exited (${code}): ${out}`)))
      })
    ),
    // Gone before the scope is: a server started next on the same port finds it free.
    (child) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve()
          child.once("exit", () => resolve())
          child.kill("SIGKILL")
        })
      )
  )

describe("Mcp.toolkit: our own server over stdio", () => {
  it.live("gives the server's tools as ours: the inputSchema verbatim, in the manifest too, and calls that work", () =>
    Effect.gen(function*() {
      const remote = yield* overStdio({ prefix: "remote_" })
      const toolkit = yield* remote.toolkit
      assert.deepStrictEqual(toolkit.tools.map((t) => t.name), [
        "remote_place_order",
        "remote_slow",
        "remote_flaky",
        "remote_charge",
        "remote_stats",
        "remote_exit"
      ])
      const local = remoteTools(makeSeen())[0]!
      // The server lists Tool.jsonSchema(place_order).parameters as its inputSchema: the same comes back.
      assert.deepStrictEqual(toolkit.definitions[0]!.parameters, Tool.jsonSchema(local).parameters)
      assert.deepStrictEqual(toolkit.manifest[0]!.parameters, Tool.jsonSchema(local).parameters)
      assert.strictEqual(toolkit.manifest[0]!.description, "Place an order.")
      const placed = yield* call(remote, "remote_place_order", { order: { id: "o-1", qty: 2 } })
      assert.deepStrictEqual(placed.value, { placed: "o-1" })
      // The server's outputSchema is the output's JSON Schema; its structuredContent, checked against it, the output.
      assert.deepStrictEqual(toolkit.manifest[0]!.output, Mcp.describe(local).entry.outputSchema as unknown)
      // A listing on demand gives the same tools.
      assert.deepStrictEqual((yield* remote.refresh).map((t) => t.name), toolkit.tools.map((t) => t.name))
    }).pipe(Effect.scoped), 30_000)

  it.live("refuses an unknown nested key before anything is sent, naming the field and what was expected", () =>
    Effect.gen(function*() {
      const remote = yield* overStdio()
      const refused = yield* call(remote, "place_order", { order: { id: "o-1", qty: "2", extra: true } })
      assert.strictEqual(refused.failure?._tag, "InvalidInput")
      assert.strictEqual(
        refused.error,
        "place_order: invalid input: order.extra: is unexpected, expected: \"id\" | \"qty\"; " +
          "order.qty: Expected number, actual \"2\""
      )
      const missing = yield* call(remote, "place_order", {})
      assert.strictEqual(missing.error, "place_order: invalid input: order: is missing")
      // The server saw neither (stats has no output Schema: its object goes out as it is, unwrapped).
      const stats = yield* call(remote, "stats", {})
      assert.strictEqual((stats.value as Seen).placed, 0)
    }).pipe(Effect.scoped), 30_000)

  it.live("a slow call is cancelled at its deadline: the server in the child sees notifications/cancelled", () =>
    Effect.gen(function*() {
      const remote = yield* overStdio({ tools: { slow: { timeout: "300 millis" } } })
      const result = yield* call(remote, "slow", {})
      assert.strictEqual(result.error, "slow timed out after 300 ms; its outcome is unknown")
      const stats = Effect.map(call(remote, "stats", {}), (r) => r.value as Seen)
      const seen = yield* eventually(stats, (s) => s.cancelled === 1)
      assert.deepStrictEqual([seen.slowStarted, seen.cancelled], [1, 1])
    }).pipe(Effect.scoped), 30_000)

  it.live("a server that dies mid-call gives a failure; the next call starts a new one and succeeds", () =>
    Effect.gen(function*() {
      const remote = yield* overStdio()
      const first = yield* remote.processId
      assert.isDefined(first)
      const died = yield* call(remote, "exit", {})
      assert.strictEqual(died.failure?._tag, "HandlerFailed")
      assert.match(died.error!, /^McpClientError: the connection to the MCP server ".*" failed during the call \(.*Connection closed.*\); the next call connects again$/)
      const placed = yield* call(remote, "place_order", { order: { id: "o-2", qty: 1 } })
      assert.deepStrictEqual(placed.value, { placed: "o-2" })
      const second = yield* remote.processId
      assert.isDefined(second)
      assert.notStrictEqual(second, first)
      assert.isFalse(isAlive(first!))
    }).pipe(Effect.scoped), 30_000)

  it.live("the child process ends when the scope closes", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const remote = yield* Scope.extend(overStdio(), scope)
      const pid = yield* remote.processId
      assert.isDefined(pid)
      assert.isTrue(isAlive(pid!))
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(isAlive(pid!))
      // And the toolkit says why it no longer calls.
      const after = yield* call(remote, "stats", {})
      assert.match(after.error!, /^McpClientError: the connection to .* is closed \(its scope ended\)$/)
    }), 30_000)
})

describe("Mcp.toolkit: our own server over Streamable HTTP", () => {
  it.live("a slow call is cancelled at its deadline: the server sees notifications/cancelled and interrupts it", () =>
    Effect.gen(function*() {
      const seen = makeSeen()
      const remote = yield* overHttp(seen, { tools: { slow: { timeout: "300 millis" } } })
      const result = yield* call(remote, "slow", {})
      assert.strictEqual(result.failure?._tag, "TimedOut")
      assert.strictEqual(result.error, "slow timed out after 300 ms; its outcome is unknown")
      assert.strictEqual(seen.slowStarted, 1)
      // Our server interrupts the call on notifications/cancelled, and its finalizer counts it.
      assert.strictEqual((yield* eventually(Effect.sync(() => seen.cancelled), (n) => n === 1)), 1)
      // The connection is still good.
      assert.deepStrictEqual((yield* call(remote, "charge", { amount: 1 })).value, { charged: 1 })
    }).pipe(Effect.scoped), 30_000)

  it.live("a transient failure is retried when retries are opted in for that tool; without, the server's text is the error", () =>
    Effect.gen(function*() {
      const once = makeSeen()
      const plain = yield* overHttp(once)
      const failed = yield* call(plain, "flaky", {})
      assert.strictEqual(failed.error, "Busy: try again in a moment")
      assert.strictEqual(once.flaky, 1)

      const seen = makeSeen()
      const retried = yield* overHttp(seen, { tools: { flaky: { retries: 2 } } })
      const result = yield* call(retried, "flaky", {})
      assert.deepStrictEqual(result.value, { result: "done" })
      assert.strictEqual(seen.flaky, 2)
    }).pipe(Effect.scoped, Effect.provide(Timing.layer({ toolRetry: Schedule.spaced("10 millis") }))), 30_000)

  it.live("an idempotent tool runs once for the same input in one agent run", () =>
    Effect.gen(function*() {
      const seen = makeSeen()
      const remote = yield* overHttp(seen, { prefix: "shop_", tools: { charge: { idempotent: true } } })
      const agent = Agent.make({ tools: yield* remote.tools })
      const result = yield* Agent.run(agent, "charge 5, twice").pipe(Effect.provide(LanguageModel.layerScripted([
        { toolCalls: [{ id: "c1", name: "shop_charge", arguments: "{\"amount\":5}" }] },
        { toolCalls: [{ id: "c2", name: "shop_charge", arguments: "{\"amount\":5}" }] },
        { text: "charged" }
      ])))
      assert.strictEqual(result.output, "charged")
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.result.value, c.cached]), [
        ["c1", { charged: 5 }, false],
        ["c2", { charged: 5 }, true]
      ])
      assert.strictEqual(seen.charged, 1)
    }).pipe(Effect.scoped), 30_000)

  it.live("a name that clashes with a local tool is a manifest violation; a prefix keeps them apart", () =>
    Effect.gen(function*() {
      const local = Tool.make("charge", { description: "Local.", input: {}, timeout: "1 second" }, () => "local")
      const remote = yield* overHttp(makeSeen())
      const clash = yield* Effect.either(Effect.flatMap(remote.tools, (tools) => Toolkit.make(local, ...tools)))
      assert.isTrue(Either.isLeft(clash))
      if (Either.isLeft(clash)) {
        assert.deepStrictEqual(clash.left.violations.map((v) => [v.tool, v.rule]), [["charge", "name-unique"]])
      }
      const prefixed = yield* overHttp(makeSeen(), { prefix: "remote_" })
      const toolkit = yield* Effect.flatMap(prefixed.tools, (tools) => Toolkit.make(local, ...tools))
      assert.includeMembers(toolkit.tools.map((t) => t.name), ["charge", "remote_charge"])
    }).pipe(Effect.scoped), 30_000)

  it.live("a server restarted between calls: a call with retries opted in goes through on a new session", () =>
    Effect.gen(function*() {
      const port = yield* freePort()
      const seen = makeSeen()
      const toolkit = yield* Toolkit.make(...remoteTools(seen))
      const serve = (scope: Scope.Scope) => Scope.extend(Layer.build(Mcp.layerHttp(toolkit, { port })), scope)
      const first = yield* Scope.make()
      yield* serve(first)
      const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp`, tools: { charge: { retries: 1 } } })
      assert.deepStrictEqual((yield* call(remote, "charge", { amount: 1 })).value, { charged: 1 })
      yield* Scope.close(first, Exit.void)
      yield* serve(yield* Effect.scope)
      // The old session is unknown to the new server (sent again at once, on a new session), or the old
      // connection's socket is closed under the call (a failure, outcome unknown: the retry runs on a new one).
      const again = yield* call(remote, "charge", { amount: 2 })
      assert.deepStrictEqual([again.error, again.value], [undefined, { charged: 2 }])
      assert.strictEqual(seen.charged, 2)
    }).pipe(Effect.scoped), 30_000)

  it.live("a session the server closed: the call is sent again at once on a new session", () =>
    Effect.gen(function*() {
      const seen = makeSeen()
      // Session ids counted: the first is session-1.
      const port = yield* mcpServer(yield* Toolkit.make(...remoteTools(seen)), Ids.layerDeterministic)
      const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp` })
      assert.deepStrictEqual((yield* call(remote, "charge", { amount: 1 })).value, { charged: 1 })
      const deleted = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/mcp`, { method: "DELETE", headers: { "mcp-session-id": "session-1" } })
      )
      assert.strictEqual(deleted.status, 200)
      const again = yield* call(remote, "charge", { amount: 2 })
      assert.deepStrictEqual([again.error, again.value], [undefined, { charged: 2 }])
      assert.strictEqual(seen.charged, 2)
    }).pipe(Effect.scoped), 30_000)

  it.live("options for a tool the server does not list are reported in a warning", () =>
    Effect.gen(function*() {
      const logged: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (logLevel._tag === "Warning") logged.push(String(Array.isArray(message) ? message.join(" ") : message))
      })
      yield* overHttp(makeSeen(), { tools: { charge: { retries: 1 }, chrage: { idempotent: true } } }).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      assert.strictEqual(logged.length, 1)
      assert.match(logged[0]!, /^Mcp\.toolkit: the MCP server at http:\/\/127\.0\.0\.1:\d+\/mcp lists no tool named "chrage"; its options are not used/)
    }).pipe(Effect.scoped), 30_000)

  it.live("the server's log lines are logged here at their level, named after the server and its logger, each cut to 2,000 characters", () =>
    Effect.gen(function*() {
      const logged: Array<{ level: string; text: string }> = []
      const logger = Logger.make(({ logLevel, message }) => {
        const text = String(Array.isArray(message) ? message.join(" ") : message)
        if (text.startsWith("Mcp.toolkit: ")) logged.push({ level: logLevel.label, text })
      })
      const chatty = Tool.make("chatty", { description: "Logs.", input: {}, output: Schema.String, timeout: "10 seconds" }, () =>
        Effect.gen(function*() {
          yield* ToolContext.log("warning", "low on stock")
          yield* ToolContext.log("debug", "x".repeat(10_000))
          return "ok"
        }))
      const port = yield* mcpServer(yield* Toolkit.make(chatty))
      const result = yield* Effect.gen(function*() {
        const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp` })
        return yield* call(remote, "chatty", {})
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Logger.withMinimumLogLevel(LogLevel.All))
      assert.isUndefined(result.error)
      yield* eventually(Effect.sync(() => logged.length), (n) => n >= 2)
      const server = `the MCP server at http://127.0.0.1:${port}/mcp (chatty)`
      assert.deepStrictEqual(logged[0], { level: "WARN", text: `Mcp.toolkit: ${server}: low on stock` })
      assert.strictEqual(logged[1]!.level, "DEBUG")
      assert.strictEqual(logged[1]!.text, `Mcp.toolkit: ${server}: ${"x".repeat(1_999)}…`)
    }).pipe(Effect.scoped), 30_000)

  it.live("served to the platform: its model is offered the server's schema, and a task's call reaches the server", () =>
    Effect.gen(function*() {
      const seen = makeSeen()
      const remote = yield* overHttp(seen, { prefix: "shop_" })
      const served = yield* Serve.makeConfig(yield* remote.toolkit)
      const output = yield* served.runTask("Place order o-7")
      assert.strictEqual(output, "{\"placed\":\"o-7\"}")
      assert.strictEqual(seen.placed, 1)
      const [first] = yield* Effect.flatMap(LanguageModel.Scripted, (scripted) => scripted.requests)
      const offered = first!.tools.find((t) => t.name === "shop_place_order")
      assert.deepStrictEqual(offered?.parameters, Tool.jsonSchema(remoteTools(makeSeen())[0]!).parameters as unknown)
    }).pipe(
      Effect.scoped,
      Effect.provide(PlatformClient.layerTest.pipe(
        Layer.provideMerge(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
        Layer.provideMerge(LanguageModel.layerScripted([
          { toolCalls: [{ id: "c1", name: "shop_place_order", arguments: "{\"order\":{\"id\":\"o-7\",\"qty\":1}}" }] },
          (request) => ({
            text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join()
          })
        ])),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([
          ["AGENT_ID", "agent-1"],
          ["PLATFORM_TOKEN", "tok-1"]
        ]))))
      ))
    ), 30_000)

  it.live("remote tools served again over MCP keep the remote schemas", () =>
    Effect.gen(function*() {
      const remote = yield* overHttp(makeSeen(), { prefix: "r_" })
      const port = yield* mcpServer(yield* remote.toolkit)
      const client = new Client({ name: "test", version: "1.0.0" })
      yield* Effect.acquireRelease(
        Effect.promise(() => client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)))),
        () => Effect.promise(() => client.close())
      )
      const listed = yield* Effect.promise(() => client.listTools())
      const local = remoteTools(makeSeen())[0]!
      assert.deepStrictEqual(listed.tools[0]!.inputSchema, Tool.jsonSchema(local).parameters as unknown)
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "r_place_order", arguments: { order: { id: "o-9", qty: 1 } } })
      )
      assert.deepStrictEqual(result.structuredContent, { placed: "o-9" })
    }).pipe(Effect.scoped), 30_000)
})

describe("Mcp.toolkit: results and list changes, on the SDK's low-level Server", () => {
  it.live("the output: structuredContent, checked against an outputSchema; a single text; else the content", () =>
    Effect.gen(function*() {
      const bundle = yield* Effect.promise(() => listChild)
      const remote = yield* Mcp.toolkit({ command: process.execPath, args: [bundle] })
      assert.deepStrictEqual((yield* call(remote, "mixed", {})).value, [
        { type: "text", text: "a chart" },
        { type: "image", data: "AAAA", mimeType: "image/png" }
      ])
      assert.deepStrictEqual((yield* call(remote, "structured", {})).value, { n: 1 })
      const bad = yield* call(remote, "bad_output", {})
      assert.strictEqual(bad.failure?._tag, "InvalidOutput")
      assert.strictEqual(bad.error, "bad_output: invalid output: n: Expected number, actual \"x\"")
      const failing = yield* call(remote, "failing", {})
      assert.strictEqual(failing.failure?._tag, "HandlerFailed")
      assert.strictEqual(failing.error, "the quota is spent\nretry tomorrow")
      // A JSON-RPC error answer is a failure too; the connection stays.
      const refused = yield* call(remote, "refused", {})
      assert.strictEqual(
        refused.error,
        "McpClientError: the MCP server \"node\" answered with an error (-32602): refused: not today"
      )
      assert.strictEqual((yield* call(remote, "structured", {})).success, true)
      // Without additionalProperties: false, ajv lets an unknown key through to the server.
      assert.strictEqual((yield* call(remote, "mixed", { extra: 1 })).success, true)
    }).pipe(Effect.scoped), 30_000)


  it.live("a schema's dialect is its $schema's; one ajv cannot compile is a violation naming the tool", () =>
    Effect.gen(function*() {
      const bundle = yield* Effect.promise(() => listChild)
      const remote = yield* Mcp.toolkit({ command: process.execPath, args: [bundle] })
      const strict2020 = {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { a: { type: "string" } },
        unevaluatedProperties: false
      }
      yield* call(remote, "add_tool", { name: "modern", inputSchema: strict2020 })
      const tools = yield* eventually(remote.tools, (tools) => tools.some((t) => t.name === "modern"))
      assert.deepStrictEqual(Tool.jsonSchema(byName(tools, "modern")).parameters as unknown, strict2020)
      assert.strictEqual((yield* call(remote, "modern", { a: "x" })).value, "modern ran")
      assert.strictEqual((yield* call(remote, "modern", { a: "x", b: 1 })).error, "modern: invalid input: b: is unexpected")
      const unusable = { type: "object", properties: { a: { type: "strin" } } }
      yield* call(remote, "add_tool", { name: "odd", inputSchema: unusable, outputSchema: unusable })
      yield* eventually(remote.tools, (tools) => tools.some((t) => t.name === "odd"))
      const refused = yield* Effect.flip(remote.toolkit)
      assert.deepStrictEqual(refused.violations.map((v) => [v.tool, v.rule]), [["odd", "input-json"], ["odd", "output-json"]])
      assert.match(refused.message, /^"odd": the server's inputSchema cannot be checked: type must be JSONType/)
      // Its input would go to the server unchecked: it cannot be called.
      assert.match((yield* call(remote, "odd", { a: "x" })).error!, /^odd: invalid input: .*the tool cannot be called/)
    }).pipe(Effect.scoped), 30_000)

  it.live("a schema nested 200 deep refuses that tool only; past 64 tools none is compiled", () =>
    Effect.gen(function*() {
      const bundle = yield* Effect.promise(() => listChild)
      const remote = yield* Mcp.toolkit({ command: process.execPath, args: [bundle] })
      yield* call(remote, "add_tool", { name: "deep", depth: 200 })
      yield* call(remote, "add_tool", { name: "shallow", depth: 3 })
      const tools = yield* eventually(remote.tools, (tools) => tools.some((t) => t.name === "shallow"))
      const refused = yield* Effect.flip(Toolkit.make(...tools))
      assert.deepStrictEqual(refused.violations.map((v) => [v.tool, v.rule]), [["deep", "input-json"]])
      assert.include(refused.violations[0]!.message, "nested deeper than 64 levels")
      assert.match((yield* call(remote, "deep", {})).error!, /the tool cannot be called/)
      assert.strictEqual((yield* call(remote, "shallow", { a: { a: { a: "x" } } })).value, "shallow ran")
      yield* call(remote, "add_tool", { name: "many", count: 70 })
      const all = yield* eventually(remote.tools, (tools) => tools.length > 64)
      const over = yield* Effect.flip(Toolkit.make(...all))
      assert.strictEqual(over.violations[0]!.rule, "max-tools")
      assert.include(over.violations.find((v) => v.tool === "many_1")!.message, "the server lists more than 64 tools")
    }).pipe(Effect.scoped), 30_000)

  it.live("notifications/tools/list_changed updates the toolkit; names past our limits that arrive are violations", () =>
    Effect.gen(function*() {
      const bundle = yield* Effect.promise(() => listChild)
      const remote = yield* Mcp.toolkit({ command: process.execPath, args: [bundle, "alpha"] })
      const fixed = ["add_tool", "refused", "mixed", "structured", "bad_output", "failing"]
      assert.deepStrictEqual((yield* remote.toolkit).tools.map((t) => t.name), [...fixed, "alpha"])
      assert.strictEqual((yield* call(remote, "add_tool", { name: "beta" })).value, "added")
      const changed = yield* remote.changes.pipe(
        Stream.filter((tools) => tools.some((t) => t.name === "beta")),
        Stream.take(1),
        Stream.runCollect,
        Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "no list change within 5 s" })
      )
      assert.deepStrictEqual(Chunk.unsafeHead(changed).map((t) => t.name), [...fixed, "alpha", "beta"])
      assert.strictEqual((yield* call(remote, "beta", {})).value, "beta ran")
      // A name our limits refuse is reported, not a crash: the toolkit says why, the tools stay readable.
      yield* call(remote, "add_tool", { name: "finish" })
      yield* call(remote, "add_tool", { name: "read.file" })
      yield* eventually(remote.tools, (tools) => tools.some((t) => t.name === "read.file"))
      const refused = yield* Effect.flip(remote.toolkit)
      assert.deepStrictEqual(refused.violations.map((v) => [v.tool, v.rule]), [
        ["finish", "name-reserved"],
        ["read.file", "name-pattern"]
      ])
      assert.strictEqual(refused.violations[1]!.message, "\"read.file\": the name must match ^[a-zA-Z0-9_-]+$")
    }).pipe(Effect.scoped), 30_000)
})

describe("Mcp.toolkit: the SDK's example Streamable HTTP server", () => {
  it.live("its zod-made schemas verbatim; ajv decides what it refuses; a single text is the output", () =>
    Effect.gen(function*() {
      const port = yield* freePort()
      yield* sdkExampleServer(port)
      const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp`, prefix: "ex_" })
      const toolkit = yield* remote.toolkit
      assert.deepStrictEqual(Tool.jsonSchema(toolkit.byName.get("ex_greet")!).parameters as unknown, {
        type: "object",
        properties: { name: { type: "string", description: "Name to greet" } },
        required: ["name"],
        $schema: "http://json-schema.org/draft-07/schema#"
      })
      assert.strictEqual((yield* call(remote, "ex_greet", { name: "Ada" })).value, "Hello, Ada!")
      assert.strictEqual((yield* call(remote, "ex_greet", { name: 7 })).error, "ex_greet: invalid input: name: Expected string, actual 7")
      assert.strictEqual(
        (yield* call(remote, "ex_collect-user-info", { infoType: "age" })).error,
        "ex_collect-user-info: invalid input: infoType: Expected \"contact\" | \"preferences\" | \"feedback\", actual \"age\""
      )
      // Its schema does not refuse other keys: ajv lets them through, and the server answers.
      assert.strictEqual((yield* call(remote, "ex_greet", { name: "Bo", mood: "happy" })).value, "Hello, Bo!")
    }).pipe(Effect.scoped), 30_000)

  it.live("a server that dies mid-call gives a failure; the next call opens a new session and succeeds", () =>
    Effect.gen(function*() {
      const port = yield* freePort()
      const first = yield* Scope.make()
      yield* Scope.extend(sdkExampleServer(port), first)
      const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp` })
      // multi-greet answers after 2 s: the server is killed before.
      const running = yield* Effect.fork(call(remote, "multi-greet", { name: "Ada" }))
      yield* Effect.sleep("300 millis")
      yield* Scope.close(first, Exit.void)
      const died = yield* running.await.pipe(Effect.flatten)
      assert.strictEqual(died.failure?._tag, "HandlerFailed")
      assert.match(died.error!, /^McpClientError: the connection to the MCP server at .* failed during the call/)
      yield* sdkExampleServer(port)
      assert.strictEqual((yield* call(remote, "greet", { name: "Ada" })).value, "Hello, Ada!")
    }).pipe(Effect.scoped), 30_000)
})

