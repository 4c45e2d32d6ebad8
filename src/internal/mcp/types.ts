/**
 * What `Mcp.toolkit` takes and gives (design: Remote MCP tools): its options, the remote toolkit, its errors.
 * `McpClient` re-exports them; the client's work (`client.ts`) reads them here, so neither imports the other both ways.
 */
import { type Duration, type Effect, Schema, type Stream } from "effect"
import type * as Tool from "../../Tool.js"
import type * as Toolkit from "../../Toolkit.js"

/** A server spawned as a child process, spoken to over its stdin and stdout. */
export interface RemoteStdio {
  readonly command: string
  readonly args?: ReadonlyArray<string> | undefined
  /** Added to the SDK's short list of safe variables (HOME, PATH, USER...): the child does not get all of ours. */
  readonly env?: Record<string, string> | undefined
  readonly cwd?: string | undefined
  /** The child's stderr: ours (default) or nowhere. */
  readonly stderr?: "inherit" | "ignore" | undefined
}

/** A server over Streamable HTTP. */
export interface RemoteHttp {
  readonly url: string | URL
  /** Sent with every request (an `authorization` header, say). */
  readonly headers?: Record<string, string> | undefined
}

/** What a remote tool may have of the options `Tool.make` gives a local one. */
export interface RemoteToolOptions {
  /** How long one call may run. Default: the toolkit's `timeout`. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Re-runs of a failed call, inside the deadline (design: Retries). Default 0. */
  readonly retries?: number | undefined
  /** `_tag`s never retried: `McpToolError` (the server's `isError` results), `McpClientError` (the connection). */
  readonly permanent?: ReadonlyArray<string> | undefined
  /** Which failures may be retried; default every one. */
  readonly retryable?: Tool.Retryable<McpToolError | McpClientError> | undefined
  /** The same input may reuse an earlier outcome (design: Per-run reuse). Default false. */
  readonly idempotent?: boolean | undefined
  /** Each call runs only once approved (`Hooks.approval` asks a person); else it is refused. Default false. */
  readonly needsApproval?: boolean | undefined
  /** Replaces the text of failures; default: the server's own text for `isError` results. */
  readonly errorTransform?: Tool.ErrorTransform | undefined
}

/** Options of `Mcp.toolkit`: where the server is, and how its tools are named and run. */
export type ToolkitOptions = (RemoteStdio | RemoteHttp) & {
  /** Put before every remote name (`remote_`: `search` is `remote_search`), apart from local tools. Default none. */
  readonly prefix?: string | undefined
  /** The timeout of a tool not named in `tools`. Default 30 seconds. */
  readonly timeout?: Duration.DurationInput | undefined
  /** Options per tool, by the server's name of the tool (without the prefix). */
  readonly tools?: Readonly<Record<string, RemoteToolOptions>> | undefined
  /** How the client introduces itself. Default `agent-tools`. */
  readonly clientName?: string | undefined
}

/** The defaults of `ToolkitOptions`. */
export const toolkitDefaults = { timeout: "30 seconds", prefix: "" } as const

/** The connection failed: it could not be made, it broke during a call, or the server answered with an error. */
export class McpClientError extends Schema.TaggedError<McpClientError>("agent-tools/McpClientError")("McpClientError", {
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

/** The server's result said `isError: true`; `text` is its text, which the model reads as it is. */
export class McpToolError extends Schema.TaggedError<McpToolError>("agent-tools/McpToolError")("McpToolError", {
  tool: Schema.String,
  text: Schema.String
}) {
  override get message() {
    return this.text
  }
}

/** A remote tool: its handler sends the call to the server (an async body, given the pipeline's abort signal). */
export type RemoteTool = Tool.Tool<string, Record<string, unknown>, unknown, unknown, never, PromiseLike<unknown>>

/** A connected remote server's tools; they change when the server says its list changed. */
export interface RemoteToolkit {
  /** The tools as the server lists them now, unchecked: combine them with local ones in `Toolkit.make`. */
  readonly tools: Effect.Effect<ReadonlyArray<RemoteTool>>
  /** The tools now, checked: a name that breaks the limits is a `ManifestError` naming it. Read it per run. */
  readonly toolkit: Effect.Effect<Toolkit.Toolkit<never>, Toolkit.ManifestError>
  /** The current list, then each new one. */
  readonly changes: Stream.Stream<ReadonlyArray<RemoteTool>>
  /** Lists the server's tools again (for a server that does not send list changes). */
  readonly refresh: Effect.Effect<ReadonlyArray<RemoteTool>, McpClientError>
  /** The stdio child's process id while it runs; undefined over HTTP or between connections. */
  readonly processId: Effect.Effect<number | undefined>
}
