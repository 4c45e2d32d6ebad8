/**
 * The command line for operating the platform, in this process against an embedded platform on a real port
 * (its WebSocket and its operator API): each command run as the CLI parses it (`Command.run`), its settings from
 * a map (`ConfigProvider.fromMap`), what it prints read back (`Output`). `serve --tools` serves a fixture module's
 * tools; `submit` submits tasks as another client of the agent, follows them (`--json`) or leaves them
 * (`--detach`); `tasks`, `approvals` and `agents` read and decide through the operator API, and a refusal fails
 * the command with the API's status and reason (the process exits 1 on it: test/cliOperateProcess.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Command from "@effect/cli/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { ConfigProvider, Context, Effect, Exit, Layer, Logger, LogLevel, Option, Redacted, Schedule, Scope } from "effect"
import { Journal, LanguageModel } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { runCommand } from "../src/internal/cli/command.js"
import * as Cli from "../src/internal/cli.js"
import { agents, approvals, operateTree, tasks } from "../src/internal/cli/operate.js"
import { OperatorApiError } from "../src/internal/cli/operatorApi.js"
import { Output } from "../src/internal/cli/print.js"
import { serveLayer } from "../src/internal/cli/serve.js"
import { submit, TaskNotCompleted } from "../src/internal/cli/submit.js"
import { resultsText } from "./support/platform.js"

const admin = "admin-token-0123456789"
const viewer = "viewer-token-0123456789"

/** Turn 1: a refund when the prompt asks for one, else a greeting; turn 2: what the model read. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  (request) => {
    const prompt = request.messages.find((m) => m._tag === "UserMessage")
    const text = prompt?._tag === "UserMessage" ? prompt.text : ""
    return text.includes("refund")
      ? {
        toolCalls: [{ id: "r1", name: "refund", arguments: JSON.stringify({ orderId: "A-1" }) }],
        usage: { inputTokens: 120, outputTokens: 7, cacheReadTokens: 100 }
      }
      : text.includes("stock")
      ? { toolCalls: [{ id: "s1", name: "stock", arguments: JSON.stringify({ sku: "X-9" }) }] }
      : { toolCalls: [{ id: "g1", name: "greet", arguments: JSON.stringify({ name: "Ada" }) }] }
  },
  (request) => ({ text: `read: ${resultsText(request)}` })
]

/** The embedded platform, journaled in memory, with operator tokens; its WebSocket URL. */
const startPlatform = Effect.gen(function*() {
  const scope = yield* Scope.make()
  yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
  const listening = yield* Layer.buildWithScope(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provide(PlatformServer.layerHandlers({
        tokens: new Map([["tok-1", "agent-1"]]),
        operatorTokens: [
          { token: Redacted.make(admin), role: "admin", name: "root" },
          { token: Redacted.make(viewer), role: "viewer", name: "vera" }
        ]
      })),
      Layer.provide(Journal.layerMemory),
      Layer.provide(LanguageModel.layerScripted(script, { perConversation: true, repeat: true })),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))
    ),
    scope
  )
  return `ws://127.0.0.1:${Context.get(listening, PlatformServer.Listening).port}/rpc`
})

/** Runs a command as the CLI parses `args`, on the settings `env`: what it printed, and how it ended. */
const cli = (command: Command.Command<any, any, any, any>, args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.gen(function*() {
    let printed = ""
    const exit = yield* Command.run(command, { name: "agent-tools", version: "0" })(["node", "agent-tools", ...args]).pipe(
      Effect.provideService(Output, { write: (text) => void (printed += text) }),
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
      Effect.provide(NodeContext.layer),
      Effect.exit
    )
    return { printed, exit }
  })

/** The refusal a command failed with, or undefined. */
const refusal = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error instanceof OperatorApiError
    ? exit.cause.error
    : undefined

/** `run` again until what it printed satisfies `done` (10 s at most). */
const until = (done: (result: { readonly printed: string }) => boolean) =>
<A extends { readonly printed: string }, E, R>(run: Effect.Effect<A, E, R>) =>
  run.pipe(
    Effect.filterOrFail((result) => {
      try {
        return done(result)
      } catch {
        return false
      }
    }, () => "not yet"),
    Effect.retry(Schedule.spaced("50 millis")),
    Effect.timeout("10 seconds"),
    Effect.orDie
  )

/** `serve --tools test/fixtures/cliTools.ts` (or `module`) on the settings `env`, for the test's scope. */
const serveFixture = (env: Record<string, string>, module = "test/fixtures/cliTools.ts") =>
  runCommand(serveLayer({ grace: 1, tools: Option.some(module) })).pipe(
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
    Effect.forkScoped
  )

const quiet = Logger.withMinimumLogLevel(LogLevel.Error)

describe("the command line for operating the platform", () => {
  it.scopedLive("serve --tools serves a module's tools; submit, tasks, approvals and agents operate the platform", () =>
    Effect.gen(function*() {
      const url = yield* startPlatform
      const client = { PLATFORM_URL: url, PLATFORM_TOKEN: "tok-1" }
      const operator = { PLATFORM_URL: url, PLATFORM_OPERATOR_TOKEN: admin }
      // A worker: the fixture module's tools served to the platform as agent-1.
      yield* serveFixture({ ...client, AGENT_ID: "agent-1" })
      // agents: the worker registered the module's three tools.
      const listed = yield* cli(agents, ["--json"], operator).pipe(until(({ printed }) => printed.includes("greet")))
      assert.isTrue(Exit.isSuccess(listed.exit))
      const agent = JSON.parse(listed.printed).agents[0]
      assert.strictEqual(agent.agentId, "agent-1")
      assert.deepStrictEqual([...agent.tools].sort(), ["add", "greet", "refund"])
      const table = yield* cli(agents, [], operator)
      assert.match(table.printed, /^AGENT\s+PROCESSES\s+CONNECTIONS\s+TASKS\s+TOOLS\nagent-1\s+1\/1 live\s+/)

      // submit, followed, as JSON lines: the call ran on the worker, the task completed.
      const followed = yield* cli(submit, ["--agent", "agent-1", "--json", "greet Ada"], client)
      assert.isTrue(Exit.isSuccess(followed.exit))
      const events = followed.printed.trim().split("\n").map((text) => JSON.parse(text))
      assert.strictEqual(events[0]._tag, "TaskStarted")
      const completed = events.find((e: any) => e._tag === "ToolCallCompleted")
      assert.deepStrictEqual([completed.name, completed.result], ["greet", { value: "hello, Ada (from the tools module)" }])
      assert.deepStrictEqual(events.at(-1)._tag, "TaskCompleted")
      assert.strictEqual(events.at(-1).output, "read: g1:\"hello, Ada (from the tools module)\"")
      // The same, for a person.
      const lines = yield* cli(submit, ["--agent", "agent-1", "greet Ada"], client)
      assert.isTrue(Exit.isSuccess(lines.exit))
      assert.match(lines.printed, /^task \S+ started\n→ greet \(g1\)\n✓ greet \(g1\): "hello, Ada \(from the tools module\)"\n/)
      assert.match(lines.printed, /read: g1:"hello, Ada \(from the tools module\)"\n✔ task \S+ completed \(2 turns/)

      // submit --detach: the id, and the task goes on without its submitter (it waits for approval).
      const detached = yield* cli(submit, ["--agent", "agent-1", "--detach", "refund A-1"], client)
      assert.isTrue(Exit.isSuccess(detached.exit))
      const denied = detached.printed.trim()
      assert.match(denied, /^task-\S+$/)
      const second = (yield* cli(submit, ["--agent", "agent-1", "--detach", "refund A-1 again"], client)).printed.trim()
      const third = (yield* cli(submit, ["--agent", "agent-1", "--detach", "refund A-1 once more"], client)).printed.trim()

      // approvals list: the three calls waiting, as JSON and as a table.
      const waiting = yield* cli(approvals, ["list", "--json"], operator).pipe(until(({ printed }) => JSON.parse(printed).approvals.length === 3))
      assert.deepStrictEqual(
        JSON.parse(waiting.printed).approvals.map((a: any) => [a.taskId, a.toolCallId, a.toolName]).sort(),
        [[denied, "r1", "refund"], [second, "r1", "refund"], [third, "r1", "refund"]].sort()
      )
      assert.match((yield* cli(approvals, ["list"], operator)).printed, /^TASK\s+CALL\s+AGENT\s+TOOL\s+EXPIRES\s+INPUT\n/)

      // tasks show of a waiting task: its model turn (tokens, the prompt cache's reads), as a table and as JSON.
      const turns = yield* cli(tasks, ["show", third], operator)
      assert.match(turns.printed, /\ntokens: +120 in, 7 out, 100 cache reads\n/)
      assert.match(
        turns.printed,
        /\nturns:\nSTEP\s+AT\s+IN\s+OUT\s+CACHE READ\s+FINISH\s+CALLS\n1\s+\d{4}-\d\d-\d\dT\S+\s+120\s+7\s+100\s+tool_calls\s+refund \(r1\)\n/
      )
      const turnsJson = JSON.parse((yield* cli(tasks, ["show", third, "--json"], operator)).printed)
      assert.deepStrictEqual(
        turnsJson.turns.map((t: any) => [t.step, t.usage.inputTokens, t.usage.cacheReadTokens, t.toolCalls[0].name]),
        [[1, 120, 100, "refund"]]
      )

      // approvals deny / approve: the API's decision, by the token's name.
      const deny = yield* cli(approvals, ["deny", denied, "r1", "--reason", "not today", "--json"], operator)
      assert.deepStrictEqual(
        [JSON.parse(deny.printed).decision, JSON.parse(deny.printed).decidedBy],
        ["denied", "root"]
      )
      const approve = yield* cli(approvals, ["approve", second, "r1"], operator)
      assert.strictEqual(approve.printed, `approved: call r1 of task ${second} (by root)\n`)
      // Decided already: 409, the API's reason.
      const again = refusal((yield* cli(approvals, ["approve", second, "r1"], operator)).exit)
      assert.strictEqual(again?.status, 409)
      assert.strictEqual(again?.tag, "OperatorConflict")

      // tasks show: the approved task's timeline once it ended (its final event), the denied one's too.
      const shown = yield* cli(tasks, ["show", second, "--json"], operator).pipe(until(({ printed }) => JSON.parse(printed).status === "ended"))
      assert.strictEqual(JSON.parse(shown.printed).final.output, "read: r1:\"refunded A-1\"")
      const deniedShown = yield* cli(tasks, ["show", denied], operator).pipe(until(({ printed }) => printed.includes("status:  ended")))
      assert.match(deniedShown.printed, new RegExp(`^task:    ${denied}\nagent:   agent-1\nstatus:  ended\noutcome: completed\n`))

      // tasks list: every task, newest first; filtered; as a table.
      const all = JSON.parse((yield* cli(tasks, ["list", "--json", "--agent", "agent-1"], operator)).printed)
      assert.strictEqual(all.tasks.length, 5)
      const waitingOnly = JSON.parse((yield* cli(tasks, ["list", "--json", "--status", "waiting-for-approval"], operator)).printed)
      assert.deepStrictEqual(waitingOnly.tasks.map((t: any) => t.taskId), [third])
      const page = yield* cli(tasks, ["list", "--limit", "2"], operator)
      assert.match(page.printed, /^TASK\s+AGENT\s+STATUS\s+OUTCOME\s+CREATED\s+ENDED\n/)
      assert.match(page.printed, /\nmore: --cursor \S+\n$/)

      // tasks cancel: the waiting task (202 and the task).
      const cancelled = yield* cli(tasks, ["cancel", third, "--reason", "no longer needed", "--json"], operator)
      assert.isTrue(Exit.isSuccess(cancelled.exit))
      assert.strictEqual(JSON.parse(cancelled.printed).taskId, third)
      // An ended task: 409. A viewer may not cancel: 403. An unknown task: 404. A token the platform does not know: 401.
      assert.strictEqual(refusal((yield* cli(tasks, ["cancel", second], operator)).exit)?.status, 409)
      assert.strictEqual(refusal((yield* cli(tasks, ["cancel", second], { ...operator, PLATFORM_OPERATOR_TOKEN: viewer })).exit)?.status, 403)
      const unknown = refusal((yield* cli(tasks, ["show", "task-nope"], operator)).exit)
      assert.strictEqual(unknown?.status, 404)
      assert.include(unknown?.message ?? "", "404 OperatorNotFound: task task-nope")
      assert.strictEqual(refusal((yield* cli(agents, [], { ...operator, PLATFORM_OPERATOR_TOKEN: "x".repeat(20) })).exit)?.status, 401)
    }).pipe(quiet), 60_000)

  it.scopedLive("serve --tools: a module's `layer` export gives what its handlers need", () =>
    Effect.gen(function*() {
      const url = yield* startPlatform
      const env = { PLATFORM_URL: url, PLATFORM_TOKEN: "tok-1", PLATFORM_OPERATOR_TOKEN: admin, AGENT_ID: "agent-1" }
      yield* serveFixture(env, "test/fixtures/cliToolsLayer.ts")
      yield* cli(agents, ["--json"], env).pipe(until(({ printed }) => printed.includes("stock")))
      const followed = yield* cli(submit, ["--json", "stock of X-9"], env)
      assert.isTrue(Exit.isSuccess(followed.exit))
      const events = followed.printed.trim().split("\n").map((text) => JSON.parse(text))
      const completed = events.find((e: any) => e._tag === "ToolCallCompleted")
      assert.deepStrictEqual([completed.name, completed.result], ["stock", { value: "12 of X-9 (from the module's layer)" }])
      assert.strictEqual(events.at(-1).output, "read: s1:\"12 of X-9 (from the module's layer)\"")
    }).pipe(quiet), 60_000)

  it.effect("tasks and approvals without a command: what is missing and the usage of each, exit 2", () =>
    Effect.gen(function*() {
      const tree: Cli.Node = {
        name: "agent-tools",
        command: Command.make("agent-tools").pipe(Command.withSubcommands([tasks, approvals])),
        children: [
          { name: "tasks", command: tasks, needsCommand: true, children: Object.entries(operateTree.tasks).map(([name, command]) => ({ name, command })) },
          { name: "approvals", command: approvals, needsCommand: true, children: Object.entries(operateTree.approvals).map(([name, command]) => ({ name, command })) }
        ]
      }
      const said = (args: ReadonlyArray<string>) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            const original = process.stderr.write
            let text = ""
            process.stderr.write = ((chunk: string) => (text += chunk, true)) as typeof process.stderr.write
            return { original, text: () => text }
          }),
          ({ text }) => Effect.map(Cli.preflight(tree, args, "agent-tools 0"), (code) => ({ code, stderr: text() })),
          ({ original }) => Effect.sync(() => void (process.stderr.write = original))
        ).pipe(Effect.provide(NodeContext.layer))
      const bare = yield* said(["tasks"])
      assert.strictEqual(bare.code, 2)
      assert.match(bare.stderr, /^agent-tools: tasks needs a command: list, show, cancel\n\nusage: agent-tools tasks list .*\n {7}agent-tools tasks show .*<task>\n {7}agent-tools tasks cancel .*<task>\n/)
      const decisions = yield* said(["approvals"])
      assert.strictEqual(decisions.code, 2)
      assert.match(decisions.stderr, /^agent-tools: approvals needs a command: list, approve, deny\n\nusage: agent-tools approvals list /)
      // With its command, nothing to say: the command runs.
      assert.isUndefined((yield* said(["tasks", "list"])).code)
    }))

  it.scopedLive("submit ends in failure when the task does; settings missing are named before anything connects", () =>
    Effect.gen(function*() {
      const url = yield* startPlatform
      // A refund waits for approval; cancelled by an operator, the task fails, and so does its submit.
      const env = { PLATFORM_URL: url, PLATFORM_TOKEN: "tok-1", PLATFORM_OPERATOR_TOKEN: admin, AGENT_ID: "agent-1" }
      yield* serveFixture(env)
      yield* cli(agents, ["--json"], env).pipe(until(({ printed }) => printed.includes("refund")))
      const followed = yield* cli(submit, ["refund A-1"], env).pipe(Effect.fork)
      const listing = yield* cli(tasks, ["list", "--json", "--status", "waiting-for-approval"], env).pipe(
        until(({ printed }) => JSON.parse(printed).tasks.length === 1)
      )
      const id = JSON.parse(listing.printed).tasks[0].taskId
      const cancelled = yield* cli(tasks, ["cancel", id], env)
      assert.isTrue(Exit.isSuccess(cancelled.exit))
      assert.match(cancelled.printed, new RegExp(`^cancelled: task ${id} \\(ended, cancelled\\)\n$`))
      const { exit, printed } = yield* followed.await.pipe(Effect.flatten)
      assert.isTrue(Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error instanceof TaskNotCompleted)
      assert.match(printed, /⏸ waits for approval of refund \{"orderId":"A-1"\} \(r1\): agent-tools approvals approve \S+ r1\n/)
      assert.match(printed, /✗ task \S+ cancelled by operator root\n$/)
      const missing = yield* cli(submit, ["hello"], {}).pipe(Effect.map(({ exit }) => exit))
      assert.isTrue(Exit.isFailure(missing))
      assert.include(String(Exit.isFailure(missing) ? (missing.cause as any).error?.message : ""), "AGENT_ID, PLATFORM_TOKEN, PLATFORM_URL are not set")
    }).pipe(quiet), 60_000)
})
