/**
 * Any toolkit over the Model Context Protocol (design: MCP), on the official SDK's low-level `Server` (raw
 * JSON Schema, no zod of ours): stdio, and Streamable HTTP bound to 127.0.0.1 with Host/Origin
 * checks and, optionally, bearer tokens. `tools/call` goes through the pipeline by the session's door (design: The
 * call pipeline), which finds the tool, keeps the session's hook state and reuses an idempotent tool's outcomes within
 * the session; progress and log lines go to the client; every failure is a result with `isError: true`
 * and the error text; a cancelled request interrupts the call. Limits (design: Hostile clients): over HTTP a connection
 * cap, a body limit counted while reading, a budget and a time limit for bodies being read, a session cap and an idle
 * expiry (the face is in internal/mcp/http.ts); over stdio the SDK's message limit, and
 * an end when stdin closes (success) or the transport fails (the reason logged, a failure).
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { ReadBuffer, STDIO_DEFAULT_MAX_BUFFER_SIZE } from "@modelcontextprotocol/sdk/shared/stdio.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  type ServerNotification,
  type Tool as McpTool
} from "@modelcontextprotocol/sdk/types.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import { Context, Deferred, Duration, Effect, Exit, Layer, Option, Runtime, Schema, SchemaAST } from "effect"
import type { Readable, Writable } from "node:stream"
import * as Content from "./Content.js"
import * as McpTasks from "./McpTasks.js"
import { Ids } from "./Ids.js"
import * as Door from "./internal/call/door.js"
import { clientServices, type Extra } from "./internal/mcp/clientServices.js"
import * as Tasks from "./internal/mcp/tasks.js"
import { afterOn, type Direct, expireIdle, handleHttp, handleRouted, type HttpFace, isLoopback, makeNodeServer, metadataResponse, type Served } from "./internal/mcp/http.js"
import * as OAuth from "./internal/mcp/oauth.js"
import { ToolResult, UnknownTool } from "./ToolResult.js"
import * as Tool from "./Tool.js"
import * as ToolContext from "./ToolContext.js"
import * as Toolkit from "./Toolkit.js"
import * as Json from "./internal/util/json.js"
import { reasonOf } from "./internal/util/text.js"

/** Remote MCP servers' tools as ours: `Mcp.toolkit` (design: Remote MCP tools). */
export * from "./McpClient.js"

/** Where a server keeps its MCP tasks: `Mcp.Tasks.layerSql({ filename })` (design: MCP tasks). */
export * as Tasks from "./McpTasks.js"

/** Whether a tool may, must or must not be called as a task. */
export type { TaskSupport, TasksOptions } from "./internal/mcp/tasks.js"

/** How `layerHttp` checks OAuth access tokens. */
export type { OAuthOptions } from "./internal/mcp/oauth.js"

/** How the server introduces itself, and what a session keeps. */
export interface Options {
  /** Default `agent-tools`. */
  readonly name?: string | undefined
  readonly version?: string | undefined
  /**
   * The JSON an idempotent tool's reused outcomes may hold per session, their inputs' keys counted
   * too: past it, a new outcome is not kept (the calls still run). Default 256 KiB; 0 reuses nothing.
   */
  readonly maxReusedBytes?: number | undefined
  /**
   * How tools run as MCP tasks, when a task store (`Mcp.Tasks.McpTaskStore`) is provided: which tools may or must
   * (`execution.taskSupport`), the poll interval and time to live told to clients. Default `Mcp.Tasks.defaults`.
   */
  readonly tasks?: Tasks.TasksOptions | undefined
}

/** The default of `Options.maxReusedBytes`. */
export const reuseDefaults = { maxReusedBytes: 256 * 1024 } as const

/**
 * A session's door (design: The call pipeline, MCP): the session's hook state, and its outcomes of idempotent
 * tools, kept once known (a client's calls do not start together) and bounded by `maxReusedBytes`.
 */
const sessionDoor = (toolkit: Toolkit.Toolkit<any>, options: Options | undefined): Door.Door =>
  Door.make(toolkit, {
    kind: "session",
    reuse: { joinInFlight: false, maxBytes: options?.maxReusedBytes ?? reuseDefaults.maxReusedBytes }
  })

interface Listed {
  readonly entry: McpTool
  /**
   * How an output goes out: `object` as it is; `wrapped` as `{ result: ... }` (arrays and primitives),
   * as the output schema says; `any` (no output Schema) an object as it is, anything else wrapped, and
   * no output schema; `content` as `content` items (`Content.Item`, `Content.Items`), no output schema.
   */
  readonly output: "object" | "wrapped" | "any" | "content"
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

/** A tool made without an output Schema (so `Schema.Unknown`), or with `Schema.Any`: any JSON value. */
const isAnyOutput = (tool: Tool.Any): boolean =>
  SchemaAST.isUnknownKeyword(tool.output.ast) || SchemaAST.isAnyKeyword(tool.output.ast)

/**
 * What `tools/list` says of a tool: the parameters as `inputSchema`, and an object `outputSchema`
 * when the tool has an output Schema that is not content.
 */
export const describe = (tool: Tool.Any): Listed => {
  const inputSchema = Tool.jsonSchema(tool).parameters as McpTool["inputSchema"]
  const content = Content.isContentSchema(tool.output)
  if (content || isAnyOutput(tool)) {
    const entry = { name: tool.name, description: tool.description, inputSchema }
    return { output: content ? "content" : "any", entry }
  }
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
    output: wrapped ? "wrapped" : "object",
    entry: { name: tool.name, description: tool.description, inputSchema, outputSchema }
  }
}

const isObject = (value: unknown): boolean => typeof value === "object" && value !== null && !Array.isArray(value)

/** A call's result in MCP's words. */
const toCallResult = (result: ToolResult, listed: Listed | undefined): CallToolResult => {
  if (result.error !== undefined) return { content: [{ type: "text", text: result.error }], isError: true }
  const output = listed?.output ?? "any"
  // Checked against the content Schemas by the pipeline's output encoding.
  if (output === "content") {
    return { content: (Array.isArray(result.value) ? result.value : [result.value]) as CallToolResult["content"] }
  }
  const wrapped = output === "wrapped" || (output === "any" && !isObject(result.value))
  const structured = (wrapped ? { result: result.value } : result.value) as Record<string, unknown>
  return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured }
}

/**
 * A JSON-RPC error for the SDK to send: its message goes out as it is. An `McpError`'s message
 * already says "MCP error <code>: ", and the client's McpError says it again.
 */
const protocolError = (code: number, message: string): Error & { readonly code: number } =>
  Object.assign(new Error(message), { code })

/** A request cancelled (notifications/cancelled, the transport closed) ends without a result; the SDK sends nothing. */
const cancelled = () => protocolError(ErrorCode.RequestTimeout, "the request was cancelled")


/**
 * The call's listener (design: MCP): progress to the client when its request carried a progress
 * token (rising values only, as MCP requires), log lines as `notifications/message` at or above the
 * session's `logging/setLevel` (the SDK keeps the level per session). Nothing once the call ended.
 * `related`: sent on the request's own stream (stdio); over HTTP our POST answers are JSON, which
 * carries nothing but the answer, so they go on the session's GET stream.
 */
class McpListener implements ToolContext.Listener {
  private ended = false
  private last = -Infinity
  constructor(
    private readonly server: Server,
    private readonly tool: string,
    private readonly token: string | number | undefined,
    private readonly extra: Extra,
    private readonly related: boolean
  ) {}
  /** Nothing is sent once the call ended. */
  end(): void {
    this.ended = true
  }
  progress(progress: number, total?: number, message?: string): void {
    if (this.ended || this.token === undefined || !Number.isFinite(progress) || progress <= this.last) return
    this.last = progress
    const notification: ServerNotification = {
      method: "notifications/progress",
      params: {
        progressToken: this.token,
        progress,
        ...(total === undefined || !Number.isFinite(total) ? {} : { total }),
        ...(message === undefined ? {} : { message })
      }
    }
    const sent = this.related ? this.extra.sendNotification(notification) : this.server.notification(notification)
    // A client gone or a closed stream: the call goes on regardless.
    sent.catch(() => undefined)
  }
  log(level: ToolContext.LogLevel, message: string): void {
    if (this.ended) return
    const sent = this.server.sendLoggingMessage({ level, logger: this.tool, data: message }, this.extra.sessionId)
    sent.catch(() => undefined)
  }
}

/** A low-level MCP `Server` for the toolkit of `door` (the session's), running calls on `runtime`. */
const makeServer = (
  door: Door.Door,
  listed: ReadonlyArray<Listed>,
  runtime: Runtime.Runtime<any>,
  // One validator for every session: the SDK's default builds an Ajv instance (~100 KB) per server.
  validator: AjvJsonSchemaValidator,
  // Notifications of a call on the request's stream (stdio), or on the session's (HTTP, JSON answers).
  related: boolean,
  options?: Options,
  // The server's tasks and the principal of this session (design: MCP tasks), when a task store is provided.
  tasks?: { readonly face: Tasks.TaskFace; readonly principal: string }
): Served => {
  const server = new Server(
    { name: options?.name ?? "agent-tools", version: options?.version ?? "0.1.0" },
    {
      capabilities: { tools: {}, logging: {}, ...(tasks === undefined ? {} : { tasks: Tasks.capability }) },
      jsonSchemaValidator: validator,
      ...(tasks === undefined ? {} : { taskStore: tasks.face.storeFor(tasks.principal) })
    }
  )
  tasks?.face.attach(tasks.principal, server)
  const listedByName = new Map(listed.map((l) => [l.entry.name, l]))
  const tools = tasks === undefined ? listed.map((l) => l.entry) : listed.map((l) => ({
    ...l.entry,
    execution: { taskSupport: tasks.face.supportOf(door.lookup(l.entry.name) as Tool.Any) }
  }))
  const inFlight = new Set<Promise<unknown>>()
  // Calls start on this fiber's services and fiber refs, each with its own services added (`withServices`).
  const serving = Door.callerOf(runtime)
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }))
  // A call that completes synchronously is answered at once, without a promise of ours.
  server.setRequestHandler(CallToolRequestSchema, (request, extra): CallToolResult | Promise<CallToolResult> => {
    const tool = door.lookup(request.params.name)
    if (tool instanceof UnknownTool) {
      // A protocol error, as MCP's clients expect, with the text every face gives (design: Error text).
      throw protocolError(ErrorCode.InvalidParams, tool.text)
    }
    if (tasks !== undefined) {
      const asTask = Tasks.asTask(tasks.face, tool, request.params.task)
      if (asTask) {
        const { face, principal } = tasks
        const created = face.create(principal, tool, request.params.arguments, request.params.task?.ttl, request.params._meta?.traceparent, server)
        return created as Promise<never>
      }
    }
    // The SDK aborts `extra.signal` on notifications/cancelled and when the transport closes.
    if (extra.signal.aborted) throw cancelled()
    const listener = new McpListener(server, tool.name, request.params._meta?.progressToken, extra, related)
    const context = clientServices(
      server,
      extra,
      related,
      extra.signal,
      Context.add(serving.context, ToolContext.CallListener, listener)
    )
    // A client that carries its trace (W3C `traceparent` in `_meta`): the call's span continues it.
    const options = { toolCallId: `mcp-${String(extra.requestId)}`, traceparent: request.params._meta?.traceparent }
    let started: Door.Started
    try {
      started = door.start(Door.withServices(serving, context), tool.name, request.params.arguments ?? {}, options)
    } catch {
      // The pipeline turns every failure into a result; a throw here would have been the fiber's defect.
      listener.end()
      throw cancelled()
    }
    if (started instanceof ToolResult) {
      listener.end()
      return toCallResult(started, listedByName.get(tool.name))
    }
    return awaitCall(tool, started, context, extra.signal, listener)
  })
  /** A call that suspended, awaited in a fiber with the call's services, which `signal` interrupts. */
  const awaitCall = async (
    tool: Tool.Any,
    started: Effect.Effect<ToolResult>,
    context: Context.Context<never>,
    signal: AbortSignal,
    listener: McpListener
  ): Promise<CallToolResult> => {
    const awaiting = Runtime.make({ context, fiberRefs: runtime.fiberRefs, runtimeFlags: runtime.runtimeFlags })
    const running = Runtime.runPromiseExit(awaiting)(started, { signal })
    inFlight.add(running)
    const exit = await running.finally(() => {
      listener.end()
      inFlight.delete(running)
    })
    // Only a cancelled request ends without a result; the SDK sends nothing for it.
    if (Exit.isFailure(exit)) throw cancelled()
    return toCallResult(exit.value, listedByName.get(tool.name))
  }
  const close = Effect.promise(async () => {
    await server.close()
    await Promise.allSettled([...inFlight])
  })
  return { server, close }
}

/** The principal of a client no token names (a server without tokens: every client; stdio's one client). */
const anonymous = "anonymous"

/**
 * The server's tasks (design: MCP tasks) when a task store (`Mcp.Tasks.McpTaskStore`) is provided, the tasks a stopped
 * process left taken back; else none: no tool is offered as a task.
 */
const taskFace = (door: Door.Door, listed: ReadonlyArray<Listed>, runtime: Runtime.Runtime<any>, options: Options | undefined) =>
  Effect.gen(function*() {
    const store = yield* Effect.serviceOption(McpTasks.McpTaskStore)
    if (Option.isNone(store)) return undefined
    const byName = new Map(listed.map((l) => [l.entry.name, l]))
    const face = yield* Tasks.make({
      door,
      runtime,
      encode: (tool, result) => toCallResult(result, byName.get(tool.name)),
      tasks: options?.tasks
    }).pipe(Effect.provideService(McpTasks.McpTaskStore, store.value))
    yield* face.resume
    return face
  })

/** The toolkit's `tools/list`, computed once. */
const listOf = (toolkit: Toolkit.Toolkit<any>) => toolkit.tools.map(describe)

/** The stdio transport's defaults. */
export const stdioDefaults = { maxMessageDepth: 512 } as const

/**
 * The SDK's `ReadBuffer` (one JSON-RPC message a line), refusing a line nested deeper than
 * `maxDepth` from its text: it is taken off the buffer and reported as the transport's error (a
 * warning; the server reads on), never parsed. A value nested a million deep held the loop for
 * seconds while the parser built it.
 */
class DepthBoundedReadBuffer extends ReadBuffer {
  constructor(maxBufferSize: number, private readonly maxDepth: number) {
    super({ maxBufferSize })
  }
  override readMessage() {
    const held = this as unknown as { _buffer: Buffer | undefined }
    const end = held._buffer?.indexOf("\n") ?? -1
    // A line of 2 * maxDepth bytes or fewer cannot nest deeper: only a longer one is scanned.
    if (end > 2 * this.maxDepth && Json.textDeeperThan(held._buffer!.toString("utf8", 0, end), this.maxDepth)) {
      held._buffer = held._buffer!.subarray(end + 1)
      throw new Error(`a message nested deeper than ${this.maxDepth} levels was dropped unread`)
    }
    return super.readMessage()
  }
}

/** MCP over stdio stopped for a reason other than stdin closing: the process should exit non-zero. */
export class McpStdioError extends Schema.TaggedError<McpStdioError>("agent-tools/McpStdioError")("McpStdioError", {
  reason: Schema.String
}) {
  override get message() {
    return `MCP over stdio failed: ${this.reason}`
  }
}

/** Options of the stdio transport. */
export interface StdioOptions extends Options {
  /** Default `process.stdin`. */
  readonly stdin?: Readable | undefined
  /** Default `process.stdout`. */
  readonly stdout?: Writable | undefined
  /** Unread input at most, in bytes (one message must fit): over it, the transport fails. Default the SDK's 10 MiB. */
  readonly maxMessageBytes?: number | undefined
  /**
   * A message nesting arrays and objects deeper than this is dropped from its text, before it is
   * parsed, with a warning; the server reads on. Default 512.
   */
  readonly maxMessageDepth?: number | undefined
}


/**
 * Serves the toolkit over stdio until stdin closes (calls in flight are interrupted, then it
 * succeeds) or the transport fails (a message over `maxMessageBytes`, a stream error: the reason is
 * logged and it fails with `McpStdioError`). Only protocol messages go to stdout: send logs to
 * stderr (main.ts does).
 */
export const serveStdio = <R>(
  toolkit: Toolkit.Toolkit<R>,
  options?: StdioOptions
): Effect.Effect<void, McpStdioError, Exclude<R, ToolContext.CallServices>> =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Exclude<R, ToolContext.CallServices>>()
    // The one session's door; tools on worker threads: their workers are up before the first request is read.
    const door = sessionDoor(toolkit, options)
    yield* door.prepare
    const stdin = options?.stdin ?? process.stdin
    const stdout = options?.stdout ?? process.stdout
    const listed = listOf(toolkit)
    const tasks = yield* taskFace(door, listed, runtime, options)
    const served = makeServer(door, listed, runtime, new AjvJsonSchemaValidator(), true, options, tasks && { face: tasks, principal: anonymous })
    const ended = yield* Deferred.make<void, McpStdioError>()
    // The SDK reports an error, then closes the transport on a fatal one: the last error is the reason.
    let lastError: string | undefined
    served.server.onerror = (error) => {
      lastError = reasonOf(error)
      Runtime.runFork(runtime)(Effect.logWarning(`MCP over stdio: ${lastError}`))
    }
    served.server.onclose = () =>
      Deferred.unsafeDone(ended, Exit.fail(new McpStdioError({ reason: lastError ?? "the transport closed" })))
    // The first of these wins: a client that closes stdin and then our stdout is not a failure.
    const onEnd = () => Deferred.unsafeDone(ended, Exit.void)
    const onStdinError = (error: unknown) =>
      Deferred.unsafeDone(ended, Exit.fail(new McpStdioError({ reason: `stdin: ${reasonOf(error)}` })))
    const onStdoutError = (error: unknown) =>
      Deferred.unsafeDone(ended, Exit.fail(new McpStdioError({ reason: `stdout: ${reasonOf(error)}` })))
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        stdin.once("end", onEnd)
        stdin.once("close", onEnd)
        stdin.once("error", onStdinError)
        stdout.once("error", onStdoutError)
      }),
      () =>
        Effect.sync(() => {
          stdin.off("end", onEnd)
          stdin.off("close", onEnd)
          stdin.off("error", onStdinError)
          stdout.off("error", onStdoutError)
        })
    )
    const maxBufferSize = options?.maxMessageBytes ?? STDIO_DEFAULT_MAX_BUFFER_SIZE
    const transport = new StdioServerTransport(stdin, stdout, { maxBufferSize })
    // The SDK's line reader, with one more check: a line nested too deep is dropped before it is parsed.
    ;(transport as unknown as { _readBuffer: ReadBuffer })._readBuffer = new DepthBoundedReadBuffer(
      maxBufferSize,
      options?.maxMessageDepth ?? stdioDefaults.maxMessageDepth
    )
    yield* Effect.acquireRelease(
      Effect.promise(() => served.server.connect(transport)),
      () => served.close
    )
    if (stdin.readableEnded) onEnd()
    yield* Effect.logDebug(`MCP over stdio: serving ${toolkit.tools.length} tools`)
    yield* Deferred.await(ended).pipe(
      Effect.tapError((error) => Effect.logError(`${error.message}; the server stops`))
    )
  }))

/** Where the HTTP transport listens, and its limits (design: Hostile clients). */
export interface HttpOptions extends Options {
  /** Default 127.0.0.1: only this machine. */
  readonly host?: string | undefined
  /** 0 picks a free port. */
  readonly port: number
  /** Default `/mcp`. */
  readonly path?: HttpLayerRouter.PathInput | undefined
  /** The largest request body, counted while it is read: one byte over, and the answer is 413. Default 4 MiB. */
  readonly maxBodyBytes?: number | undefined
  /**
   * A body nesting arrays and objects deeper than this is answered 400 from its text, before it is
   * parsed (a value nested a million deep holds the event loop for a second while it is built). Default 512.
   */
  readonly maxBodyDepth?: number | undefined
  /**
   * The bodies being read at once hold at most this many bytes together, past each one's first 64 KiB (so a
   * small request always gets in): the body that would go over is answered 503. Default 64 MiB.
   */
  readonly maxBufferedBodyBytes?: number | undefined
  /** A body not received in full this long after its headers is answered 408, its connection closed. Default 30 s. */
  readonly bodyTimeout?: Duration.DurationInput | undefined
  /** Open connections at most: one more is answered 503 and closed before it is read. Default 256. */
  readonly maxConnections?: number | undefined
  /** Open sessions at most: past it, `initialize` is answered 503 with a JSON-RPC error. Default 1,000. */
  readonly maxSessions?: number | undefined
  /** Bytes waiting for a client that does not read its event stream (GET): past it, the stream is closed. Default 8 MiB. */
  readonly maxStreamBufferedBytes?: number | undefined
  /**
   * A session without a request for this long is closed, its GET stream ended (a request in flight keeps it; an
   * open stream does not): its id then gets 404. Default 10 minutes.
   */
  readonly sessionIdleTimeout?: Duration.DurationInput | undefined
  /**
   * Bearer tokens (token -> the client's name, or a list): every request without `Authorization: Bearer` and
   * one of them gets 401, before its body is read; a session answers only the token that opened it. The way to
   * put the server on a network. Default none: anyone who reaches the port is served.
   */
  readonly tokens?: ReadonlyMap<string, string> | ReadonlyArray<string> | undefined
  /**
   * OAuth 2.1 in place of `tokens` (design: MCP authorization): access tokens checked as JWTs of `issuer`, for
   * `resource`, against its keys; the metadata served at `/.well-known/oauth-protected-resource`. Each token's
   * subject is a principal of its own (its sessions and tasks). Needs the package `jose`.
   */
  readonly oauth?: OAuth.OAuthOptions | undefined
}

/** The defaults of `HttpOptions`' limits. */
export const httpDefaults = {
  // The 1 MiB argument limit (Invocation) plus JSON-RPC framing, with room to spare; the SDK's own default.
  maxBodyBytes: 4 * 1024 * 1024,
  maxBodyDepth: 512,
  // Sixteen bodies at the limit at once; 200 clients each holding one unfinished held 800 MB before.
  maxBufferedBodyBytes: 64 * 1024 * 1024,
  bodyTimeout: Duration.seconds(30),
  // Below the usual 1,024 open files; each official client holds two (its POSTs and its GET stream).
  maxConnections: 256,
  maxSessions: 1_000,
  maxStreamBufferedBytes: 8 * 1024 * 1024,
  sessionIdleTimeout: Duration.minutes(10)
} as const

/**
 * Serves the toolkit over Streamable HTTP at `http://host:port/mcp`, with sessions (so that a
 * `notifications/cancelled` reaches the server running the call, and interrupts it), JSON responses
 * to POSTs and one SSE stream per session on GET. Host and Origin must name this machine; with `tokens`, every
 * request must carry one (401). Limits (`httpDefaults`): a connection cap (503), a body limit counted while
 * reading (413), a budget for the bodies being read together (503) and a time limit on each (408), a session
 * cap (503 to `initialize`) and an idle expiry, which closes the session and frees it. A host other than
 * loopback without `tokens` is logged as a warning.
 */
export const layerHttp = <R>(toolkit: Toolkit.Toolkit<R>, options: HttpOptions) => {
  const host = options.host ?? "127.0.0.1"
  const listed = listOf(toolkit)
  const bodyMillis = Duration.toMillis(options.bodyTimeout ?? httpDefaults.bodyTimeout)
  const limits = { maxConnections: options.maxConnections ?? httpDefaults.maxConnections, bodyMillis }
  const path = options.path ?? "/mcp"
  const route = (direct: Direct) => HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<Exclude<R, ToolContext.CallServices>>()
      // Each session opens a door of its own; tools on worker threads: their workers are up before the first.
      const door = sessionDoor(toolkit, options)
      yield* door.prepare
      const ids = yield* Ids
      const validator = new AjvJsonSchemaValidator()
      const tasks = yield* taskFace(door, listed, runtime, options)
      if (options.tokens === undefined && options.oauth === undefined && !isLoopback(host)) {
        yield* Effect.logWarning(
          `MCP over HTTP on ${host} without tokens: anyone who reaches the port can call the tools; give layerHttp tokens`
        )
      }
      const unscoped = OAuth.unknownToolScopes(options.oauth, [...toolkit.byName.keys()])
      if (unscoped !== undefined) yield* Effect.logWarning(unscoped)
      const clock = yield* Effect.clock
      const face: HttpFace = {
        host,
        tokens: tokensOf(options.tokens),
        oauth: options.oauth === undefined ? undefined : { options: options.oauth, verify: OAuth.makeVerifier(options.oauth) },
        maxBodyBytes: options.maxBodyBytes ?? httpDefaults.maxBodyBytes,
        maxBodyDepth: options.maxBodyDepth ?? httpDefaults.maxBodyDepth,
        maxBufferedBodyBytes: options.maxBufferedBodyBytes ?? httpDefaults.maxBufferedBodyBytes,
        bodyMillis,
        maxSessions: options.maxSessions ?? httpDefaults.maxSessions,
        maxStreamBufferedBytes: options.maxStreamBufferedBytes ?? httpDefaults.maxStreamBufferedBytes,
        idleMillis: Duration.toMillis(options.sessionIdleTimeout ?? httpDefaults.sessionIdleTimeout),
        clock,
        after: afterOn(runtime, clock),
        sessions: new Map(),
        bufferedBodyBytes: 0,
        opening: 0,
        serve: (client) =>
          makeServer(door.open(), listed, runtime, validator, false, options, tasks && { face: tasks, principal: client ?? anonymous }),
        sessionId: () => ids.make("session")
      }
      yield* expireIdle(face)
      yield* router.add("*", path, (request) => handleRouted(face, request))
      yield* Effect.acquireRelease(Effect.sync(() => void (direct.handle = (req, res) => handleHttp(face, req, res))), () =>
        Effect.sync(() => void (direct.handle = undefined)))
      const oauth = options.oauth
      if (oauth !== undefined) {
        for (const path of OAuth.metadataPaths(oauth.resource)) {
          yield* router.add("GET", path as HttpLayerRouter.PathInput, () => Effect.succeed(metadataResponse(oauth)))
        }
      }
    })
  )
  // Each build its own: a plain path is taken from Node's server as requests come; a pattern is the router's to match.
  return Layer.unwrapEffect(Effect.sync(() => {
    const direct: Direct = { path: /[:*]/.test(path) ? undefined : path, handle: undefined }
    return HttpLayerRouter.serve(route(direct), { disableLogger: true, disableListenLog: true }).pipe(
      Layer.provideMerge(Layer.unwrapEffect(Effect.map(Effect.runtime<never>(), (runtime) => {
        const warn = (message: string) => Runtime.runFork(runtime)(Effect.logWarning(message))
        return NodeHttpServer.layer(() => makeNodeServer(limits, warn, direct), { port: options.port, host })
      })))
    )
  }))
}

/** `HttpOptions.tokens` as token -> name; a list's tokens are named by their place in it ("client 1"), never by themselves. */
const tokensOf = (
  tokens: ReadonlyMap<string, string> | ReadonlyArray<string> | undefined
): ReadonlyMap<string, string> | undefined => {
  if (tokens === undefined || !isTokenList(tokens)) return tokens
  return new Map(tokens.map((token, i) => [token, `client ${i + 1}`]))
}

const isTokenList = (tokens: ReadonlyMap<string, string> | ReadonlyArray<string>): tokens is ReadonlyArray<string> =>
  Array.isArray(tokens)
