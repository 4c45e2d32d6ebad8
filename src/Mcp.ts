/**
 * Any toolkit over the Model Context Protocol (S16), on the official SDK's low-level `Server` (raw
 * JSON Schema, no zod of ours): stdio, and Streamable HTTP bound to 127.0.0.1 with Host/Origin
 * checks. `tools/call` goes through `Invocation`; every failure is a result with `isError: true`
 * and the S5 text; a cancelled request interrupts the call.
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type Tool as McpTool
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Exit, Layer, Runtime } from "effect"
import { createServer } from "node:http"
import { Ids } from "./Ids.js"
import * as Invocation from "./Invocation.js"
import * as Tool from "./Tool.js"
import type { ToolContext } from "./ToolContext.js"
import type * as Toolkit from "./Toolkit.js"

/** How the server introduces itself. */
export interface Options {
  /** Default `agent-tools`. */
  readonly name?: string | undefined
  readonly version?: string | undefined
}

interface Listed {
  readonly entry: McpTool
  /** Arrays and primitives go out as `{ result: ... }`, and the output schema says so. */
  readonly wrapped: boolean
}

// `$id`s that Effect puts on `unknown` and the like would clash inside one schema for a validator.
const withoutIds = (schema: unknown): unknown => {
  if (Array.isArray(schema)) return schema.map(withoutIds)
  if (typeof schema !== "object" || schema === null) return schema
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) if (key !== "$id") out[key] = withoutIds(value)
  return out
}

const isObjectSchema = (schema: Tool.JsonSchema): boolean =>
  "type" in schema && schema.type === "object" && !("anyOf" in schema)

/** What `tools/list` says of a tool: S2's parameters as `inputSchema`, and an object `outputSchema`. */
export const describe = (tool: Tool.Any): Listed => {
  const output = Tool.outputJsonSchema(tool)
  const wrapped = !isObjectSchema(output)
  const { $defs, ...rest } = output as Tool.JsonSchema & { $defs?: unknown }
  const outputSchema = wrapped
    ? {
      type: "object" as const,
      properties: { result: withoutIds(rest) as object },
      required: ["result"],
      ...($defs === undefined ? {} : { $defs: withoutIds($defs) as object })
    }
    : withoutIds(output) as McpTool["outputSchema"] & object
  return {
    wrapped,
    entry: {
      name: tool.name,
      description: tool.description,
      inputSchema: Tool.jsonSchema(tool).parameters as McpTool["inputSchema"],
      outputSchema
    }
  }
}

/** A call's result in MCP's words. */
const toCallResult = (result: Invocation.ToolResult, wrapped: boolean): CallToolResult => {
  if (result.error !== undefined) return { content: [{ type: "text", text: result.error }], isError: true }
  const structured = (wrapped ? { result: result.value } : result.value) as Record<string, unknown>
  return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured }
}

/** A low-level MCP `Server` for the toolkit, running calls on `runtime`. */
const makeServer = (toolkit: Toolkit.Toolkit<any>, listed: ReadonlyArray<Listed>, runtime: Runtime.Runtime<any>, options?: Options) => {
  const server = new Server(
    { name: options?.name ?? "agent-tools", version: options?.version ?? "0.1.0" },
    { capabilities: { tools: {} } }
  )
  const wrappedByName = new Map(listed.map((l) => [l.entry.name, l.wrapped]))
  const tools = listed.map((l) => l.entry)
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = toolkit.byName.get(request.params.name)
    if (tool === undefined) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `unknown tool ${JSON.stringify(request.params.name)}; the available tools are ${tools.map((t) => t.name).join(", ")}`
      )
    }
    const exit = await Runtime.runPromiseExit(runtime)(
      Invocation.run(tool, request.params.arguments ?? {}, { toolCallId: `mcp-${String(extra.requestId)}` }),
      { signal: extra.signal }
    )
    // Only a cancelled request ends without a result; the SDK sends nothing for it.
    if (Exit.isFailure(exit)) throw new McpError(ErrorCode.RequestTimeout, "the request was cancelled")
    return toCallResult(exit.value, wrappedByName.get(tool.name) ?? true)
  })
  return server
}

/** The toolkit's `tools/list`, computed once. */
const listOf = (toolkit: Toolkit.Toolkit<any>) => toolkit.tools.map(describe)

/**
 * Serves the toolkit over stdio until interrupted. Only protocol messages go to stdout: send logs
 * to stderr (main.ts does).
 */
export const serveStdio = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options?: Options
): Effect.Effect<never, never, Exclude<R, ToolContext>> =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Exclude<R, ToolContext>>()
    const server = makeServer(toolkit, listOf(toolkit), runtime, options)
    yield* Effect.acquireRelease(
      Effect.promise(() => server.connect(new StdioServerTransport())),
      () => Effect.promise(() => server.close())
    )
    return yield* Effect.never
  }))

/** Where the HTTP transport listens. */
export interface HttpOptions extends Options {
  /** Default 127.0.0.1: only this machine. */
  readonly host?: string | undefined
  /** 0 picks a free port. */
  readonly port: number
  /** Default `/mcp`. */
  readonly path?: HttpLayerRouter.PathInput | undefined
}

/** The ids of the JSON-RPC requests in a body (one message or a batch). */
const requestIds = (body: unknown): Array<string | number> =>
  (Array.isArray(body) ? body : [body]).flatMap((message) => {
    const id = typeof message === "object" && message !== null && "method" in message ? (message as { id?: unknown }).id : undefined
    return typeof id === "string" || typeof id === "number" ? [id] : []
  })

const loopbackHosts = new Set(["127.0.0.1", "localhost", "[::1]", "::1"])

/** The hostname of a Host header or Origin URL, lowercased, or undefined if it has none. */
const hostnameOf = (value: string): string | undefined => {
  try {
    return new URL(value.includes("://") ? value : `http://${value}`).hostname.toLowerCase()
  } catch {
    return undefined
  }
}

/**
 * DNS-rebinding protection: a page on another site must not reach a server on this machine. The
 * Host must name this machine (or the configured host); an Origin, when sent, too.
 */
const foreignRequest = (request: HttpServerRequest.HttpServerRequest, host: string): string | undefined => {
  const allowed = (hostname: string | undefined) =>
    hostname !== undefined && (loopbackHosts.has(hostname) || hostname === host.toLowerCase())
  const hostHeader = request.headers.host
  if (hostHeader === undefined || !allowed(hostnameOf(hostHeader))) return "the Host header does not name this server"
  const origin = request.headers.origin
  if (origin !== undefined && !allowed(hostnameOf(origin))) return "the Origin is not allowed"
  return undefined
}

/**
 * Serves the toolkit over Streamable HTTP at `http://host:port/mcp`, with sessions (so that a
 * `notifications/cancelled` reaches the server running the call, and interrupts it) and JSON
 * responses. Host and Origin must name this machine.
 */
export const layerHttp = <R>(toolkit: Toolkit.Toolkit<R>, options: HttpOptions) => {
  const host = options.host ?? "127.0.0.1"
  const listed = listOf(toolkit)
  const sessions = new Map<string, { readonly server: Server; readonly transport: WebStandardStreamableHTTPServerTransport }>()
  const route = HttpLayerRouter.add("*", options.path ?? "/mcp", (request) =>
    Effect.gen(function*() {
      const refused = foreignRequest(request, host)
      if (refused !== undefined) return HttpServerResponse.text(refused, { status: 403 })
      // The body is read once, here, and handed to the transport parsed: the web Request has none.
      let parsedBody: unknown = undefined
      if (request.method === "POST") {
        const parsed = yield* Effect.either(Effect.flatMap(request.text, (text) => Effect.try(() => JSON.parse(text) as unknown)))
        if (parsed._tag === "Left") {
          return HttpServerResponse.unsafeJson(
            { jsonrpc: "2.0", error: { code: -32700, message: "Parse error: the body is not JSON" }, id: null },
            { status: 400 }
          )
        }
        parsedBody = parsed.right
      }
      const url = HttpServerRequest.toURL(request)
      const web = new Request(url._tag === "Some" ? url.value : "http://127.0.0.1/mcp", {
        method: request.method,
        headers: request.headers
      })
      const sessionId = request.headers["mcp-session-id"]
      const known = sessionId === undefined ? undefined : sessions.get(sessionId)
      if (sessionId !== undefined && known === undefined) {
        return HttpServerResponse.text("unknown or closed MCP session", { status: 404 })
      }
      if (known !== undefined) {
        const transport = known.transport
        return yield* Effect.promise(() => transport.handleRequest(web, { parsedBody })).pipe(
          Effect.map(HttpServerResponse.fromWeb),
          // The HTTP request closed before its answer: cancel its calls, as notifications/cancelled would.
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              for (const requestId of requestIds(parsedBody)) {
                transport.onmessage?.({
                  jsonrpc: "2.0",
                  method: "notifications/cancelled",
                  params: { requestId, reason: "the HTTP request closed" }
                })
              }
            })
          )
        )
      }
      // A new session: its first request must be `initialize` (the transport answers 400 otherwise).
      const runtime = yield* Effect.runtime<Exclude<R, ToolContext>>()
      const ids = yield* Ids
      const server = makeServer(toolkit, listed, runtime, options)
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => ids.make("session"),
        enableJsonResponse: true,
        onsessioninitialized: (id) => void sessions.set(id, { server, transport }),
        onsessionclosed: (id) => void sessions.delete(id)
      })
      yield* Effect.promise(() => server.connect(transport))
      const response = yield* Effect.promise(() => transport.handleRequest(web, { parsedBody }))
      if (transport.sessionId === undefined) yield* Effect.promise(() => server.close())
      return HttpServerResponse.fromWeb(response)
    }))
  const closeSessions = Layer.scopedDiscard(Effect.addFinalizer(() =>
    Effect.promise(() => Promise.all([...sessions.values()].map(({ server }) => server.close())))
  ))
  return HttpLayerRouter.serve(route, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host })),
    Layer.merge(closeSessions)
  )
}
