/**
 * The work of `Mcp.toolkit` (design: Remote MCP tools): the connection and its replacement, the
 * listing, the remote tools and ajv's check of their schemas. Loaded on the first `Mcp.toolkit`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import {
  type CallToolResult,
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  ListToolsResultSchema,
  LoggingMessageNotificationSchema,
  McpError,
  type Tool as McpTool,
  ToolListChangedNotificationSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Runtime, type Scope, SubscriptionRef } from "effect"
import { basename } from "node:path"
import {
  McpClientError,
  McpToolError,
  type RemoteTool,
  type RemoteToolkit,
  toolkitDefaults,
  type ToolkitOptions
} from "./types.js"
import { type JsonSchemaObject, Validators } from "../jsonSchema.js"
import * as Tool from "../../Tool.js"
import * as Toolkit from "../../Toolkit.js"
import { errorText } from "../../ToolResult.js"
import * as Json from "../util/json.js"
import { effectLevels } from "../util/logLevels.js"
import { redactUrl } from "../util/settings.js"
import { clip, reasonOf } from "../util/text.js"

/** How much of a remote server's log line is logged. */
const maxLogLineLength = 2_000
/** A server's log lines heard a second, at most; the rest are dropped and counted in a warning. */
const maxLogLinesPerSecond = 100

// ---------------------------------------------------------------------------------------------
// A remote tool as a Tool.

/** The output of a successful result (design: Remote MCP tools): see docs/mcp.md. */
const outputOf = (listed: McpTool, result: CallToolResult): unknown => {
  if (listed.outputSchema !== undefined || result.structuredContent !== undefined) {
    return result.structuredContent ?? null
  }
  const [only, ...more] = result.content
  return only !== undefined && more.length === 0 && only.type === "text" ? only.text : result.content
}

/** The text of an `isError` result: its text items, one a line. */
const errorTextOf = (listed: McpTool, result: CallToolResult): string => {
  const texts = result.content.flatMap((item) => item.type === "text" ? [item.text] : [])
  return texts.length > 0 ? texts.join("\n") : `${listed.name} failed; the server gave no text`
}

/** What makes a call: a connection to use, and what to do when it failed under the call. */
/** What a remote tool needs of its server's connections. */
interface ConnectionsOf {
  readonly get: () => Promise<Live>
  readonly failed: (live: Live, error: unknown) => McpClientError
}

/** A remote tool as one of ours, under `name`; a schema ajv cannot compile is a `Toolkit.make` violation. */
const remoteTool = (
  listed: McpTool,
  name: string,
  options: ToolkitOptions,
  validators: Validators,
  connections: ConnectionsOf
): RemoteTool => {
  const own = options.tools?.[listed.name] ?? {}
  const description = listed.description ?? listed.title ?? listed.annotations?.title ?? listed.name
  return Tool.fromJsonSchema(name, {
    description,
    parameters: listed.inputSchema as JsonSchemaObject,
    output: listed.outputSchema as JsonSchemaObject | undefined,
    schemaNames: { input: "the server's inputSchema", output: "the server's outputSchema" },
    validators,
    timeout: own.timeout ?? options.timeout ?? toolkitDefaults.timeout,
    retries: own.retries,
    permanent: own.permanent,
    retryable: own.retryable as Tool.Retryable<unknown> | undefined,
    idempotent: own.idempotent,
    needsApproval: own.needsApproval,
    errorTransform: own.errorTransform ?? ((error) => error instanceof McpToolError ? error.text : errorText(error))
  }, async (input, call) => {
    const send = (live: Live) =>
      asTask(live, listed) ? callAsTask(live, listed, input, call) : live.client.request(
        {
          method: "tools/call",
          params: {
            name: listed.name,
            arguments: input,
            // The trace goes on at the server (W3C Trace Context in `_meta`), when a tracer listens here.
            ...(call.traceparent === undefined ? {} : { _meta: { traceparent: call.traceparent } })
          }
        },
        CallToolResultSchema,
        // The deadline aborts the signal: the SDK sends notifications/cancelled. Its own timeout must not come first.
        // The server's progress is the call's: passed on to whoever hears ours (our MCP client, say).
        {
          signal: call.signal,
          timeout: call.remaining() + 1_000,
          onprogress: (progress) => call.progress(progress.progress, progress.total, progress.message)
        }
      )
    let live = await connections.get()
    let result: CallToolResult
    try {
      result = await send(live)
    } catch (error) {
      if (call.signal.aborted) throw error
      const failure = connections.failed(live, error)
      if (!notDelivered(error)) throw failure
      // The server never took the request (its session is gone, nothing listens): once more, on a new connection.
      live = await connections.get()
      try {
        result = await send(live)
      } catch (again) {
        throw call.signal.aborted ? again : connections.failed(live, again)
      }
    }
    if (result.isError === true) throw new McpToolError({ tool: listed.name, text: errorTextOf(listed, result) })
    return outputOf(listed, result)
  })
}

/** The call goes as an MCP task: the tool supports them, and the server takes `tools/call` as a task. */
const asTask = (live: Live, listed: McpTool): boolean => {
  const support = listed.execution?.taskSupport
  return (support === "optional" || support === "required") &&
    live.client.getServerCapabilities()?.tasks?.requests?.tools?.call !== undefined
}

/** What a remote call is given by the pipeline (an async body's second argument). */
type RemoteCall = Parameters<Parameters<typeof Tool.fromJsonSchema>[2]>[1]

/**
 * A call as an MCP task (design: Remote MCP tools): created, polled with `tasks/get` at the server's interval within
 * the call's deadline, its result read with `tasks/result`. Interrupted or past its deadline, the task is cancelled on
 * the server (`tasks/cancel`, best effort). The caller sees what a plain call gives.
 */
const callAsTask = async (live: Live, listed: McpTool, input: unknown, call: RemoteCall): Promise<CallToolResult> => {
  const options = () => ({ signal: call.signal, timeout: call.remaining() + 1_000 })
  const traced = call.traceparent === undefined ? {} : { _meta: { traceparent: call.traceparent } }
  const params = { name: listed.name, arguments: input as Record<string, unknown>, task: {}, ...traced }
  const { task } = await live.client.request({ method: "tools/call", params }, CreateTaskResultSchema, options())
  try {
    let status = task.status
    while (status === "working" || status === "input_required") {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          clearTimeout(timer)
          reject(call.signal.reason)
        }
        const timer = setTimeout(() => {
          call.signal.removeEventListener("abort", onAbort)
          resolve()
        }, Math.max(10, Math.min(task.pollInterval ?? 1_000, call.remaining())))
        call.signal.addEventListener("abort", onAbort, { once: true })
      })
      status = (await live.client.experimental.tasks.getTask(task.taskId, options())).status
    }
    return await live.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, options())
  } catch (error) {
    if (call.signal.aborted) live.client.experimental.tasks.cancelTask(task.taskId).catch(() => undefined)
    throw error
  }
}

// ---------------------------------------------------------------------------------------------
// The connection.

/** One connection: a client on a transport; a new one after the old one closed. */
interface Live {
  readonly client: Client
  readonly transport: StdioClientTransport | StreamableHTTPClientTransport
  /** Settles when the connection is made and the tools listed, or it failed. */
  ready: Promise<void>
  closed: boolean
  /** Why the connection was closed here, when the server broke it (a message too large). */
  failure?: string | undefined
}

/** A request the server cannot have run: over HTTP, its session is unknown (404) or nothing listens at the URL. */
const notDelivered = (error: unknown): boolean =>
  (error instanceof StreamableHTTPError && error.code === 404) ||
  (error instanceof TypeError && (error.cause as { code?: unknown } | undefined)?.code === "ECONNREFUSED")


/** The server in error texts (a model may read them): the command's file name, or the URL, credentials hidden. */
const describeServer = (options: ToolkitOptions): string =>
  "command" in options
    ? `the MCP server ${JSON.stringify(basename(options.command))}`
    : `the MCP server at ${redactUrl(String(options.url))}`

/** Pages of `tools/list` read at most. */
const maxPages = 100

/**
 * The connections to one server, one at a time (design: Remote MCP tools): the one in use, or being made; a
 * closed one is replaced by the next call. It lists the server's tools into `state` and hears its
 * notifications (log lines, list changes).
 */
class Connections {
  private current: Live | undefined
  private ended = false
  private readonly closing = new Set<Promise<void>>()
  // Lists from several refreshes may cross: only a later one replaces an earlier.
  private listings = 0
  private published = 0

  constructor(
    private readonly options: ToolkitOptions,
    private readonly runtime: Runtime.Runtime<never>,
    private readonly state: SubscriptionRef.SubscriptionRef<ReadonlyArray<RemoteTool>>,
    readonly server: string
  ) {}

  /** The connection, made (and its tools listed) if there is none; refused once the scope ended. */
  readonly get = (): Promise<Live> => {
    if (this.ended) {
      const reason = `the connection to ${this.server} is closed (its scope ended)`
      return Promise.reject(new McpClientError({ reason }))
    }
    if (this.current === undefined || this.current.closed) this.current = this.open()
    const live = this.current
    return live.ready.then(() => live)
  }

  /** The error of a call that failed on `live`; a failure of the connection itself drops it. */
  readonly failed = (live: Live, error: unknown): McpClientError => {
    // A JSON-RPC error answer leaves the connection as it was; anything else (closed, unreachable) drops it.
    if (error instanceof McpError && error.code !== ErrorCode.ConnectionClosed) {
      // The SDK puts "MCP error <code>: " before the message, once on each side: said once, here.
      const message = error.message.replace(/^(MCP error -?\d+: )+/, "")
      return new McpClientError({ reason: `${this.server} answered with an error (${error.code}): ${message}` })
    }
    void this.close(live)
    return new McpClientError({
      reason: `the connection to ${this.server} failed during the call (${live.failure ?? reasonOf(error)}); the next call connects again`
    })
  }

  /** The stdio child's process id while it runs. */
  processId(): number | undefined {
    const current = this.current
    return current !== undefined && !current.closed && current.transport instanceof StdioClientTransport
      ? current.transport.pid ?? undefined
      : undefined
  }

  /** Ends it all at the scope's end: no new connection; the one in use closed, and every close awaited. */
  async end(): Promise<void> {
    this.ended = true
    const live = this.current
    if (live !== undefined) {
      await live.ready.catch(() => undefined)
      await this.close(live)
    }
    await Promise.allSettled([...this.closing])
  }

  private close(live: Live): Promise<void> {
    this.forget(live)
    if (live.closed) return Promise.resolve()
    live.closed = true
    const transport = live.transport
    const done = (async () => {
      // Over HTTP, end the session on the server too (best effort, bounded).
      if (transport instanceof StreamableHTTPClientTransport) {
        let timer: ReturnType<typeof setTimeout> | undefined
        const bound = new Promise((resolve) => (timer = setTimeout(resolve, 1_000)))
        await Promise.race([transport.terminateSession().catch(() => undefined), bound])
        clearTimeout(timer)
      }
      await live.client.close().catch(() => undefined)
    })()
    this.closing.add(done)
    return done.finally(() => this.closing.delete(done))
  }

  /** A closed connection is dropped, so that the next call makes a new one. */
  private forget(live: Live): void {
    if (this.current === live) this.current = undefined
  }

  /** Lists the server's tools (every page, bounded) and publishes them, unless a later listing did already. */
  async list(live: Live): Promise<ReadonlyArray<RemoteTool>> {
    const { options } = this
    const listing = ++this.listings
    const listed: Array<McpTool> = []
    let cursor: string | undefined
    let pages = 0
    do {
      // A server that pages forever does not hold the listing: past the tool limit, the toolkit is refused anyway.
      if (++pages > maxPages || listed.length > Toolkit.maxTools) break
      // Not `listTools`: it compiles the output schemas for `callTool` (unused here), and one that does not compile
      // would fail the listing instead of being reported as a violation of that tool.
      const page = await live.client.request(
        { method: "tools/list", params: cursor === undefined ? {} : { cursor } },
        ListToolsResultSchema
      )
      listed.push(...page.tools)
      cursor = page.nextCursor
    } while (cursor !== undefined)
    // Past the tool limit the toolkit is refused whatever the schemas say: none is compiled, and only
    // one tool past the limit is made (a server listing 10,000 must not cost 10,000 tools).
    const over = listed.length > Toolkit.maxTools
    const validators = over ? new Validators(`the server lists more than ${Toolkit.maxTools} tools`) : new Validators()
    const prefix = options.prefix ?? toolkitDefaults.prefix
    const tools = listed.slice(0, Toolkit.maxTools + 1).map((entry) =>
      remoteTool(entry, prefix + entry.name, options, validators, this)
    )
    if (listing > this.published) {
      this.published = listing
      // Options for a tool the server does not list would be lost without a word: a typo, or a tool gone.
      const unknown = Object.keys(options.tools ?? {}).filter((name) => !listed.some((entry) => entry.name === name))
      await Runtime.runPromise(this.runtime)(Effect.zipRight(
        SubscriptionRef.set(this.state, tools),
        unknown.length === 0 ? Effect.void : Effect.logWarning(
          `Mcp.toolkit: ${this.server} lists no tool named ${unknown.map((name) => JSON.stringify(name)).join(", ")}; ` +
            `its options are not used (the server lists ${listed.map((entry) => entry.name).join(", ")})`
        )
      ))
    }
    return tools
  }

  /** A new connection: its transport and client, its notifications heard, connected and listed in `ready`. */
  private open(): Live {
    const { options, server } = this
    const transport = "command" in options
      ? new StdioClientTransport({
        command: options.command,
        args: options.args === undefined ? [] : [...options.args],
        ...(options.env === undefined ? {} : { env: options.env }),
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
        stderr: options.stderr ?? "inherit"
      })
      : new StreamableHTTPClientTransport(new URL(options.url), {
        ...(options.headers === undefined ? {} : { requestInit: { headers: options.headers } })
      })
    const client = new Client({ name: options.clientName ?? "agent-tools", version: "0.1.0" }, { capabilities: {} })
    const live: Live = { client, transport, ready: Promise.resolve(), closed: false }
    // A stream that breaks under a call (the server went away) leaves the call unanswered: the connection is lost.
    client.onerror = (error) => {
      // A message past the SDK's 10 MiB read buffer: the rest of it would be read as garbage.
      if (error.message.startsWith("ReadBuffer exceeded")) live.failure = `it sent a message over 10 MiB (${error.message})`
      if (error.message.startsWith("SSE stream disconnected") || live.failure !== undefined) void this.close(live)
    }
    client.onclose = () => {
      live.closed = true
      this.forget(live)
    }
    this.hear(live)
    live.ready = (async () => {
      try {
        await client.connect(transport)
        await this.list(live)
      } catch (error) {
        await this.close(live)
        throw new McpClientError({ reason: `could not connect to ${server}: ${live.failure ?? reasonOf(error)}` })
      }
    })()
    return live
  }

  /** The server's notifications on `live`: its log lines, and its list changes. */
  private hear(live: Live): void {
    const { runtime, server } = this
    // The server's log lines are ours, at their level, named after the server (and its logger), each cut to
    // `maxLogLineLength`: a server may send any data, as long and as deep as it likes.
    const rate = { second: 0, heard: 0, dropped: 0 }
    live.client.setNotificationHandler(LoggingMessageNotificationSchema, ({ params: { data, level, logger } }) => {
      // At most `maxLogLinesPerSecond` a second: a server that floods its logs is not kept, only counted.
      const second = Math.floor(Date.now() / 1000)
      if (second !== rate.second) {
        if (rate.dropped > 0) {
          Runtime.runFork(runtime)(Effect.logWarning(
            `Mcp.toolkit: ${server} sent more than ${maxLogLinesPerSecond} log lines a second: ${rate.dropped} dropped`
          ))
        }
        rate.second = second
        rate.heard = 0
        rate.dropped = 0
      }
      if (++rate.heard > maxLogLinesPerSecond) {
        rate.dropped++
        return
      }
      const text = typeof data === "string" ? data : Json.preview(data, maxLogLineLength)
      const line = clip(text, maxLogLineLength)
      const from = typeof logger === "string" ? `${server} (${logger.slice(0, 100)})` : server
      Runtime.runFork(runtime)(Effect.logWithLevel(effectLevels[level], `Mcp.toolkit: ${from}: ${line}`))
    })
    // Whatever the server declared: a list change is worth a new listing. Coalesced: one listing in
    // flight, and at most one more after it, however many changes arrive meanwhile.
    const listing = { running: false, again: false }
    const relist = (): void => {
      if (live.closed) return
      if (listing.running) {
        listing.again = true
        return
      }
      listing.running = true
      this.list(live).catch((error) =>
        Runtime.runFork(runtime)(
          Effect.logWarning(`Mcp.toolkit: listing the tools of ${server} after a list change failed: ${reasonOf(error)}`)
        )
      ).finally(() => {
        listing.running = false
        if (listing.again) {
          listing.again = false
          relist()
        }
      })
    }
    live.client.setNotificationHandler(ToolListChangedNotificationSchema, relist)
  }
}

/** `Mcp.toolkit`'s work, loaded on its first use. */
export const connect = (options: ToolkitOptions): Effect.Effect<RemoteToolkit, McpClientError, Scope.Scope> =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<never>()
    const state = yield* SubscriptionRef.make<ReadonlyArray<RemoteTool>>([])
    const connections = new Connections(options, runtime, state, describeServer(options))
    yield* Effect.acquireRelease(
      Effect.tryPromise({ try: () => connections.get(), catch: (error) => error as McpClientError }),
      () => Effect.promise(() => connections.end())
    )
    const tools = SubscriptionRef.get(state)
    return {
      tools,
      toolkit: Effect.flatMap(tools, (all) => Toolkit.make(...all)),
      changes: state.changes,
      refresh: Effect.tryPromise({
        try: async () => connections.list(await connections.get()),
        catch: (error) =>
          error instanceof McpClientError
            ? error
            : new McpClientError({ reason: `listing the tools of ${connections.server} failed: ${reasonOf(error)}` })
      }),
      processId: Effect.sync(() => connections.processId())
    }
  })
