/**
 * The demo's pieces beside its run (`src/main.ts`, `runDemo`): who approves at the terminal, the
 * decisions a suspended task waits for, and a tool taken from an MCP server the demo starts itself.
 * Imports Effect module by module, as main.ts does (start-up time); the rest when the demo runs.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { load } from "./load.js"
import { demoApprovals } from "./settings.js"

/** Who decides at the terminal: a person when stdin is one and the view is not JSON (no answer is a no); else nobody. */
export const terminalApprover = (
  json: boolean,
  UserPrompt: typeof import("../../UserPrompt.js"),
  Shipped: typeof import("../hooks/shipped.js"),
  consoleUrl: string
): Effect.Effect<Approver, never, import("@effect/platform/Terminal").Terminal> =>
  Effect.gen(function*() {
    // DEMO_APPROVALS=console: a person decides in the console (its approvals page), not here.
    if ((yield* Effect.orElseSucceed(demoApprovals, () => "")) === "console") return { inConsole: `${consoleUrl}#/approvals` }
    if (process.stdin.isTTY !== true || json) return undefined
    const person = yield* Effect.provide(UserPrompt.UserPrompt, UserPrompt.layerTerminal)
    return (toolName: string, input: unknown) => Effect.orElseSucceed(Shipped.askApproval(person, toolName, input), () => false)
  })

/**
 * Who decides the demo's approvals: a person at the terminal (a question), a person in the console (`inConsole`, the
 * page's URL), or (undefined) the demo's code.
 */
export type Approver =
  | ((toolName: string, input: unknown) => Effect.Effect<boolean>)
  | { readonly inConsole: string }
  | undefined

/**
 * With its approvals decided in the console, the demo stays up once it is done, for the console to be read, until it
 * is stopped (Ctrl-C); else it ends.
 */
export const stayForConsole = (ask: Approver, view: import("../../demo/view.js").LiveView): Effect.Effect<void> =>
  ask === undefined || typeof ask === "function"
    ? Effect.void
    : Effect.zipRight(Effect.sync(() => view.line("the platform and its console stay up until this is stopped (Ctrl-C)")), Effect.never)

/**
 * Decides the calls a suspended demo task waits for: asked at the terminal (`ask`), the same call asked
 * twice in a turn (the refund) one question; in the console, nothing here (the page's URL is said); with no one to
 * ask, the demo's code approves, and says so.
 */
export const decideDemo = (
  event: Extract<import("../../protocol/Protocol.js").TaskEvent, { readonly _tag: "TaskSuspended" }>,
  client: import("../../PlatformClient.js").PlatformClient["Type"],
  view: import("../../demo/view.js").LiveView,
  ask: Approver
) =>
  Effect.gen(function*() {
    if (ask !== undefined && typeof ask !== "function") {
      view.stopSpinner()
      const calls = event.pending.map((p) => `${p.toolName} ${p.toolCallId}`).join(", ")
      view.line(`${calls} ${event.pending.length === 1 ? "waits" : "wait"} for a decision in the console: ${ask.inConsole}`)
      return view.startSpinner()
    }
    const answers = new Map<string, boolean>()
    for (const pending of event.pending) {
      if (ask === undefined) {
        view.approvedByDemo(pending.toolCallId, pending.toolName)
        yield* client.approve(event.taskId, pending.toolCallId)
        continue
      }
      const question = `${pending.toolName} ${JSON.stringify(pending.input)}`
      let yes = answers.get(question)
      if (yes === undefined) {
        view.stopSpinner()
        yes = yield* ask(pending.toolName, pending.input)
        answers.set(question, yes)
        view.startSpinner()
      }
      view.decidedByPerson(pending.toolCallId, pending.toolName, yes)
      yield* yes ? client.approve(event.taskId, pending.toolCallId) : client.deny(event.taskId, pending.toolCallId)
    }
  })

/**
 * The demo's toolkit with one tool (`name`) taken from an MCP server the demo starts itself, on
 * 127.0.0.1 over Streamable HTTP, serving that tool alone (`Mcp.layerHttp`, then `Mcp.toolkit`):
 * remote MCP tools are tools like the others. Server and connection close with the demo's scope.
 */
export const fromOwnMcpServer = <R>(
  local: import("../../Toolkit.js").Toolkit<R>,
  name: string,
  services: Context.Context<Exclude<R, import("../../ToolContext.js").CallServices>>
) =>
  Effect.gen(function*() {
    const [Mcp, HttpServer, Toolkit] = yield* load(
      () => import("../../Mcp.js"),
      () => import("@effect/platform/HttpServer"),
      () => import("../../Toolkit.js")
    )
    // Tools of `local` (filtered, so typed as any tool): they need what `local` needs.
    const own: import("../../Toolkit.js").Toolkit<R> = yield* Toolkit.make(...local.tools.filter((tool) => tool.name === name))
    const server = yield* Layer.build(Mcp.layerHttp(own, { port: 0 }).pipe(Layer.provide(Layer.succeedContext(services))))
    const address = Context.get(server, HttpServer.HttpServer).address
    const url = `http://127.0.0.1:${address._tag === "TcpAddress" ? address.port : 0}/mcp`
    const remote = yield* Mcp.toolkit({ url })
    const toolkit: import("../../Toolkit.js").Toolkit<R> = yield* Toolkit.make(
      ...local.tools.filter((tool) => tool.name !== name),
      ...(yield* remote.tools)
    )
    return { toolkit, url, taken: name }
  })
