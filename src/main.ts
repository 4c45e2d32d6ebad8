/**
 * The one main program: every piece a Layer, wired here, behind a CLI.
 *
 *   tsx src/main.ts [demo]              the demo, end to end on embedded defaults
 *   tsx src/main.ts platform            the platform alone (--port, --host, --tokens, --journal)
 *   tsx src/main.ts serve               the demo tools, served to PLATFORM_URL
 *   tsx src/main.ts mcp [--http]        the demo tools over MCP (stdio, or HTTP with --port)
 *   tsx src/main.ts run "<prompt>"      an agent run in this process with the demo tools
 *   tsx src/main.ts approve             decides a call a suspended platform task waits for (--task, --call, --deny)
 *
 * Only the CLI is imported up front: each command imports what it needs when it runs, so that
 * `--help` or a bad command line loads @effect/cli and no more, and `mcp` no platform, journal or
 * model provider. Start-up is most of what an MCP client waits for (`test/bench/startup.ts`).
 * For the same reason this file and the modules it imports up front (ToolResult, Timing, the
 * schedule stepper, internal/cli for the help and the usage, the commands' pieces in internal/cli/)
 * import Effect module by module, not from the `effect` barrel, which would load some 100 modules of
 * Effect that `--help` never runs; and the platform layer is the file system, path and terminal
 * @effect/cli needs, not `NodeContext` (a command executor and a worker manager).
 *
 * The commands that reach the platform's modules (`src/platform/`: demo, platform, mcp) are here,
 * the one module but `index.ts` outside that folder that may import it; the others (serve, run,
 * approve), the settings' checks and what the commands share are in `internal/cli/`.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import * as Cause from "effect/Cause"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import * as Cli from "./internal/cli.js"
import { approve } from "./internal/cli/approve.js"
import { decideDemo, fromOwnMcpServer, terminalApprover } from "./internal/cli/demo.js"
import { load, loadDemo, loadModel } from "./internal/cli/load.js"
import { BadOptions, chooseModel, modelOption } from "./internal/cli/options.js"
import { listenFailure, plural, reportFatal } from "./internal/cli/report.js"
import { run } from "./internal/cli/run.js"
import { serve } from "./internal/cli/serve.js"
import { logLevel, settingsUsable } from "./internal/cli/settings.js"
import * as Telemetry from "./Telemetry.js"
import { redactUrl } from "./internal/util/settings.js"

// ---------------------------------------------------------------------------------------------
// demo

const jsonOption = Options.boolean("json").pipe(Options.withDescription("print the events as NDJSON instead of lines"))

const runDemo = (options: { readonly model: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function*() {
    const { model, note } = chooseModel(options.model)
    const [
      { Backend, backendLayer, toolkit },
      modelLayer,
      [
        Demo,
        DemoAgents,
        { viewWithLogs },
        Hooks,
        Idempotency,
        Invocation,
        Journal,
        PlatformClient,
        PlatformServer,
        Serve,
        UserPrompt,
        Shipped
      ]
    ] = yield* Effect.all([
      loadDemo,
      loadModel(model),
      load(
        () => import("./demo/script.js"),
        () => import("./demo/agents.js"),
        () => import("./demo/view.js"),
        () => import("./Hooks.js"),
        () => import("./Idempotency.js"),
        () => import("./Invocation.js"),
        () => import("./Journal.js"),
        () => import("./PlatformClient.js"),
        () => import("./platform/Server.js"),
        () => import("./Serve.js"),
        () => import("./UserPrompt.js"),
        () => import("./internal/hooks/shipped.js")
      )
    ], { concurrency: "unbounded" })
    const view = yield* viewWithLogs({
      json: options.json,
      tty: process.stdout.isTTY === true,
      write: (text) => void process.stdout.write(text)
    })
    view.line(`model: ${model}${note === "" ? "" : ` (${note})`}`)
    const agentId = "demo-agent"
    const token = randomUUID()
    const platform = yield* Layer.build(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([[token, agentId]]) })),
        // Journaled (in memory): a task whose refund needs approval waits for it, durably.
        Layer.provide(Layer.merge(modelLayer, Journal.layerMemory))
      )
    )
    const url = yield* Effect.provide(PlatformServer.url, platform)
    view.line(`platform listening on ${url}`)
    const settings = Layer.setConfigProvider(ConfigProvider.fromMap(
      new Map([["AGENT_ID", agentId], ["PLATFORM_TOKEN", token], ["PLATFORM_URL", url]])
    ))
    const observer = Layer.succeed(Invocation.InvocationObserver, { onRetry: (event) => view.retry(event) })
    // Hooks on the serving side: a log line per call, and approval for issue_refund: the platform's
    // task waits for it (TaskSuspended); a person at the terminal decides it, else (CI, a pipe, --json)
    // the demo's code approves it, and says so.
    const hooks = Hooks.layer({ tool: [Hooks.logging, Hooks.approval] })
    const ask = yield* terminalApprover(options.json, UserPrompt, Shipped)
    const backend = yield* Layer.build(backendLayer)
    const withMcp = yield* fromOwnMcpServer(toolkit, "lookup_customer", backend)
    view.line(`${withMcp.taken} comes from an MCP server this demo started, at ${withMcp.url}; it runs through the pipeline like the others`)
    const tools = withMcp.toolkit
    let output = ""
    yield* Effect.gen(function*() {
      const served = yield* Serve.makeConfig(tools)
      view.line(`serving ${tools.tools.length} tools for ${agentId}: ${tools.tools.map((t) => t.name).join(", ")}`)
      view.line(`task: ${Demo.prompt}`)
      view.startSpinner()
      const client = yield* PlatformClient.PlatformClient
      yield* Stream.runForEach(served.submitTask(Demo.prompt), (event) =>
        Effect.gen(function*() {
          view.event(event)
          if (event._tag === "TaskCompleted") output = event.output
          if (event._tag === "TaskSuspended") yield* decideDemo(event, client, view, ask)
        }))
      view.stopSpinner()
      const refunds = yield* Effect.flatMap(Effect.provide(Backend.Billing, backend), (billing) => billing.refunds)
      if (!options.json) yield* Console.log(`\nanswer: ${output}`)
      view.finish(refunds)
      if (!options.json) yield* Console.log("")
      // Leaving this scope deregisters from the platform.
    }).pipe(
      Effect.scoped,
      // The platform is in this process too, in memory: the claims need outlive it no more than its tasks do.
      Effect.provide(
        Layer.mergeAll(PlatformClient.layer, observer, hooks, Idempotency.layerMemory).pipe(Layer.provideMerge(settings))
      ),
      Effect.provide(backend)
    )
    view.line("deregistered from the platform; connection closed")
    // Agents that call agents, in this process: support asks billing, an agent given to it as a tool.
    const answer = yield* DemoAgents.ask(model === "scripted" ? undefined : modelLayer).pipe(Effect.provide(backend))
    view.line(`sub-agent: support asked billing, an agent it has as a tool (Agent.asTool): ${answer}`)
  }).pipe(Effect.scoped)

const demo = Command.make("demo", { model: modelOption, json: jsonOption }, runDemo).pipe(
  Command.withDescription("Run the demo: platform, serving and a task, end to end in this process (the default)")
)

// ---------------------------------------------------------------------------------------------
// platform

/** The cluster's PostgreSQL URL (a secret: it carries a password), from `--database` or `PLATFORM_DATABASE`. */
const databaseOption = Options.text("database").pipe(
  Options.withDescription(
    "cluster mode: the PostgreSQL URL of the cluster's storage, postgres://user:password@host:port/db " +
      "(default: PLATFORM_DATABASE; unset: one process, embedded)"
  ),
  Options.optional
)

/** The database URL chosen, or "" for none; a warning when it came on the command line. */
const chooseDatabase = (option: Option.Option<string>) =>
  Effect.gen(function*() {
    if (Option.isSome(option)) {
      yield* Effect.logWarning("--database puts the database's password on the command line, where every local " +
        "user can read it; prefer PLATFORM_DATABASE")
      return option.value
    }
    return process.env.PLATFORM_DATABASE ?? ""
  })

/** The `SqlClient` on the cluster's PostgreSQL. */
const loadDatabase = (url: string) =>
  Effect.map(load(() => import("@effect/sql-pg")), ([{ PgClient }]) => PgClient.layer({ url: Redacted.make(url) }))

const migrate = Command.make("migrate", { database: databaseOption }, ({ database }) =>
  Effect.gen(function*() {
    const url = yield* chooseDatabase(database)
    if (url === "") {
      return yield* new BadOptions({ message: "platform migrate needs the cluster's database: --database or PLATFORM_DATABASE" })
    }
    const [Cluster] = yield* load(() => import("./platform/Cluster.js"))
    yield* Effect.provide(Cluster.migrate, yield* loadDatabase(url))
    yield* Effect.logInfo(`the cluster's schema is ready on ${redactUrl(url)}`)
  })).pipe(Command.withDescription("Cluster mode: create the schema on the database, once, before the runners start"))

/**
 * The token:agent pairs of `text` (from `source`); a malformed entry fails the start, named by its
 * position, not its text (a token is a secret).
 */
const tokenPairs = (
  parse: (text: string) => ReadonlyMap<string, string>,
  text: string,
  source: string,
  form: { readonly pair: string; readonly example: string } = {
    pair: "token:agent",
    example: "tok-1:agent-a,tok-2:agent-b"
  }
) => {
  const entries = text.split(/[,\n]/).map((entry) => entry.trim()).filter((entry) => entry !== "")
  const bad = entries.flatMap((entry, i) => parse(entry).size === 1 ? [] : [i + 1])
  return bad.length === 0
    ? Effect.succeed(parse(text))
    : Effect.fail(
      new BadOptions({
        message: `${source} is malformed: ${bad.length === 1 ? "entry" : "entries"} ${bad.join(", ")} of ${entries.length} ` +
          `${bad.length === 1 ? "is" : "are"} not ${form.pair}; the form is ${form.pair} pairs, comma-separated or one ` +
          `a line, e.g. ${form.example}`
      })
    )
}

/**
 * Runs the platform's layer until the process is stopped, logging `said(url)` once it listens: the URL it got
 * (with `--port 0`, the port the system gave), never one it does not listen on.
 */
const listening = <E, R>(
  layer: Layer.Layer<import("./platform/WebSocket.js").Listening, E, R>,
  said: (url: string) => string
) =>
  Effect.scoped(Effect.gen(function*() {
    const [PlatformServer] = yield* load(() => import("./platform/Server.js"))
    const context = yield* Layer.build(layer)
    yield* Effect.logInfo(said(yield* Effect.provide(PlatformServer.url, context)))
    return yield* Effect.never
  }))

const platform = Command.make("platform", {
  port: Cli.portOption("port", 8787, "the port to listen on, 0 for any free one"),
  host: Options.text("host").pipe(Options.withDescription("the address to bind"), Cli.withDefault("127.0.0.1")),
  tokens: Options.text("tokens").pipe(
    Options.withDescription(
      "token:agent pairs, comma-separated (default: PLATFORM_TOKENS; every local user sees a command line: " +
        "prefer PLATFORM_TOKENS or --tokens-file)"
    ),
    Options.optional
  ),
  tokensFile: Options.file("tokens-file", { exists: "yes" }).pipe(
    Options.withDescription("a file of token:agent pairs, one a line or comma-separated"),
    Options.optional
  ),
  journal: Options.text("journal").pipe(
    Options.withDescription(
      "a SQLite file journaling the tasks, so that a restarted platform resumes the unfinished ones " +
        "(default: PLATFORM_JOURNAL; unset: in memory)"
    ),
    Options.optional
  ),
  model: modelOption,
  database: databaseOption,
  runnerHost: Options.text("runner-host").pipe(
    Options.withDescription("cluster mode: the address other runners reach this one at"),
    Cli.withDefault("127.0.0.1")
  ),
  runnerPort: Cli.portOption("runner-port", 34431, "cluster mode: the port runners talk to each other on"),
  placement: Options.choice("placement", ["submitter", "id"]).pipe(
    Options.withDescription(
      "cluster mode: where a new task runs. submitter: on the runner its serving process is connected to. " +
        "id: spread over the runners by its id."
    ),
    Cli.withDefault("submitter")
  )
}, ({ database, host, journal, model, placement, port, runnerHost, runnerPort, tokens, tokensFile }) =>
  Effect.gen(function*() {
    const [PlatformClient, PlatformServer] = yield* load(
      () => import("./PlatformClient.js"),
      () => import("./platform/Server.js")
    )
    if (Option.isSome(tokens)) {
      yield* Effect.logWarning("--tokens puts secrets on the command line, where every local user can read them; " +
        "prefer PLATFORM_TOKENS or --tokens-file")
    }
    const text = Option.isSome(tokensFile)
      ? yield* Effect.try({
        try: () => readFileSync(tokensFile.value, "utf8"),
        catch: (error) => new PlatformClient.MissingSetting({ variable: `a readable --tokens-file (${String(error)})` })
      })
      : Option.getOrElse(tokens, () => process.env.PLATFORM_TOKENS ?? "")
    const source = Option.isSome(tokensFile) ? "--tokens-file" : Option.isSome(tokens) ? "--tokens" : "PLATFORM_TOKENS"
    const pairs = yield* tokenPairs(PlatformServer.parseTokens, text, source)
    // No tokens, no agents: refuse to start rather than serve nobody.
    if (pairs.size === 0) {
      return yield* new PlatformClient.MissingSetting({ variable: "PLATFORM_TOKENS (or --tokens-file, --tokens)" })
    }
    // Agents that call agents: every entry a pair, or the start is refused.
    const callsText = process.env.PLATFORM_AGENT_CALLS ?? ""
    yield* tokenPairs(PlatformServer.parseTokens, callsText, "PLATFORM_AGENT_CALLS", {
      pair: "caller:callee",
      example: "support:billing,support:shipping"
    })
    const callsProblem = PlatformServer.agentCallsProblem(callsText, new Set(pairs.values()))
    if (callsProblem !== undefined) {
      return yield* new BadOptions({
        message: `PLATFORM_AGENT_CALLS cannot be used: ${callsProblem}; the form is caller:callee pairs of the agents of ` +
          "PLATFORM_TOKENS, comma-separated or one a line, e.g. support:billing,support:shipping"
      })
    }
    const agentCalls = PlatformServer.parseAgentCalls(callsText)
    const chosen = chooseModel(model)
    const file = Option.getOrElse(journal, () => process.env.PLATFORM_JOURNAL ?? "")
    const url = yield* chooseDatabase(database)
    if (url !== "") {
      // Cluster mode: a runner; its tasks journal to the cluster's database, not to a file.
      if (file !== "") {
        return yield* new BadOptions({
          message: "--journal (or PLATFORM_JOURNAL) is the embedded platform's; a cluster's runner journals to its --database"
        })
      }
      const [Cluster] = yield* load(() => import("./platform/Cluster.js"))
      return yield* listening(
        PlatformServer.layerWebSocket({ port, host }).pipe(
          Layer.provide(Cluster.layer({ tokens: pairs, agentCalls, runner: { host: runnerHost, port: runnerPort, placement } })),
          Layer.provide(yield* loadModel(chosen.model)),
          Layer.provide(yield* loadDatabase(url))
        ),
        (at) =>
          `platform on ${at}, model ${chosen.model}, ` +
          `a runner of the cluster on ${redactUrl(url)} (runners reach it at ${runnerHost}:${runnerPort})`
      )
    }
    return yield* listening(
      PlatformServer.layerWebSocket({ port, host }).pipe(
        Layer.provide(
          PlatformServer.layerHandlers({ tokens: pairs, agentCalls, journal: file === "" ? undefined : file })
        ),
        Layer.provide(yield* loadModel(chosen.model))
      ),
      (at) => `platform on ${at}, model ${chosen.model}, ` + (file === "" ? "tasks in memory" : `journal ${file}`)
    )
  })).pipe(
  Command.withDescription("Run the platform alone, on a WebSocket; with --database, as a runner of a cluster"),
  Command.withSubcommands([migrate])
)

// ---------------------------------------------------------------------------------------------
// mcp

const mcp = Command.make("mcp", {
  http: Options.boolean("http").pipe(Options.withDescription("serve over Streamable HTTP instead of stdio")),
  port: Cli.portOption("port", 8788, "the HTTP port (with --http)")
}, ({ http, port }) =>
  Effect.gen(function*() {
    // --port is --http's: over stdio it would be ignored, so it is refused.
    if (!http && process.argv.slice(2).some((arg) => arg === "--port" || arg.startsWith("--port="))) {
      return yield* new BadOptions({ message: "mcp: --port is the HTTP server's: add --http, or leave --port out to serve over stdio" })
    }
    // Checked before anything loads: a malformed MCP_TOKENS refuses the start, naming entries, never tokens.
    const tokens = yield* mcpTokens(http)
    const [[Mcp, Hooks], { backendLayer, toolkit }] = yield* Effect.all([
      load(() => import("./Mcp.js"), () => import("./Hooks.js")),
      loadDemo
    ], { concurrency: "unbounded" })
    // A refund asks the client's user (elicitation); a client that cannot ask gets it refused.
    const services = Layer.merge(backendLayer, Hooks.layer({ tool: [Hooks.approval] }))
    if (!http) return yield* Mcp.serveStdio(toolkit).pipe(Effect.provide(services))
    return yield* Effect.scoped(Effect.gen(function*() {
      // Listening first, then said: a port in use is the start's failure, named, and nothing claims to listen.
      const context = yield* Layer.build(Mcp.layerHttp(toolkit, { port, ...(tokens === undefined ? {} : { tokens }) })).pipe(
        Effect.catchTag("ServeError", (error) =>
          new BadOptions({ message: `mcp cannot listen on 127.0.0.1:${port}: ${listenFailure(error.cause)}` }))
      )
      const [HttpServer] = yield* load(() => import("@effect/platform/HttpServer"))
      const address = Context.get(context, HttpServer.HttpServer).address
      const at = address._tag === "TcpAddress" ? address.port : port
      yield* Effect.logInfo(
        `MCP over Streamable HTTP at http://127.0.0.1:${at}/mcp` +
          (tokens === undefined ? "" : `, for ${plural(tokens.size, "bearer token")} of MCP_TOKENS`)
      )
      return yield* Effect.never
    })).pipe(Effect.provide(services))
  })).pipe(Command.withDescription("Serve the demo tools over MCP (with --http, MCP_TOKENS: bearer tokens required)"))

/**
 * `MCP_TOKENS` (`token:name` pairs) for `mcp --http`: undefined when unset, or over stdio. Set, it must hold a
 * token: a value that holds none (empty, blanks, `" , "`) refuses the start rather than serve unauthenticated.
 */
const mcpTokens = (http: boolean) =>
  Effect.gen(function*() {
    const text = process.env.MCP_TOKENS
    if (!http || text === undefined) return undefined
    if (text.trim() === "") return yield* new BadOptions({ message: "MCP_TOKENS is set but holds no token:name pair" })
    const [PlatformOptions] = yield* load(() => import("./platform/Options.js"))
    const pairs = yield* tokenPairs(PlatformOptions.parseTokens, text, "MCP_TOKENS", {
      pair: "token:name",
      example: "tok-1:ide,tok-2:ci"
    })
    // Set but empty (" , "): refused, not served without the tokens someone meant to require.
    if (pairs.size === 0) return yield* new BadOptions({ message: "MCP_TOKENS is set but holds no token:name pair" })
    return pairs
  })

// ---------------------------------------------------------------------------------------------

const root = Command.make("agent-tools", { model: modelOption, json: jsonOption }, runDemo).pipe(
  Command.withDescription("Tools for language-model agents: one definition, run by agents, served to a platform, over MCP"),
  Command.withSubcommands([demo, platform, serve, mcp, run, approve])
)

const version = "0.1.0"

const cli = Command.run(root, { name: "agent-tools", version })

/** The commands, as typed, for the help and the usage of a bad command line. */
const tree: Cli.Node = {
  name: "agent-tools",
  command: root,
  children: [
    { name: "demo", command: demo },
    { name: "platform", command: platform, children: [{ name: "migrate", command: migrate }] },
    { name: "serve", command: serve },
    { name: "mcp", command: mcp },
    { name: "run", command: run },
    { name: "approve", command: approve }
  ]
}

Effect.flatMap(
  // `--help`, or a bad command line (what is wrong, then the usage; exit 2), before anything starts.
  Effect.zipRight(settingsUsable, Cli.preflight(tree, process.argv.slice(2), `agent-tools ${version}`)),
  (done) =>
    done === undefined
      ? Cli.withPlainConsole(cli(process.argv)).pipe(Effect.provideService(CliConfig.CliConfig, Cli.config))
      : done === 0
      ? Effect.void
      : Effect.sync(() => process.exit(done))
).pipe(
  // OTEL_EXPORTER_OTLP_ENDPOINT set: spans, logs and metrics exported (docs/observability.md); else nothing.
  Effect.provide(Telemetry.layerFromEnv({
    serviceName: "agent-tools",
    attributes: { "agent_tools.command": process.argv[2] ?? "" }
  })),
  // A bad command line preflight let through: @effect/cli has printed what is wrong; exit 2, no stack.
  Effect.catchIf(ValidationError.isValidationError, () =>
    Effect.sync(() => {
      process.exit(2)
    })),
  // Stopped by a signal: runMain ends the process; any other failure is reported, one line.
  Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : reportFatal(cause)),
  // stdout is the demo's view, or MCP's protocol messages: logs go to stderr.
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))),
  Logger.withMinimumLogLevel(logLevel ?? LogLevel.Info),
  // What @effect/cli needs (no command executor or worker manager: not loaded for `--help`).
  Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer)),
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
