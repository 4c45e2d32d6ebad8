// @effect-diagnostics globalErrorInEffectFailure:off
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import {
  CallToolResultSchema,
  ListToolsResultSchema,
  McpError,
  SUPPORTED_PROTOCOL_VERSIONS
} from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Schema } from "effect"
import { fileURLToPath } from "node:url"
import { mcpClient, mcpServer, mcpSession } from "./support/mcpHttp.js"
import { mcpStdioClient } from "./support/mcpStreams.js"
import { Tool, Toolkit } from "../src/index.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: { order_id: Schema.String, include_history: Schema.optionalWith(Schema.Boolean, { default: () => false }) },
  output: Schema.Struct({ id: Schema.String, total: Schema.Number.pipe(Schema.between(0, 1e6)) }),
  timeout: "5 seconds"
}, ({ order_id }) =>
  order_id === "ord-4821"
    ? Effect.succeed({ id: order_id, total: 42 })
    : Effect.fail(new NotFound({ message: `no order with id=${order_id}` })))

const listOrders = Tool.make("list_orders", {
  description: "List order ids.",
  input: {},
  output: Schema.Array(Schema.String),
  timeout: "5 seconds"
}, () => Effect.succeed(["ord-1", "ord-2"]))

const crash = Tool.make("crash", { description: "Dies.", input: {}, timeout: "5 seconds" }, () =>
  Effect.die(new Error("internal invariant broken at /srv/app/secret.ts:12")))

const finalized = { count: 0 }
const started = Effect.runSync(Deferred.make<void>())
const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "60 seconds" }, () =>
  Deferred.succeed(started, undefined).pipe(
    Effect.zipRight(Effect.never),
    Effect.ensuring(Effect.sync(() => finalized.count++))
  ))

const toolkit = Effect.runSync(Toolkit.make(lookupOrder, listOrders, crash, slow))

/** An official MCP client on the toolkit over Streamable HTTP on 127.0.0.1. */
const httpClient = mcpClient(toolkit)

describe("Mcp over Streamable HTTP, with the official client", () => {
  it.live("initialize negotiates a supported version with the tools capability", () =>
    Effect.gen(function*() {
      const { client, transport } = yield* httpClient
      assert.include(SUPPORTED_PROTOCOL_VERSIONS, transport.protocolVersion)
      assert.isDefined(client.getServerCapabilities()?.tools)
      assert.strictEqual(client.getServerVersion()?.name, "agent-tools")
    }).pipe(Effect.scoped))

  it.live("tools/list parses under the SDK's schema; inputSchema is the parameters; outputSchema the output Schema's", () =>
    Effect.gen(function*() {
      const { client } = yield* httpClient
      const raw = yield* Effect.promise(() => client.request({ method: "tools/list" }, ListToolsResultSchema))
      assert.deepStrictEqual(raw.tools.map((t) => t.name), ["lookup_order", "list_orders", "crash", "slow"])
      for (const listed of raw.tools) {
        const tool = toolkit.byName.get(listed.name)!
        assert.deepStrictEqual(listed.inputSchema, Tool.jsonSchema(tool).parameters as unknown)
        assert.strictEqual(listed.inputSchema.type, "object")
      }
      // crash and slow have no output Schema: any value, and no schema said of it.
      assert.deepStrictEqual(raw.tools.map((t) => t.outputSchema?.type), ["object", "object", undefined, undefined])
      assert.deepStrictEqual(raw.tools[1]!.outputSchema, {
        type: "object",
        properties: { result: { type: "array", items: { type: "string" } } },
        required: ["result"]
      })
    }).pipe(Effect.scoped))

  it.live("a valid call: structuredContent is the encoded output, with a text block of the same JSON", () =>
    Effect.gen(function*() {
      const { client } = yield* httpClient
      const result = yield* Effect.promise(() => client.callTool({ name: "lookup_order", arguments: { order_id: "ord-4821" } }))
      assert.notStrictEqual(result.isError, true)
      assert.deepStrictEqual(result.structuredContent, { id: "ord-4821", total: 42 })
      assert.deepStrictEqual(result.content, [{ type: "text", text: "{\"id\":\"ord-4821\",\"total\":42}" }])
      // An array comes back wrapped, and passes the client's output-schema validation.
      const list = yield* Effect.promise(() => client.callTool({ name: "list_orders", arguments: {} }))
      assert.deepStrictEqual(list.structuredContent, { result: ["ord-1", "ord-2"] })
    }).pipe(Effect.scoped))

  it.live("invalid input, a domain failure and a defect are isError results with the error text; ping still works", () =>
    Effect.gen(function*() {
      const { client } = yield* httpClient
      const call = (name: string, args: Record<string, unknown>) =>
        Effect.promise(() => client.request({ method: "tools/call", params: { name, arguments: args } }, CallToolResultSchema))
      const invalid = yield* call("lookup_order", { order_id: 7, extra: true })
      assert.isTrue(invalid.isError)
      assert.deepStrictEqual(invalid.content, [{
        type: "text",
        text: "lookup_order: invalid input: extra: is unexpected, expected: \"order_id\" | \"include_history\"; " +
          "order_id: Expected string, actual 7"
      }])
      const failed = yield* call("lookup_order", { order_id: "ord-1" })
      assert.isTrue(failed.isError)
      assert.deepStrictEqual(failed.content, [{ type: "text", text: "NotFound: no order with id=ord-1" }])
      const died = yield* call("crash", {})
      assert.isTrue(died.isError)
      const text = (died.content[0] as { text: string }).text
      assert.strictEqual(text, "Error: internal invariant broken at /srv/app/secret.ts:12")
      assert.notInclude(JSON.stringify(died), "    at ")
      yield* Effect.promise(() => client.ping())
    }).pipe(Effect.scoped))

  it.live("an unknown tool is a protocol error with code -32602", () =>
    Effect.gen(function*() {
      const { client } = yield* httpClient
      const error = yield* Effect.flip(Effect.tryPromise(() => client.callTool({ name: "nope", arguments: {} })))
      const cause = error.cause
      assert.instanceOf(cause, McpError)
      assert.strictEqual((cause as McpError).code, -32602)
      // The prefix once: the server sends the bare message, the client's McpError says "MCP error <code>: ".
      assert.strictEqual(
        (cause as McpError).message,
        "MCP error -32602: nope: no such tool; the available tools are lookup_order, list_orders, crash, slow"
      )
    }).pipe(Effect.scoped))

  it.live("a request with a foreign Host or Origin header gets a 4xx", () =>
    Effect.gen(function*() {
      const { port } = yield* httpClient
      // An initialize request: what a new client sends first.
      const initialize = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: SUPPORTED_PROTOCOL_VERSIONS[0], capabilities: {}, clientInfo: { name: "raw", version: "1" } }
      }
      const post = (headers: Record<string, string>) =>
        Effect.promise(() =>
          new Promise<number>((resolve, reject) => {
            import("node:http").then(({ request }) => {
              const req = request({
                host: "127.0.0.1",
                port,
                path: "/mcp",
                method: "POST",
                headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }
              }, (res) => {
                res.resume()
                resolve(res.statusCode ?? 0)
              })
              req.on("error", reject)
              req.end(JSON.stringify(initialize))
            })
          })
        )
      const foreignHost = yield* post({ host: "evil.example:80" })
      const foreignOrigin = yield* post({ host: `127.0.0.1:${port}`, origin: "http://evil.example" })
      const local = yield* post({ host: `localhost:${port}`, origin: `http://localhost:${port}` })
      assert.isTrue(foreignHost >= 400 && foreignHost < 500, `Host: ${foreignHost}`)
      assert.isTrue(foreignOrigin >= 400 && foreignOrigin < 500, `Origin: ${foreignOrigin}`)
      assert.isBelow(local, 400)
    }).pipe(Effect.scoped))

  it.live("cancelling a slow call interrupts the handler: its finalizer runs", () =>
    Effect.gen(function*() {
      const { client } = yield* httpClient
      const before = finalized.count
      const abort = new AbortController()
      const pending = client.callTool({ name: "slow", arguments: {} }, undefined, { signal: abort.signal }).catch(() => "cancelled")
      yield* Deferred.await(started)
      abort.abort("the user gave up")
      assert.strictEqual(yield* Effect.promise(() => pending), "cancelled")
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => finalized.count > before }).pipe(Effect.timeout("5 seconds"))
      assert.strictEqual(finalized.count, before + 1)
    }).pipe(Effect.scoped))
})

/** No output Schema: what it returns is any JSON value. */
const anyValue = Tool.make("any_value", {
  description: "Returns the value it is given.",
  input: { value: Schema.Unknown },
  timeout: "5 seconds"
}, ({ value }) => Effect.succeed(value))

describe("Mcp: a tool without an output Schema, with the official client", () => {
  it.live("is listed without an outputSchema; an object goes out as it is, anything else as { result }", () =>
    Effect.gen(function*() {
      const { client } = yield* mcpClient(yield* Toolkit.make(anyValue))
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((t) => [t.name, t.outputSchema]), [["any_value", undefined]])
      const call = (value: unknown) =>
        Effect.promise(() => client.callTool({ name: "any_value", arguments: { value } }))
      const object = yield* call({ id: "ord-1", total: 42 })
      assert.deepStrictEqual(object.structuredContent, { id: "ord-1", total: 42 })
      assert.deepStrictEqual(object.content, [{ type: "text", text: "{\"id\":\"ord-1\",\"total\":42}" }])
      // An object with a `result` key is an object too: no wrapping to tell apart.
      assert.deepStrictEqual((yield* call({ result: 1 })).structuredContent, { result: 1 })
      assert.deepStrictEqual((yield* call(["a", "b"])).structuredContent, { result: ["a", "b"] })
      assert.deepStrictEqual((yield* call("text")).structuredContent, { result: "text" })
      assert.deepStrictEqual((yield* call(null)).structuredContent, { result: null })
    }).pipe(Effect.scoped))
})

describe("Mcp: input errors", () => {
  it.live("an enum given another value is one issue naming every member", () =>
    Effect.gen(function*() {
      const pick = Tool.make("pick", {
        description: "Pick a kind.",
        input: { kind: Schema.Literal("a", "b") },
        timeout: "5 seconds"
      }, ({ kind }) => Effect.succeed(kind))
      const { client } = yield* mcpClient(yield* Toolkit.make(pick))
      const result = yield* Effect.promise(() => client.callTool({ name: "pick", arguments: { kind: "c" } }))
      assert.isTrue(result.isError)
      assert.deepStrictEqual(result.content, [{
        type: "text",
        text: "pick: invalid input: kind: Expected one of \"a\", \"b\", actual \"c\""
      }])
    }).pipe(Effect.scoped))
})

describe("Mcp: an idempotent tool's outcomes within a session", () => {
  it.live("are reused by the session's later calls with the same input; another session or input runs again", () =>
    Effect.gen(function*() {
      const runs = { quote: 0, draw: 0 }
      const quote = Tool.make("quote", {
        description: "Quote a price.",
        input: { sku: Schema.String },
        output: Schema.Struct({ sku: Schema.String, run: Schema.Number }),
        idempotent: true,
        timeout: "5 seconds"
      }, ({ sku }) => Effect.sync(() => ({ sku, run: ++runs.quote })))
      const draw = Tool.make("draw", { description: "Draw a number.", input: {}, timeout: "5 seconds" }, () =>
        Effect.sync(() => ++runs.draw))
      const { client, port } = yield* mcpClient(yield* Toolkit.make(quote, draw))
      const call = (c: typeof client, name: string, args: Record<string, unknown>) =>
        Effect.promise(() => c.callTool({ name, arguments: args })).pipe(Effect.map((r) => r.structuredContent))
      assert.deepStrictEqual(yield* call(client, "quote", { sku: "a" }), { sku: "a", run: 1 })
      assert.deepStrictEqual(yield* call(client, "quote", { sku: "a" }), { sku: "a", run: 1 })
      assert.deepStrictEqual(yield* call(client, "quote", { sku: "b" }), { sku: "b", run: 2 })
      const other = yield* mcpSession(port)
      assert.deepStrictEqual(yield* call(other, "quote", { sku: "a" }), { sku: "a", run: 3 })
      assert.deepStrictEqual(yield* call(client, "draw", {}), { result: 1 })
      assert.deepStrictEqual(yield* call(client, "draw", {}), { result: 2 })
      assert.deepStrictEqual(runs, { quote: 3, draw: 2 })
    }).pipe(Effect.scoped))

  it.live("past maxReusedBytes an outcome is not kept: the calls run again", () =>
    Effect.gen(function*() {
      let runs = 0
      const quote = Tool.make("quote", { description: "Quote.", input: { sku: Schema.String }, idempotent: true, timeout: "5 seconds" },
        () => Effect.sync(() => ++runs))
      const { client } = yield* mcpStdioClient(yield* Toolkit.make(quote), { maxReusedBytes: 12 })
      const call = (sku: string) =>
        Effect.promise(() => client.callTool({ name: "quote", arguments: { sku } })).pipe(Effect.map((r) => r.structuredContent))
      // "quote\n{"sku":"a"}" and "1" are 15 bytes: over 12.
      assert.deepStrictEqual([yield* call("a"), yield* call("a")], [{ result: 1 }, { result: 2 }])
      assert.strictEqual(runs, 2)
    }).pipe(Effect.scoped))
})

describe("Mcp over Streamable HTTP: an HTTP request that closes early", () => {
  it.live("interrupts its call: the handler's finalizer runs", () =>
    Effect.gen(function*() {
      const held = { started: 0, finalized: 0 }
      const hold = Tool.make("hold", { description: "Holds.", input: {}, timeout: "60 seconds" }, () =>
        Effect.sync(() => held.started++).pipe(
          Effect.zipRight(Effect.never),
          Effect.ensuring(Effect.sync(() => held.finalized++))
        ))
      const port = yield* mcpServer(yield* Toolkit.make(hold))
      const { request } = yield* Effect.promise(() => import("node:http"))
      const post = (body: unknown, headers: Record<string, string> = {}) => {
        const req = request({
          host: "127.0.0.1",
          port,
          path: "/mcp",
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }
        })
        const response = new Promise<{ status: number; session: string | undefined }>((resolve, reject) => {
          req.on("response", (res) => {
            res.resume()
            resolve({ status: res.statusCode ?? 0, session: res.headers["mcp-session-id"] as string | undefined })
          })
          req.on("error", reject)
        })
        req.end(JSON.stringify(body))
        return { req, response }
      }
      const init = yield* Effect.promise(() =>
        post({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: SUPPORTED_PROTOCOL_VERSIONS[0], capabilities: {}, clientInfo: { name: "raw", version: "1" } }
        }).response
      )
      const session = { "mcp-session-id": init.session! }
      yield* Effect.promise(() => post({ jsonrpc: "2.0", method: "notifications/initialized" }, session).response)
      const call = post({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "hold", arguments: {} } }, session)
      call.response.catch(() => undefined)
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => held.started === 1 }).pipe(Effect.timeout("5 seconds"))
      call.req.destroy()
      yield* Effect.repeat(Effect.sleep("10 millis"), { until: () => held.finalized === 1 }).pipe(Effect.timeout("5 seconds"))
      assert.deepStrictEqual(held, { started: 1, finalized: 1 })
    }).pipe(Effect.scoped))
})

describe("Mcp over stdio, with the official client spawning tsx src/main.ts mcp", () => {
  it.live("initialize, tools/list and a call", () =>
    Effect.gen(function*() {
      const client = new Client({ name: "test", version: "1.0.0" })
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: ["--import", "tsx", "src/main.ts", "mcp"],
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        stderr: "pipe"
      })
      // The client hands the negotiated version to a transport that asks for it.
      let negotiated: string | undefined
      ;(transport as { setProtocolVersion?: (version: string) => void }).setProtocolVersion = (version) => {
        negotiated = version
      }
      yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
      assert.include(SUPPORTED_PROTOCOL_VERSIONS, negotiated)
      assert.isDefined(client.getServerCapabilities()?.tools)
      const { tools } = yield* Effect.promise(() => client.listTools())
      assert.deepStrictEqual(tools.map((t) => t.name), [
        "lookup_order",
        "lookup_customer",
        "issue_refund",
        "close_security_gate",
        "get_today_date",
        "estimate_delivery",
        "digest_report"
      ])
      for (const tool of tools) assert.strictEqual(tool.inputSchema.type, "object")
      const customer = yield* Effect.promise(() => client.callTool({ name: "lookup_customer", arguments: { customer_id: "cus-1207" } }))
      assert.deepStrictEqual(customer.structuredContent, { id: "cus-1207", name: "Ada Moreau", tier: "gold" })
      const missing = yield* Effect.promise(() => client.callTool({ name: "lookup_order", arguments: { order_id: "ord-0" } }))
      assert.isTrue(missing.isError)
      assert.deepStrictEqual(missing.content, [{ type: "text", text: "NotFound: no order with id=ord-0" }])
      // The refund needs approval: this client cannot ask its user (no elicitation), so it is refused unrun.
      const refund = yield* Effect.promise(() =>
        client.callTool({ name: "issue_refund", arguments: { order_id: "ord-4821", amount: 59.9 } }))
      assert.isTrue(refund.isError)
      assert.deepStrictEqual(refund.content, [{ type: "text", text: "issue_refund: needs approval, and no user is available to give it" }])
    }).pipe(Effect.scoped), 30_000)
})
