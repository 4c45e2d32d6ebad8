/**
 * Tools of a remote MCP server as tools of ours (design: Remote MCP tools): `Mcp.toolkit` connects
 * with the official SDK's `Client`, over stdio (a child process) or Streamable HTTP, as a scoped
 * resource, lists the server's tools and makes each a `Tool` whose JSON Schema is the server's
 * `inputSchema`, verbatim. Every call goes through `Invocation` like a local tool's: the arguments
 * are checked against that schema (ajv) before anything is sent, the deadline aborts the request
 * (the SDK sends `notifications/cancelled`), and retries and idempotency are opted in per tool.
 *
 * This module holds the API; the work is `internal/mcp/client.ts`, loaded on the first `toolkit`, so
 * that serving MCP (`Mcp`, which re-exports this module) does not load the SDK's client.
 */
import { Effect, type Scope } from "effect"
import type { McpClientError, RemoteToolkit, ToolkitOptions } from "./internal/mcp/types.js"

export {
  McpClientError,
  McpToolError,
  type RemoteHttp,
  type RemoteStdio,
  type RemoteTool,
  type RemoteToolkit,
  type RemoteToolOptions,
  toolkitDefaults,
  type ToolkitOptions
} from "./internal/mcp/types.js"

/**
 * Connects to an MCP server and gives its tools as ours (design: Remote MCP tools), until the scope
 * closes: then the connection closes, and a stdio child ends (stdin closed, then SIGTERM, then
 * SIGKILL, as the SDK does). Fails with `McpClientError` when the first connection or listing
 * fails. A connection that breaks later is made again by the next call (a new child, a new session).
 */
export const toolkit: (options: ToolkitOptions) => Effect.Effect<RemoteToolkit, McpClientError, Scope.Scope> = Effect
  .fn("Mcp.toolkit")(function*(options: ToolkitOptions) {
    const { connect } = yield* Effect.promise(() => import("./internal/mcp/client.js"))
    return yield* connect(options)
  })
