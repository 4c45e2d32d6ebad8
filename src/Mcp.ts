/**
 * Any toolkit over the Model Context Protocol (design: MCP), on the official SDK's low-level `Server` (raw
 * JSON Schema, no zod of ours): stdio, and Streamable HTTP bound to 127.0.0.1 with Host/Origin
 * checks. `tools/call` goes through the pipeline, as `Invocation.run` (an idempotent tool's outcomes reused within a
 * session); progress and log lines go to the client; every failure is a result with `isError: true`
 * and the error text; a cancelled request interrupts the call. Limits (design: Hostile clients): over HTTP a body limit
 * counted while reading, a session cap and an idle expiry; over stdio the SDK's message limit, and
 * an end when stdin closes (success) or the transport fails (the reason logged, a failure).
 */
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"
import { ReadBuffer, STDIO_DEFAULT_MAX_BUFFER_SIZE } from "@modelcontextprotocol/sdk/shared/stdio.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  type ServerNotification,
  type Tool as McpTool
} from "@modelcontextprotocol/sdk/types.js"
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv"
import { type Clock, Context, Deferred, Duration, Effect, Exit, Layer, Runtime, Schema, SchemaAST } from "effect"
import { createServer } from "node:http"
import type { Readable, Writable } from "node:stream"
import * as Content from "./Content.js"
import { Ids } from "./Ids.js"
import * as Pipeline from "./internal/call/pipeline.js"
import * as Reuse from "./internal/call/reuse.js"
import { RunState } from "./internal/hooks/tool.js"
import { parseTraceparent } from "./internal/util/traceContext.js"
import { ToolResult } from "./ToolResult.js"
import * as Tool from "./Tool.js"
import * as ToolContext from "./ToolContext.js"
import * as Toolkit from "./Toolkit.js"
import { Sampling, SamplingError } from "./Sampling.js"
import { UserPrompt, UserPromptError } from "./UserPrompt.js"
import * as Json from "./internal/util/json.js"
import { prepareWorkers } from "./internal/worker/prepare.js"

/** Remote MCP servers' tools as ours: `Mcp.toolkit` (design: Remote MCP tools). */
export * from "./McpClient.js"

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
}

/** The default of `Options.maxReusedBytes`. */
export const reuseDefaults = { maxReusedBytes: 256 * 1024 } as const

/**
 * The serving fiber as the caller of one `tools/call`, with the call's own services in its context (its listener,
 * the client's user and model): a call costs no fiber of its own until it suspends.
 */
const callOf = (serving: Pipeline.CallingFiber, context: Context.Context<never>): Pipeline.CallingFiber => ({
  fiber: serving.fiber,
  runtimeFlags: serving.runtimeFlags,
  // Its limits and clock are the serving fiber's: the call's services add neither.
  clock: serving.clock,
  config: serving.config,
  tracing: serving.tracing,
  exporting: serving.exporting,
  context
})

/** `runtime` as a fiber that calls start on: the same services, fiber refs and flags as a fiber it runs. */
const servingFiber = (runtime: Runtime.Runtime<any>): Pipeline.CallingFiber =>
  Runtime.runSync(runtime)(
    Effect.withFiberRuntime((fiber, status) => Effect.succeed(new Pipeline.CallingFiber(fiber, status.runtimeFlags)))
  )

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

/** What a request handler is given by the SDK. */
type Extra = Parameters<Parameters<Server["setRequestHandler"]>[1]>[1]

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

/**
 * What a call may ask the client (design: MCP), when the client said it can: the user, through
 * elicitation (the `UserPrompt` that `ask_user` and approvals use), and its model, through sampling
 * (`Sampling`). Over HTTP the request goes on the session's stream, as notifications do.
 */
const clientServices = (
  server: Server,
  extra: Extra,
  related: boolean,
  signal: AbortSignal,
  context: Context.Context<never>
): Context.Context<never> => {
  const capabilities = server.getClientCapabilities()
  if (capabilities?.elicitation === undefined && capabilities?.sampling === undefined) return context
  const options = { signal, ...(related ? { relatedRequestId: extra.requestId } : {}) }
  const describe = (error: unknown) => error instanceof Error ? error.message : String(error)
  const prompt = capabilities?.elicitation === undefined ? undefined : UserPrompt.of({
    ask: (question) =>
      Effect.tryPromise({
        try: () =>
          server.elicitInput({
            message: question,
            requestedSchema: {
              type: "object",
              properties: { answer: { type: "string", title: "Answer", description: question } },
              required: ["answer"]
            }
          }, options),
        catch: (error) => new UserPromptError({ message: `the client gave no answer (${describe(error)})` })
      }).pipe(Effect.flatMap((result) => {
        const answer = result.content?.answer
        if (result.action === "accept" && typeof answer === "string") return Effect.succeed(answer)
        return Effect.fail(new UserPromptError({
          message: result.action === "accept" ? "the client's answer has no text" : `the user ${result.action === "decline" ? "declined" : "cancelled"} the question`
        }))
      }))
  })
  const sampling = capabilities?.sampling === undefined ? undefined : Sampling.of({
    ask: (text, ask) =>
      Effect.tryPromise({
        try: () =>
          server.createMessage({
            messages: [{ role: "user", content: { type: "text", text } }],
            maxTokens: ask?.maxTokens ?? 1024
          }, options),
        catch: (error) => new SamplingError({ message: `the client's model gave no answer (${describe(error)})` })
      }).pipe(Effect.flatMap((result) =>
        result.content.type === "text"
          ? Effect.succeed(result.content.text)
          : Effect.fail(new SamplingError({ message: `the client's model answered ${result.content.type}, not text` }))
      ))
  })
  const prompted = prompt === undefined ? context : Context.add(context, UserPrompt, prompt)
  return sampling === undefined ? prompted : Context.add(prompted, Sampling, sampling)
}

/** A server of one connection (stdio) or one session (HTTP), and how to close it. */
interface Served {
  readonly server: Server
  /** Closes the transport (which aborts the calls in flight) and waits for those calls' finalizers. */
  readonly close: Effect.Effect<void>
}

/** A low-level MCP `Server` for the toolkit, running calls on `runtime`. */
const makeServer = (
  toolkit: Toolkit.Toolkit<any>,
  listed: ReadonlyArray<Listed>,
  runtime: Runtime.Runtime<any>,
  // One validator for every session: the SDK's default builds an Ajv instance (~100 KB) per server.
  validator: AjvJsonSchemaValidator,
  // Notifications of a call on the request's stream (stdio), or on the session's (HTTP, JSON answers).
  related: boolean,
  options?: Options
): Served => {
  const server = new Server(
    { name: options?.name ?? "agent-tools", version: options?.version ?? "0.1.0" },
    { capabilities: { tools: {}, logging: {} }, jsonSchemaValidator: validator }
  )
  const listedByName = new Map(listed.map((l) => [l.entry.name, l]))
  const tools = listed.map((l) => l.entry)
  const inFlight = new Set<Promise<unknown>>()
  // The session's hook state (design: Hooks): every call of this server shares it; it goes with the server.
  const run = new RunState("session")
  const outcomes = new Reuse.Outcomes({ joinInFlight: false, maxBytes: options?.maxReusedBytes ?? reuseDefaults.maxReusedBytes })
  // Calls start on this fiber's services and fiber refs, each with its own services added (`CallOf`).
  const serving = servingFiber(runtime)
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools }))
  // A call that completes synchronously is answered at once, without a promise of ours.
  server.setRequestHandler(CallToolRequestSchema, (request, extra): CallToolResult | Promise<CallToolResult> => {
    const tool = toolkit.byName.get(request.params.name)
    if (tool === undefined) {
      // A protocol error, as MCP's clients expect, with the text every face gives (design: Error text).
      throw protocolError(ErrorCode.InvalidParams, Toolkit.unknownTool(toolkit, request.params.name).text)
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
    const parentSpan = parseTraceparent(request.params._meta?.traceparent)
    const options = { toolCallId: `mcp-${String(extra.requestId)}`, run, reuse: outcomes, parentSpan }
    let started: Pipeline.Started
    try {
      started = Pipeline.start(callOf(serving, context), tool, request.params.arguments ?? {}, options)
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

// A reason goes to a log line: the client's text inside a parse error must not make it unbounded.
const reasonOf = (error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  return text.length > 300 ? `${text.slice(0, 300)}...` : text
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
): Effect.Effect<void, McpStdioError, Exclude<R, ToolContext.ToolContext>> =>
  Effect.scoped(Effect.gen(function*() {
    const runtime = yield* Effect.runtime<Exclude<R, ToolContext.ToolContext>>()
    // Tools on worker threads: their workers are up before the first request is read.
    yield* prepareWorkers(toolkit.tools)
    const stdin = options?.stdin ?? process.stdin
    const stdout = options?.stdout ?? process.stdout
    const served = makeServer(toolkit, listOf(toolkit), runtime, new AjvJsonSchemaValidator(), true, options)
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
  /** Open sessions at most: past it, `initialize` is answered 503 with a JSON-RPC error. Default 1,000. */
  readonly maxSessions?: number | undefined
  /** A session without a request (none in flight, no GET stream open) for this long is closed. Default 10 minutes. */
  readonly sessionIdleTimeout?: Duration.DurationInput | undefined
}

/** The defaults of `HttpOptions`' limits. */
export const httpDefaults = {
  // The 1 MiB argument limit (Invocation) plus JSON-RPC framing, with room to spare; the SDK's own default.
  maxBodyBytes: 4 * 1024 * 1024,
  maxBodyDepth: 512,
  maxSessions: 1_000,
  sessionIdleTimeout: Duration.minutes(10)
} as const

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

type Body = { readonly _tag: "Read"; readonly text: string } | { readonly _tag: "TooLarge" }

/**
 * The request body, or TooLarge as soon as more than `maxBytes` arrived (or were declared): a
 * client cannot make the server hold more than the limit. The rest of the body is not read; the 413
 * closes the connection.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, maxBytes: number): Effect.Effect<Body, Error> => {
  if (Number(request.headers["content-length"]) > maxBytes) return Effect.succeed({ _tag: "TooLarge" })
  const source = NodeHttpServerRequest.toIncomingMessage(request)
  return Effect.async<Body, Error>((resume) => {
    const chunks: Array<Buffer> = []
    let received = 0
    const stop = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    const onData = (chunk: Buffer) => {
      received += chunk.length
      if (received <= maxBytes) return void chunks.push(chunk)
      stop()
      chunks.length = 0
      source.pause()
      resume(Effect.succeed({ _tag: "TooLarge" }))
    }
    const onEnd = () => {
      stop()
      resume(Effect.succeed({ _tag: "Read", text: Buffer.concat(chunks).toString("utf8") }))
    }
    const onError = (error: Error) => {
      stop()
      resume(Effect.fail(error))
    }
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    return Effect.sync(stop)
  })
}

const jsonRpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson({ jsonrpc: "2.0", error: { code, message }, id: null }, { status, headers })

/** One session's server and transport, and what its expiry looks at. */
interface Session {
  readonly served: Served
  readonly transport: WebStandardStreamableHTTPServerTransport
  /** Requests being answered and GET streams open: a busy session never expires. */
  busy: number
  /** When the last request began or ended (Clock millis). */
  lastActive: number
}

// The first bytes of a GET stream: Node holds the headers back until a body chunk, and the SDK sends none
// until there is a message or its first keep-alive (15 s); a client waiting for the headers would hang.
const streamOpened = new TextEncoder().encode(": stream open\n\n")

/** The SSE body with `streamOpened` first, and `onEnd` once when it ends or the client goes away. */
const openedStream = (body: ReadableStream<Uint8Array>, onEnd: () => void): ReadableStream<Uint8Array> => {
  const reader = body.getReader()
  let ended = false
  const end = () => {
    if (ended) return
    ended = true
    onEnd()
  }
  return new ReadableStream<Uint8Array>({
    start: (controller) => controller.enqueue(streamOpened),
    pull: async (controller) => {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }))
      if (next.done) {
        end()
        controller.close()
      } else {
        controller.enqueue(next.value)
      }
    },
    cancel: (reason) => {
      end()
      return reader.cancel(reason)
    }
  })
}

/** A POST's body, read once within `maxBodyBytes` and parsed, or the answer that refuses it (413, 400). */
const readPost = (
  request: HttpServerRequest.HttpServerRequest,
  maxBodyBytes: number,
  maxBodyDepth: number
): Effect.Effect<{ readonly parsedBody: unknown } | HttpServerResponse.HttpServerResponse> =>
  Effect.gen(function*() {
    const body = yield* Effect.either(readBody(request, maxBodyBytes))
    if (body._tag === "Right" && body.right._tag === "TooLarge") {
      // The unread rest of the body is not worth reading: the connection closes after the answer.
      return jsonRpcError(413, -32600, `the request body is over the limit of ${maxBodyBytes} bytes`, {
        connection: "close"
      })
    }
    const text = body._tag === "Right" && body.right._tag === "Read" ? body.right.text : undefined
    if (text !== undefined && Json.textDeeperThan(text, maxBodyDepth)) {
      return jsonRpcError(400, -32700, `Parse error: the body is nested deeper than ${maxBodyDepth} levels`)
    }
    const parsed = text === undefined ? undefined : yield* Effect.option(Effect.try(() => JSON.parse(text) as unknown))
    if (parsed === undefined || parsed._tag === "None") return jsonRpcError(400, -32700, "Parse error: the body is not JSON")
    return { parsedBody: parsed.value }
  })

/** What the HTTP face holds: its limits, its sessions (open, and opening) and how a new one is served. */
interface HttpFace {
  readonly host: string
  readonly maxBodyBytes: number
  readonly maxBodyDepth: number
  readonly maxSessions: number
  readonly idleMillis: number
  readonly clock: Clock.Clock
  readonly sessions: Map<string, Session>
  /** Sessions being created (an `initialize` in progress): they count towards the cap too. */
  opening: number
  /** A new session's server, its transport's session ids from the id service. */
  readonly serve: () => Served
  readonly sessionId: () => string
}

/** A request to the MCP path: checked (host, origin, body), then to its session, or a new one for `initialize`. */
const handleHttp = (face: HttpFace, request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const refused = foreignRequest(request, face.host)
    if (refused !== undefined) return HttpServerResponse.text(refused, { status: 403 })
    // The body is read once, here, and handed to the transport parsed: the web Request has none.
    let parsedBody: unknown = undefined
    if (request.method === "POST") {
      const read = yield* readPost(request, face.maxBodyBytes, face.maxBodyDepth)
      if (!("parsedBody" in read)) return read
      parsedBody = read.parsedBody
    }
    const url = HttpServerRequest.toURL(request)
    const web = new Request(url._tag === "Some" ? url.value : "http://127.0.0.1/mcp", {
      method: request.method,
      headers: request.headers
    })
    const sessionId = request.headers["mcp-session-id"]
    const known = sessionId === undefined ? undefined : face.sessions.get(sessionId)
    if (sessionId !== undefined && known === undefined) {
      return HttpServerResponse.text("unknown or closed MCP session", { status: 404 })
    }
    if (known !== undefined) return yield* inSession(face, known, web, parsedBody)
    if (isInitializeRequest(parsedBody) && face.sessions.size + face.opening >= face.maxSessions) {
      return jsonRpcError(
        503,
        -32000,
        `the server has its maximum of ${face.maxSessions} MCP sessions open; close one (DELETE) or retry later`,
        { "retry-after": String(Math.ceil(face.idleMillis / 1000)) }
      )
    }
    // A new session: its first request must be `initialize` (the transport answers 400 otherwise).
    face.opening++
    return yield* Effect.ensuring(openSession(face, web, parsedBody), Effect.sync(() => face.opening--))
  })

/** A request or a GET stream begins or ends in `session`: it is busy meanwhile, and active as of now. */
const busy = (face: HttpFace, session: Session, by: 1 | -1) => {
  session.busy += by
  session.lastActive = face.clock.unsafeCurrentTimeMillis()
}

/** A request of a known session, through its transport; a GET stream keeps the session busy until it ends. */
const inSession = (face: HttpFace, session: Session, web: Request, parsedBody: unknown) =>
  Effect.gen(function*() {
    busy(face, session, 1)
    const transport = session.transport
    const response = yield* Effect.promise(() => transport.handleRequest(web, { parsedBody })).pipe(
      // The HTTP request closed before its answer: cancel its calls, as notifications/cancelled would.
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          busy(face, session, -1)
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
    const stream = web.method === "GET" && response.body !== null &&
      (response.headers.get("content-type") ?? "").startsWith("text/event-stream")
    if (!stream) {
      busy(face, session, -1)
      return HttpServerResponse.fromWeb(response)
    }
    return HttpServerResponse.fromWeb(
      new Response(openedStream(response.body!, () => busy(face, session, -1)), {
        status: response.status,
        headers: response.headers
      })
    )
  })

/** A new session: its server and transport, kept once the transport names it (its `initialize` went through). */
const openSession = (face: HttpFace, web: Request, parsedBody: unknown) =>
  Effect.gen(function*() {
    const served = face.serve()
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: face.sessionId,
      enableJsonResponse: true,
      onsessioninitialized: (id) =>
        void face.sessions.set(id, { served, transport, busy: 0, lastActive: face.clock.unsafeCurrentTimeMillis() }),
      onsessionclosed: (id) => void face.sessions.delete(id)
    })
    yield* Effect.promise(() => served.server.connect(transport))
    const response = yield* Effect.promise(() => transport.handleRequest(web, { parsedBody }))
    if (transport.sessionId === undefined) yield* served.close
    return HttpServerResponse.fromWeb(response)
  })

/**
 * The idle sessions closed: checked every tenth of the timeout (at most a minute), so a session ends
 * between 1x and 1.1x the timeout idle; every session closed when the face's scope ends.
 */
const expireIdle = (face: HttpFace) =>
  Effect.gen(function*() {
    const closeAll = (all: Iterable<Session>) =>
      Effect.forEach(all, (session) => session.served.close, { concurrency: "unbounded", discard: true })
    const expire = Effect.suspend(() => {
      const now = face.clock.unsafeCurrentTimeMillis()
      const idle: Array<Session> = []
      for (const [id, session] of face.sessions) {
        if (session.busy === 0 && now - session.lastActive >= face.idleMillis) {
          face.sessions.delete(id)
          idle.push(session)
        }
      }
      return closeAll(idle)
    })
    const period = Duration.millis(Math.max(1, Math.min(face.idleMillis / 10, 60_000)))
    yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(period), expire)))
    yield* Effect.addFinalizer(() => closeAll(face.sessions.values()))
  })

/**
 * Serves the toolkit over Streamable HTTP at `http://host:port/mcp`, with sessions (so that a
 * `notifications/cancelled` reaches the server running the call, and interrupts it), JSON responses
 * to POSTs and one SSE stream per session on GET. Host and Origin must name this machine. Limits
 * (`httpDefaults`): a body limit counted while reading (413), a session cap (503 to `initialize`)
 * and an idle expiry, which closes the session and frees it.
 */
export const layerHttp = <R>(toolkit: Toolkit.Toolkit<R>, options: HttpOptions) => {
  const host = options.host ?? "127.0.0.1"
  const listed = listOf(toolkit)
  const route = HttpLayerRouter.use((router) =>
    Effect.gen(function*() {
      const runtime = yield* Effect.runtime<Exclude<R, ToolContext.ToolContext>>()
      yield* prepareWorkers(toolkit.tools)
      const ids = yield* Ids
      const validator = new AjvJsonSchemaValidator()
      const face: HttpFace = {
        host,
        maxBodyBytes: options.maxBodyBytes ?? httpDefaults.maxBodyBytes,
        maxBodyDepth: options.maxBodyDepth ?? httpDefaults.maxBodyDepth,
        maxSessions: options.maxSessions ?? httpDefaults.maxSessions,
        idleMillis: Duration.toMillis(options.sessionIdleTimeout ?? httpDefaults.sessionIdleTimeout),
        clock: yield* Effect.clock,
        sessions: new Map(),
        opening: 0,
        serve: () => makeServer(toolkit, listed, runtime, validator, false, options),
        sessionId: () => ids.make("session")
      }
      yield* expireIdle(face)
      yield* router.add("*", options.path ?? "/mcp", (request) => handleHttp(face, request))
    })
  )
  return HttpLayerRouter.serve(route, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: options.port, host }))
  )
}
