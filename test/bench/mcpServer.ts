/**
 * The MCP benches' server (test/bench/mcp.ts, test/bench/mcpHttp.ts): the `add` tool over stdio,
 * `--server=ours` (a Toolkit of `Tool.make` served by `Mcp.serveStdio`, as `src/main.ts mcp` runs it:
 * tracing on, logs on stderr), `--server=untraced` (the same with tracing disabled) or `--server=sdk`
 * (the SDK's `McpServer` with zod, the same input and output schemas). Over Streamable HTTP on
 * 127.0.0.1, a free port written to stdout as `listening <port>`: `--server=ours-http` (`Mcp.layerHttp`
 * with a bearer token map (`--token=`) and every default limit, as `src/main.ts mcp --http` runs it
 * with `MCP_TOKENS`) or `--server=sdk-http` (the SDK's `McpServer`, a session each, on the SDK's own
 * Express app, `createMcpExpressApp`, with its Host check, and its Node transport answering JSON as ours does).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as HttpServer from "@effect/platform/HttpServer"
import { createMcpExpressApp } from "@modelcontextprotocol/sdk/server/express.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect, Layer, Logger, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { IncomingMessage, ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { z } from "zod"
import { Tool, Toolkit } from "../../src/index.js"
import { Mcp } from "../../src/exports/mcp.js"

const server = process.argv.find((arg) => arg.startsWith("--server="))?.slice("--server=".length)

/** Adds two numbers: the bench's tool, written with `Tool.make`. */
const add = Tool.make("add", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))

/** The bearer token ours over HTTP takes (`--token=`; the bench's client sends it to both servers). */
const httpToken = process.argv.find((arg) => arg.startsWith("--token="))?.slice("--token=".length) ?? "bench-token"

const logger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

/** The SDK's `McpServer` with the bench's tool. */
const sdkServer = () => {
  const sdk = new McpServer({ name: "sdk-bench", version: "0.1.0" })
  // The same answer as ours: a number goes out as `{ result }`, as text and as structured content.
  sdk.registerTool("add", {
    description: "Add two numbers.",
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { result: z.number() }
  }, ({ a, b }) => {
    const structured = { result: a + b }
    return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured }
  })
  return sdk
}

/** What the bench reads of Express's request and response (its types are not installed). */
interface ExpressRequest extends IncomingMessage {
  readonly body?: unknown
}
interface ExpressResponse extends ServerResponse {
  status(code: number): { json(body: unknown): void; send(body: string): void }
}

/** The SDK's documented Streamable HTTP server: a transport and a server a session, on its Express app. */
const serveSdkHttp = () => {
  const app = createMcpExpressApp()
  const transports = new Map<string, StreamableHTTPServerTransport>()
  app.post("/mcp", async (req: ExpressRequest, res: ExpressResponse) => {
    const id = req.headers["mcp-session-id"]
    const known = typeof id === "string" ? transports.get(id) : undefined
    if (known !== undefined) return known.handleRequest(req, res, req.body)
    if (id !== undefined || !isInitializeRequest(req.body)) {
      res.status(400).json({ jsonrpc: "2.0", error: { code: -32000, message: "no valid session" }, id: null })
      return
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (sessionId) => void transports.set(sessionId, transport)
    })
    transport.onclose = () => {
      if (transport.sessionId !== undefined) transports.delete(transport.sessionId)
    }
    await sdkServer().connect(transport)
    await transport.handleRequest(req, res, req.body)
  })
  const inSession = async (req: ExpressRequest, res: ExpressResponse) => {
    const id = req.headers["mcp-session-id"]
    const known = typeof id === "string" ? transports.get(id) : undefined
    if (known === undefined) res.status(400).send("no valid session")
    else await known.handleRequest(req, res)
  }
  app.get("/mcp", inSession)
  app.delete("/mcp", inSession)
  process.once("SIGTERM", () => process.exit(0))
  const listening = app.listen(0, "127.0.0.1", () => {
    process.stdout.write(`listening ${(listening.address() as AddressInfo).port}\n`)
  })
}

/** Ours over Streamable HTTP, as `agent-tools mcp --http` serves it with `MCP_TOKENS`: every limit at its default. */
const serveOursHttp = () => {
  const served = Effect.flatMap(Toolkit.make(add), (toolkit) =>
    Layer.launch(Mcp.layerHttp(toolkit, { port: 0, tokens: new Map([[httpToken, "bench"]]) }).pipe(
      Layer.tap((context) =>
        Effect.sync(() => {
          const address = Context.get(context, HttpServer.HttpServer).address
          process.stdout.write(`listening ${address._tag === "TcpAddress" ? address.port : 0}\n`)
        })
      )
    )))
  NodeRuntime.runMain(served.pipe(Effect.provide(logger)))
}

if (server === "ours-http") {
  serveOursHttp()
} else if (server === "sdk-http") {
  serveSdkHttp()
} else if (server === "ours" || server === "untraced") {
  Effect.runPromise(Effect.flatMap(Toolkit.make(add), (toolkit) => Mcp.serveStdio(toolkit)).pipe(
    Effect.provide(logger),
    Effect.withTracerEnabled(server === "ours")
  )).then(() => process.exit(0), () => process.exit(1))
} else if (server === "sdk") {
  process.stdin.once("end", () => process.exit(0))
  void sdkServer().connect(new StdioServerTransport())
} else {
  process.stderr.write("usage: mcpServer.ts --server=ours|untraced|sdk|ours-http|sdk-http\n")
  process.exit(2)
}
