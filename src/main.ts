/**
 * The one main program: every piece a Layer, wired here, behind a CLI. Each command is one Layer (its
 * services provided to what it does; `internal/cli/command.ts`), built from the command line's options
 * and the settings, which are read through Effect's `Config` only: the `ConfigProvider` in force (the
 * default, the environment, here) decides them, so a command's layer runs as well on a map of settings.
 *
 *   tsx src/main.ts [demo]              the demo, end to end on embedded defaults
 *   tsx src/main.ts platform            the platform alone (--port, --host, --tokens, --journal)
 *   tsx src/main.ts serve               the demo tools, served to PLATFORM_URL
 *   tsx src/main.ts mcp [--http]        the demo tools over MCP (stdio, or HTTP with --port)
 *   tsx src/main.ts run "<prompt>"      an agent run in this process with the demo tools
 *   tsx src/main.ts approve             decides a call a suspended platform task waits for (--task, --call, --deny)
 *   tsx src/main.ts submit "<prompt>"   a task submitted as a client of an agent (--agent), followed to its end
 *   tsx src/main.ts tasks|approvals|agents   the operator API (/api/v1) from the command line
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
 * approve, submit, and tasks, approvals and agents, which speak the operator API's HTTP), the settings (`internal/cli/settings.ts`) and what the commands share are in `internal/cli/`.
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
import type * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
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
import { agents, approvals, operateTree, tasks } from "./internal/cli/operate.js"
import { submit } from "./internal/cli/submit.js"
import { runCommand, untilStopped } from "./internal/cli/command.js"
import { chooseMcpJournal, chooseMcpOAuth, type McpOAuthFlags, mcpJournalOption, mcpOAuthOptions, refuseMcpOAuthFlags } from "./internal/cli/mcpOptions.js"
import { decideDemo, fromOwnMcpServer, stayForConsole, terminalApprover } from "./internal/cli/demo.js"
import { load, loadDemo, loadModel } from "./internal/cli/load.js"
import { BadOptions, chooseModel, modelOption } from "./internal/cli/options.js"
import { databaseOption, platformOptions } from "./internal/cli/platformOptions.js"
import { listenFailure, plural, reportFatal } from "./internal/cli/report.js"
import { run } from "./internal/cli/run.js"
import { chooseTools, serve, toolsOption } from "./internal/cli/serve.js"
import {
  logLevel,
  mcpTokens,
  platformDatabase,
  platformSettings,
  settingsUsable,
  tokenPairs
} from "./internal/cli/settings.js"
import * as Telemetry from "./Telemetry.js"
import { isPostgresUrl, redactUrl } from "./internal/util/settings.js"

// ---------------------------------------------------------------------------------------------
// demo

const jsonOption = Options.boolean("json").pipe(Options.withDescription("print the events as NDJSON instead of lines"))

/** The demo platform's options: its agent's token, and the console with an admin's token made for the run (docs: console). */
const demoOptions = (token: string, agentId: string, operatorToken: string) => ({
  tokens: new Map([[token, agentId]]),
  operatorTokens: [{ token: Redacted.make(operatorToken), role: "admin" as const, name: "demo" }],
  console: true
})

/** The console's URL of the platform whose WebSocket is at `url`. */
const consoleUrl = (url: string) => url.replace(/^ws/, "http").replace(/\/rpc$/, "/console")

const runDemo = (options: { readonly model: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function*() {
    const { model, note } = yield* chooseModel(options.model)
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
    const [token, operatorToken] = [randomUUID(), randomUUID()]
    const platform = yield* Layer.build(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provide(PlatformServer.layerHandlers(demoOptions(token, agentId, operatorToken))),
        // Journaled (in memory): a task whose refund needs approval waits for it, durably.
        Layer.provide(Layer.merge(modelLayer, Journal.layerMemory))
      )
    ).pipe(Logger.withMinimumLogLevel(LogLevel.Warning)) // The platform's own lines (connections, tasks) stay out of the view.
    const url = yield* Effect.provide(PlatformServer.url, platform)
    view.line(`platform listening on ${url}; console at ${consoleUrl(url)} while the demo runs (operator token ${operatorToken})`)
    const settings = Layer.setConfigProvider(ConfigProvider.fromMap(
      new Map([["AGENT_ID", agentId], ["PLATFORM_TOKEN", token], ["PLATFORM_URL", url]])
    ))
    const observer = Layer.succeed(Invocation.InvocationObserver, { onRetry: (event) => view.retry(event) })
    // Hooks on the serving side: a log line per call, and approval for issue_refund: the platform's task waits for
    // it (TaskSuspended); a person decides it (terminal, or console), else the demo's code approves it, and says so.
    const hooks = Hooks.layer({ tool: [Hooks.logging, Hooks.approval] })
    const ask = yield* terminalApprover(options.json, UserPrompt, Shipped, consoleUrl(url))
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
    yield* stayForConsole(ask, view)
  }).pipe(Effect.scoped)

/**
 * The `demo` command as one Layer: its model from `--model` or the settings. The platform, the serving process
 * and the MCP server it starts are its own, in this process: layers it builds and closes itself (`runDemo`).
 */
const demoLayer = (options: { readonly model: Option.Option<string>; readonly json: boolean }) =>
  Layer.effectDiscard(runDemo(options))

const demo = Command.make("demo", { model: modelOption, json: jsonOption }, (options) => runCommand(demoLayer(options))).pipe(
  Command.withDescription("Run the demo: platform, serving and a task, end to end in this process (the default)")
)

// ---------------------------------------------------------------------------------------------
// platform

/** The database URL chosen, or "" for none; a warning when it came on the command line. */
const chooseDatabase = (option: Option.Option<string>) =>
  Effect.gen(function*() {
    if (Option.isSome(option)) {
      yield* Effect.logWarning("--database puts the database's password on the command line, where every local " +
        "user can read it; prefer PLATFORM_DATABASE")
      return option.value
    }
    return Redacted.value(yield* platformDatabase)
  })

/** The `SqlClient` on the cluster's PostgreSQL: waits while it cannot be reached, fails naming why it refused. */
const loadDatabase = (url: string) =>
  Effect.map(load(() => import("./platform/ClusterDatabase.js")), ([ClusterDatabase]) => ClusterDatabase.layerClient(url))

/** The `platform migrate` command as one Layer: the schema made on the database the options or the settings give. */
const migrateLayer = ({ database }: { readonly database: Option.Option<string> }) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const url = yield* chooseDatabase(database)
    if (url === "") {
      return yield* new BadOptions({ message: "platform migrate needs the cluster's database: --database or PLATFORM_DATABASE" })
    }
    const [Cluster] = yield* load(() => import("./platform/Cluster.js"))
    return Layer.effectDiscard(
      Effect.zipRight(Cluster.migrate, Effect.logInfo(`the cluster's schema is ready on ${redactUrl(url)}`))
    ).pipe(Layer.provide(yield* loadDatabase(url)))
  }))

const migrate = Command.make("migrate", { database: databaseOption }, (options) => runCommand(migrateLayer(options))).pipe(Command.withDescription("Cluster mode: create the schema on the database, once, before the runners start"))

/**
 * The platform's layer as a command: kept until the process is stopped, `said(url)` logged once it listens: the URL
 * it got (with `--port 0`, the port the system gave), never one it does not listen on.
 */
const listening = <E, R>(
  PlatformServer: typeof import("./platform/Server.js"),
  layer: Layer.Layer<import("./platform/WebSocket.js").Listening, E, R>,
  said: (url: string) => string
) => untilStopped(Layer.tap(layer, (context) => Effect.flatMap(Effect.provide(PlatformServer.url, context), (url) => Effect.logInfo(said(url)))))

/** The console's settings from `--console` and `--trace-url`, and what the start line says of it. */
const consoleOf = (options: PlatformOptions) => ({
  console: options.console ? { traceUrl: Option.getOrUndefined(options.traceUrl) } : undefined,
  said: (url: string) => options.console ? `, console at ${consoleUrl(url)}` : ""
})

/** The `platform` command's options, as parsed. */
type PlatformOptions = Command.Command.ParseConfig<typeof platformOptions>

/**
 * The platform's agents: its tokens (`--tokens-file`, `--tokens` or `PLATFORM_TOKENS`, in that order), and the
 * agents each may call (`PLATFORM_AGENT_CALLS`); either malformed, or no token, refuses the start.
 */
const platformAgents = (
  { tokens, tokensFile }: Pick<PlatformOptions, "tokens" | "tokensFile">,
  settings: Config.Config.Success<typeof platformSettings>,
  PlatformClient: typeof import("./PlatformClient.js"),
  PlatformServer: typeof import("./platform/Server.js")
) =>
  Effect.gen(function*() {
    if (Option.isSome(tokens)) {
      yield* Effect.logWarning("--tokens puts secrets on the command line, where every local user can read them; " +
        "prefer PLATFORM_TOKENS or --tokens-file")
    }
    const text = Option.isSome(tokensFile)
      ? yield* Effect.try({
        try: () => readFileSync(tokensFile.value, "utf8"),
        catch: (error) => new PlatformClient.MissingSetting({ variable: `a readable --tokens-file (${String(error)})` })
      })
      : Option.getOrElse(tokens, () => Redacted.value(settings.tokens))
    const source = Option.isSome(tokensFile) ? "--tokens-file" : Option.isSome(tokens) ? "--tokens" : "PLATFORM_TOKENS"
    const pairs = yield* tokenPairs(PlatformServer.parseTokens, text, source)
    // No tokens, no agents: refuse to start rather than serve nobody.
    if (pairs.size === 0) {
      return yield* new PlatformClient.MissingSetting({ variable: "PLATFORM_TOKENS (or --tokens-file, --tokens)" })
    }
    // Agents that call agents: every entry a pair, or the start is refused.
    yield* tokenPairs(PlatformServer.parseTokens, settings.agentCalls, "PLATFORM_AGENT_CALLS", {
      pair: "caller:callee",
      example: "support:billing,support:shipping"
    })
    const callsProblem = PlatformServer.agentCallsProblem(settings.agentCalls, new Set(pairs.values()))
    if (callsProblem !== undefined) {
      return yield* new BadOptions({
        message: `PLATFORM_AGENT_CALLS cannot be used: ${callsProblem}; the form is caller:callee pairs of the agents of ` +
          "PLATFORM_TOKENS, comma-separated or one a line, e.g. support:billing,support:shipping"
      })
    }
    return { pairs, agentCalls: PlatformServer.parseAgentCalls(settings.agentCalls) }
  })

/**
 * The platform's agents with a configuration file (`--config`): its settings per agent, its tokens (else those of the
 * options or settings, `platformAgents`), read again on SIGHUP for the tasks that start after. A file that cannot be
 * used refuses the start, naming the field.
 */
const configuredAgents = (
  file: string,
  options: PlatformOptions,
  settings: Config.Config.Success<typeof platformSettings>,
  PlatformClient: typeof import("./PlatformClient.js"),
  PlatformServer: typeof import("./platform/Server.js")
) =>
  Effect.gen(function*() {
    const [AgentConfig] = yield* load(() => import("./platform/AgentConfig.js"))
    const elsewhere = yield* Effect.either(platformAgents(options, settings, PlatformClient, PlatformServer))
    // Tokens of the settings: used when the file gives none; a malformed list refuses the start either way.
    if (Either.isLeft(elsewhere) && elsewhere.left._tag !== "MissingSetting") return yield* elsewhere.left
    const fallback = Either.isRight(elsewhere) ? elsewhere.right : { pairs: new Map<string, string>(), agentCalls: {} }
    const running = yield* AgentConfig.live(file, AgentConfig.modelsFrom(loadModel), fallback.pairs).pipe(
      Effect.mapError((error) => new BadOptions({ message: error.message }))
    )
    if (running.tokens.size === 0) {
      return yield* new PlatformClient.MissingSetting({ variable: `tokens in ${file} (or PLATFORM_TOKENS, --tokens-file, --tokens)` })
    }
    yield* AgentConfig.onSignal("SIGHUP", running.reload)
    return {
      pairs: running.tokens,
      agentCalls: fallback.agentCalls,
      agents: running.agents,
      named: running.agentIds(),
      options: running.options
    }
  })

/**
 * The `platform` command as one Layer: the platform on a WebSocket, until the process is stopped; its agents,
 * journal, database and model from the options or the settings. With a database, a runner of a cluster.
 */
const platformLayer = (options: PlatformOptions) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const { host, placement, port, runnerHost, runnerPort } = options
    const [PlatformClient, PlatformServer] = yield* load(
      () => import("./PlatformClient.js"),
      () => import("./platform/Server.js")
    )
    const settings = yield* platformSettings
    // The platform's own options (limits, expiries, intervals) come from the configuration file's top level.
    const { agentCalls, agents, named, options: fromFile, pairs } = Option.isSome(options.config)
      ? yield* configuredAgents(options.config.value, options, settings, PlatformClient, PlatformServer)
      : { ...yield* platformAgents(options, settings, PlatformClient, PlatformServer), agents: undefined, named: [], options: {} }
    const chosen = yield* chooseModel(options.model)
    const configured = Option.isSome(options.config)
      ? `, agents ${named.join(", ")} of ${options.config.value} (SIGHUP reloads it)`
      : ""
    const file = Option.getOrElse(options.journal, () => settings.journal)
    const { console: consolePages, said } = consoleOf(options)
    const url = yield* chooseDatabase(options.database)
    if (url !== "") {
      // Cluster mode: a runner; its tasks journal to the cluster's database, not to a file.
      if (file !== "") {
        return yield* new BadOptions({
          message: "--journal (or PLATFORM_JOURNAL) is the embedded platform's; a cluster's runner journals to its --database"
        })
      }
      const [Cluster] = yield* load(() => import("./platform/Cluster.js"))
      return listening(
        PlatformServer,
        PlatformServer.layerWebSocket({ port, host }).pipe(
          Layer.provide(
            Cluster.layer({
              ...fromFile,
              tokens: pairs,
              agentCalls,
              agents,
              console: consolePages,
              runner: { host: runnerHost, port: runnerPort, placement }
            })
          ),
          Layer.provide(yield* loadModel(chosen.model)),
          Layer.provide(yield* loadDatabase(url)),
          Layer.provide(options.metrics ? PlatformServer.layerPrometheus : Layer.empty)
        ),
        (at) =>
          `platform on ${at}, model ${chosen.model}, ` +
          `a runner of the cluster on ${redactUrl(url)} (runners reach it at ${runnerHost}:${runnerPort})${configured}${said(at)}`
      )
    }
    return listening(
      PlatformServer,
      PlatformServer.layerWebSocket({ port, host }).pipe(
        Layer.provide(
          PlatformServer.layerHandlers({
            ...fromFile,
            tokens: pairs,
            agentCalls,
            agents,
            console: consolePages,
            journal: file === "" ? undefined : file
          })
        ),
        Layer.provide(yield* loadModel(chosen.model)),
        Layer.provide(options.metrics ? PlatformServer.layerPrometheus : Layer.empty)
      ),
      (at) => `platform on ${at}, model ${chosen.model}, ` + (file === "" ? "tasks in memory" : `journal ${file}`) + configured + said(at)
    )
  }))

const platform = Command.make("platform", platformOptions, (options) => runCommand(platformLayer(options))).pipe(
  Command.withDescription("Run the platform alone, on a WebSocket; with --database, as a runner of a cluster"),
  Command.withSubcommands([migrate])
)

// ---------------------------------------------------------------------------------------------
// mcp

/** What the `mcp` command fails with once it has begun serving, or could not begin. */
type McpFailure = import("./Mcp.js").McpStdioError | import("@effect/platform/HttpServerError").ServeError | BadOptions

/**
 * The `mcp` command as one Layer: the demo tools (or `--tools`') over MCP, with the approval hook (a call that
 * needs approval asks the client's user, by elicitation; a client that cannot ask gets it refused). Over stdio,
 * until stdin closes; with `--http`, on 127.0.0.1 until the process is stopped, asking for the bearer tokens of
 * `MCP_TOKENS` when it is set.
 */
const mcpLayer = ({ http, journal, oauth: oauthFlags, port, tools }: {
  readonly http: boolean
  readonly journal: Option.Option<string>
  readonly oauth: McpOAuthFlags
  readonly port: number
  readonly tools: Option.Option<string>
}) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    // --port is --http's: over stdio it would be ignored, so it is refused.
    if (!http && process.argv.slice(2).some((arg) => arg === "--port" || arg.startsWith("--port="))) {
      return yield* new BadOptions({ message: "mcp: --port is the HTTP server's: add --http, or leave --port out to serve over stdio" })
    }
    if (!http) yield* refuseMcpOAuthFlags(oauthFlags)
    // Checked before the rest loads: a malformed MCP_TOKENS refuses the start, naming entries, never tokens.
    const tokens = yield* mcpTokens(http, Effect.map(load(() => import("./platform/Options.js")), ([Options]) => Options.parseTokens))
    const [[Mcp, Hooks], { layer, toolkit }] = yield* Effect.all([
      load(() => import("./Mcp.js"), () => import("./Hooks.js")),
      chooseTools(tools)
    ], { concurrency: "unbounded" })
    const services = Layer.merge(layer, Hooks.layer({ tool: [Hooks.approval] }))
    // Either way, served with what the tools need (the demo's backend, or the module's layer).
    type Backend = Layer.Layer.Success<typeof layer>
    const stdio: Layer.Layer<never, McpFailure, Backend> = Layer.effectDiscard(Mcp.serveStdio(toolkit))
    if (!http) return stdio.pipe(Layer.provide(services))
    const [HttpServer] = yield* load(() => import("@effect/platform/HttpServer"))
    // With a journal, tasks: kept in its file, taken back by the next start on it.
    const tasksFile = yield* chooseMcpJournal(journal)
    const oauth = yield* chooseMcpOAuth(tokens !== undefined, oauthFlags, [...toolkit.byName.keys()])
    const tasks = tasksFile === undefined ? Layer.empty : Mcp.Tasks.layerFromSetting(tasksFile).pipe(
      Layer.mapError((error) => new BadOptions({ message: error.message }))
    )
    const server = Mcp.layerHttp(toolkit, { port, ...(tokens === undefined ? {} : { tokens }), ...(oauth === undefined ? {} : { oauth }) }).pipe(
      Layer.provide(tasks),
      Layer.mapError((error) =>
        error._tag === "ServeError"
          ? new BadOptions({ message: `mcp cannot listen on 127.0.0.1:${port}: ${listenFailure(error.cause)}` })
          : error
      ),
      // Listening first, then said: a port in use is the start's failure, named, and nothing claims to listen.
      Layer.tap((context) => {
        const address = Context.get(context, HttpServer.HttpServer).address
        const at = address._tag === "TcpAddress" ? address.port : port
        return Effect.logInfo(
          `MCP over Streamable HTTP at http://127.0.0.1:${at}/mcp` +
            (tokens === undefined ? "" : `, for ${plural(tokens.size, "bearer token")} of MCP_TOKENS`) +
            (tasksFile === undefined ? "" : `, tasks in ${isPostgresUrl(tasksFile) ? redactUrl(tasksFile) : tasksFile}`) +
            (oauth === undefined ? "" : `, OAuth access tokens of ${oauth.issuer} for ${oauth.resource}`)
        )
      })
    )
    const served: Layer.Layer<never, McpFailure, Backend> = untilStopped(server)
    return served.pipe(Layer.provide(services))
  }))

const mcp = Command.make("mcp", {
  http: Options.boolean("http").pipe(Options.withDescription("serve over Streamable HTTP instead of stdio")),
  port: Cli.portOption("port", 8788, "the HTTP port (with --http)"),
  tools: toolsOption,
  journal: mcpJournalOption,
  oauth: mcpOAuthOptions
}, (options) => runCommand(mcpLayer(options))).pipe(
  Command.withDescription(
    "Serve the demo tools, or a module's (--tools), over MCP (with --http, MCP_TOKENS: bearer tokens required; " +
      "--oauth-issuer and --oauth-resource: OAuth access tokens)"
  )
)

// ---------------------------------------------------------------------------------------------

const root = Command.make("agent-tools", { model: modelOption, json: jsonOption }, (options) => runCommand(demoLayer(options))).pipe(
  Command.withDescription("Tools for language-model agents: one definition, run by agents, served to a platform, over MCP"),
  Command.withSubcommands([demo, platform, serve, mcp, run, approve, submit, tasks, approvals, agents])
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
    { name: "approve", command: approve },
    { name: "submit", command: submit },
    {
      name: "tasks",
      command: tasks,
      needsCommand: true,
      children: Object.entries(operateTree.tasks).map(([name, command]) => ({ name, command }))
    },
    {
      name: "approvals",
      command: approvals,
      needsCommand: true,
      children: Object.entries(operateTree.approvals).map(([name, command]) => ({ name, command }))
    },
    { name: "agents", command: agents }
  ]
}

/** The CLI, its logs at `level` (`LOG_LEVEL`, `DEBUG`; info when unset). */
const main = (level: LogLevel.LogLevel | undefined) =>
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
    Logger.withMinimumLogLevel(level ?? LogLevel.Info)
  )

// Every setting is read through Config, from the default ConfigProvider: the environment.
Effect.flatMap(logLevel, main).pipe(
  // What @effect/cli needs (no command executor or worker manager: not loaded for `--help`).
  Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer)),
  (program) => NodeRuntime.runMain(program, { disablePrettyLogger: true })
)
