/** An MCP server for a toolkit over Streamable HTTP on 127.0.0.1, and the official client connected to it. */
import { HttpServer } from "@effect/platform"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Layer, Schema } from "effect"
import { Tool, Toolkit } from "../../src/index.js"
import { Mcp } from "../../src/exports/mcp.js"

/** The HTTP suites' one tool, `echo`, and its toolkit. */
export const echo = Tool.make("echo", {
  description: "Echo the text.",
  input: { text: Schema.String },
  output: Schema.String,
  timeout: "5 seconds"
}, ({ text }) => Effect.succeed(text))
export const echoToolkit = Effect.runSync(Toolkit.make(echo))

/** The server (the tools' services come from `services`, its limits from `options`); its port. */
export const mcpServer = <A = never>(
  toolkit: Toolkit.Toolkit<any>,
  services?: Layer.Layer<A>,
  options?: Partial<Mcp.HttpOptions>
) =>
  Effect.gen(function*() {
    // The caller provides, in `services`, what the toolkit's handlers need.
    const served = Mcp.layerHttp(toolkit as Toolkit.Toolkit<never>, { ...options, port: 0 })
    const context = yield* Layer.build(Layer.provide(served, services ?? Layer.empty))
    const address = (yield* Effect.provide(HttpServer.HttpServer, context)).address
    return address._tag === "TcpAddress" ? address.port : 0
  })

/** A client connected to the server on `port`: a session of its own, closed with the scope. */
export const mcpSession = (port: number) =>
  Effect.map(connect(`http://127.0.0.1:${port}/mcp`), ({ client }) => client)

/**
 * The official client connecting to the server on `port` with `headers` on every request (an
 * `authorization`, say): its session, closed with the scope, or the error it failed with.
 */
export const mcpSessionWith = (port: number, headers: Record<string, string>) =>
  Effect.map(tryConnect(`http://127.0.0.1:${port}/mcp`, headers), ({ client }) => client)

const tryConnect = (url: string, headers?: Record<string, string>) =>
  Effect.gen(function*() {
    const client = new Client({ name: "test", version: "1.0.0" })
    const transport = new StreamableHTTPClientTransport(new URL(url), headers === undefined ? {} : { requestInit: { headers } })
    yield* Effect.acquireRelease(
      Effect.tryPromise(() => client.connect(transport)),
      () => Effect.promise(() => client.close())
    )
    return { client, transport }
  })

const connect = (url: string) => Effect.orDie(tryConnect(url))

/** The server and a connected client, both closed with the scope. */
export const mcpClient = <A = never>(toolkit: Toolkit.Toolkit<any>, services?: Layer.Layer<A>) =>
  Effect.gen(function*() {
    const port = yield* mcpServer(toolkit, services)
    const url = `http://127.0.0.1:${port}/mcp`
    const { client, transport } = yield* connect(url)
    return { client, transport, url, port }
  })

/** A raw JSON-RPC `initialize` request, for tests that speak to the server without the client. */
export const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: {
    protocolVersion: SUPPORTED_PROTOCOL_VERSIONS[0],
    capabilities: {},
    clientInfo: { name: "raw", version: "1" }
  }
}
