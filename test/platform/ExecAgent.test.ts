/**
 * Agents that call agents on the platform (design: Agents that call agents): a task of an agent the
 * platform's `agentCalls` allows to call another is offered `list_agents` and `exec_agent`; `exec_agent`
 * starts a task of the other agent, run by that agent's serving process (given it on its
 * `WatchAssignments` stream), and gives its answer. Real WebSocket servers on 127.0.0.1, the scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Duration, Effect, Exit, Fiber, Layer, Schedule, Scope, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Telemetry, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { startReceiver } from "../support/otlpReceiver.js"
import { call, childPrompt, described, lookupTool, noteTool, promptOf, replacedMidCall, resultsOf, stepOf } from "../support/execAgent.js"
import { clientLayer } from "../support/platform.js"

const tokens = new Map([["tok-a", "agent-a"], ["tok-b", "agent-b"], ["tok-c", "agent-c"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

/** A target for `router` whose `exec_agent` call's prompt is a value nested 100,000 deep, not a string. */
const deep = "(nested 100,000 deep)"
const deepCall: LanguageModel.ToolCall = {
  id: "a2",
  name: "exec_agent",
  arguments: `{"agent":"agent-b","prompt":${"[".repeat(100_000)}${"]".repeat(100_000)}}`
}

/** A `router` target: agent-b, by a call whose id has a slash (`a2/b2`), as a grandchild's task id would end. */
const slashed = "(agent-b, by a call id with a slash)"

/** A `router` target: agent-b, twice in one turn (orders A-1 and B-2), each child its own task. */
const both = "(agent-b twice)"

/** A `router` target: agent-b in two turns by one call id (`a2`): order A-1, then B-2, each its own task. */
const again = "(agent-b again, by the same call id)"

/** A `router` target: a cycle, each task of agent-a asking agent-b and each of agent-b asking agent-a. */
const cycle = "(a cycle)"

/** A `router` target: agent-b, which asks agent-c (`relayPrompt`): a tree of three tasks. */
const three = "(agent-b, then agent-c)"

/** What agent-a asks agent-b in a tree of three: agent-b asks agent-c for the order's status. */
const relayPrompt = "Relay to agent-c: what is the status of order A-1?"

/** The prompt a parent gives agent-b for `order`. */
const childPromptOf = (order: string) => `Look up order ${order} and say its status.`

/**
 * The model of every task, by its prompt: agent-b's task (the child) looks the order up with its own
 * tool, then answers; a parent calls `list_agents`, then `exec_agent` on `target`, then answers with
 * what it read.
 */
const router = (target: string): LanguageModel.ScriptedTurn => (request) => {
  const step = stepOf(request)
  if (target === cycle) {
    // The task's agent, by its tools: agent-b's serve `lookup`.
    const other = request.tools.some((tool) => tool.name === "lookup") ? "agent-a" : "agent-b"
    return step === 0
      ? { toolCalls: [call("c", "exec_agent", { agent: other, prompt: "Go on with the cycle." })] }
      : { text: resultsOf(request).join(" | ").slice(0, 300) }
  }
  const order = /^Look up order (\S+) and say its status\.$/.exec(promptOf(request))?.[1]
  if (order !== undefined) {
    return step === 0
      ? { toolCalls: [call("b1", "lookup", { orderId: order })] }
      : { text: `agent-b read: ${resultsOf(request).join(" ")}` }
  }
  if (promptOf(request) === relayPrompt) {
    return step === 0
      ? { toolCalls: [call("b2", "exec_agent", { agent: "agent-c", prompt: childPrompt })] }
      : { text: `agent-b relayed: ${resultsOf(request).join(" ")}` }
  }
  if (step === 0) return { toolCalls: [call("a1", "list_agents")] }
  if (step === 1 && target === three) {
    return { toolCalls: [call("a2", "exec_agent", { agent: "agent-b", prompt: relayPrompt })] }
  }
  if (step === 1 && target === both) {
    return {
      toolCalls: [
        call("a2", "exec_agent", { agent: "agent-b", prompt: childPromptOf("A-1") }),
        call("a3", "exec_agent", { agent: "agent-b", prompt: childPromptOf("B-2") })
      ]
    }
  }
  if (target === again && (step === 1 || step === 2)) {
    return { toolCalls: [call("a2", "exec_agent", { agent: "agent-b", prompt: childPromptOf(step === 1 ? "A-1" : "B-2") })] }
  }
  if (step === 1 && target === slashed) return { toolCalls: [call("a2/b2", "exec_agent", { agent: "agent-b", prompt: childPrompt })] }
  if (step === 1) return { toolCalls: [target === deep ? deepCall : call("a2", "exec_agent", { agent: target, prompt: childPrompt })] }
  return { text: resultsOf(request).join(" | ") }
}

/**
 * The embedded platform on a loopback port, agent-a allowed to call agent-b (`agentCalls`), the model
 * `router(target)`; its URL, what it holds and the model's requests.
 */
const platform = (
  target: string,
  { port = 0, ...options }: {
    readonly agentCallTimeout?: Duration.DurationInput
    readonly agentCalls?: Record<string, ReadonlyArray<string>>
    readonly journal?: string
    readonly port?: number
  } = {},
  telemetry: Layer.Layer<never> = Layer.empty
) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      PlatformServer.layerHandlers({ tokens, agentCalls: { "agent-a": ["agent-b"] }, ...options }).pipe(
        (handlers) => PlatformServer.layerWebSocket({ port }).pipe(Layer.provideMerge(handlers)),
        Layer.provideMerge(LanguageModel.layerScripted([router(target)], { repeat: true })),
        Layer.provide(policy),
        Layer.provide(telemetry)
      )
    )
    return {
      url: yield* Effect.provide(PlatformServer.url, context),
      state: Context.get(context, PlatformServer.PlatformState),
      requests: Effect.flatMap(LanguageModel.Scripted, (s) => s.requests).pipe(Effect.provide(context))
    }
  }).pipe(Effect.orDie)

/** A serving process of `agentId` serving `tool`, for the test's scope. */
const servingProcess = <T extends Tool.Any>(
  url: string,
  agentId: string,
  token: string,
  tool: T,
  telemetry: Layer.Layer<never> = Layer.empty
) =>
  Effect.gen(function*() {
    const client = yield* Layer.build(Layer.merge(clientLayer({ url, agentId, token }, policy), telemetry))
    // A call still running at the end of a test is not waited for.
    const served = yield* Serve.makeConfig(yield* Toolkit.make(tool), { shutdownGrace: "100 millis" }).pipe(Effect.provide(client))
    return Object.assign(served, { client: Context.get(client, PlatformClient.PlatformClient) })
  })

/** A port free a moment ago: the platform is restarted on the same one. */
const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-exec-agent-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** Waits until the platform sees a process of `agentId` watching for tasks to run. */
const watching = (state: PlatformServer.PlatformState["Type"], agentId: string) =>
  state.watchingProcesses(agentId).pipe(
    Effect.repeat({ until: (processes) => processes.length > 0, schedule: Schedule.spaced("10 millis") }),
    Effect.timeout("5 seconds"),
    Effect.orDie
  )

/**
 * agent-a's task asks `callee` (one process of it serving `lookup`) on a platform whose model goes to
 * `target`: the task's output, what the callee's process ran, the platform's state.
 */
const askOf = (target: string, callee: string) =>
  Effect.gen(function*() {
    const { state, url } = yield* platform(target)
    const runs: Array<string> = []
    yield* servingProcess(url, callee, `tok-${callee.slice(-1)}`, lookupTool(runs))
    yield* watching(state, callee)
    const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
    const output = yield* a.runTask(`Ask ${callee} about order A-1.`)
    return { output, runs, state }
  })

/** No task of `callee` was made, nor its tool run: the parent's task is the platform's one task. */
const noTaskOf = (asked: Effect.Effect.Success<ReturnType<typeof askOf>>, callee: string) =>
  Effect.gen(function*() {
    assert.deepStrictEqual(asked.runs, [])
    assert.strictEqual((yield* asked.state.agentUsage(callee)).tasks, 0)
    assert.strictEqual(yield* asked.state.taskCount, 1)
  })

// Its tests wait up to 30 s for a tree of tasks (10-20 s for a suspension or a run): vitest waits as long.
describe("exec_agent on the platform", { timeout: 35_000 }, () => {
  it.live("agent-a's task runs agent-b's task, whose tool agent-b's process runs once and agent-a's never", () =>
    Effect.gen(function*() {
      const { requests, state, url } = yield* platform("agent-b")
      const bRuns: Array<string> = []
      const aRuns: Array<string> = []
      yield* servingProcess(url, "agent-b", "tok-b", lookupTool(bRuns))
      yield* watching(state, "agent-b")
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool(aRuns))
      const events = [...yield* Stream.runCollect(a.submitTask("Ask agent-b about order A-1."))]
      const last = events[events.length - 1]
      assert.strictEqual(last?._tag, "TaskCompleted")
      const output = last?._tag === "TaskCompleted" ? last.output : ""
      // What the parent's model read: the agents it may call, then agent-b's answer from agent-b's own tool.
      assert.include(output, `"agent":"agent-b","connected":true,"tools":["lookup"]`)
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      assert.deepStrictEqual(aRuns, [])
      // The parent's stream names the child task, and never carries agent-b's call.
      assert.deepStrictEqual(events.map(described).filter((d) => d !== undefined), [
        "sub-task agent-b of a2",
        "sub-task of a2 completed",
        "done"
      ])
      const started = events.find((e) => e._tag === "SubTaskStarted")
      assert.strictEqual(started?._tag === "SubTaskStarted" ? started.childTaskId : "", `${last?.taskId}/a2`)
      // The parent's model was offered the platform's tools; agent-b's was not (no allow-list).
      const all = yield* requests
      const offered = (prompt: string) =>
        all.find((r) => promptOf(r) === prompt)?.tools.map((t) => t.name).sort() ?? []
      assert.deepStrictEqual(offered("Ask agent-b about order A-1."), ["exec_agent", "list_agents", "note"])
      assert.deepStrictEqual(offered(childPrompt), ["lookup"])
    }).pipe(Effect.scoped))

  it.live("a forged exec_agent of an agent not in the allow-list is refused with a reason and starts no task", () =>
    Effect.gen(function*() {
      const asked = yield* askOf("agent-c", "agent-c")
      assert.include(
        asked.output,
        "a2!AgentCallFailed: exec_agent agent-c: agent agent-a may not run tasks of agent agent-c: the platform's agentCalls lets it " +
          "run only agent-b; no task was started"
      )
      yield* noTaskOf(asked, "agent-c")
    }).pipe(Effect.scoped))

  it.live("an exec_agent call whose arguments nest 100,000 deep is refused before any task of the other agent, and the platform serves on", () =>
    Effect.gen(function*() {
      const asked = yield* askOf(deep, "agent-b")
      // The model reads that its call's input was refused: a task of agent-b was never made.
      assert.include(asked.output, "a2!exec_agent: invalid input: the value is nested deeper than 128 levels")
      yield* noTaskOf(asked, "agent-b")
    }).pipe(Effect.scoped))

  it.live("an exec_agent call whose id has a slash is refused before any task: its task's id could be another call's", () =>
    Effect.gen(function*() {
      const asked = yield* askOf(slashed, "agent-b")
      assert.include(asked.output, `a2/b2!AgentCallFailed: exec_agent agent-b: the call's id "a2/b2" has a "/"`)
      yield* noTaskOf(asked, "agent-b")
    }).pipe(Effect.scoped))

  it.live("a second exec_agent call under the id of an earlier one starts its own task, and the model reads its own answer", () =>
    Effect.gen(function*() {
      const asked = yield* askOf(again, "agent-b")
      assert.deepStrictEqual(asked.runs, ["lookup A-1", "lookup B-2"])
      assert.include(asked.output, `a2="agent-b read: b1=\\"order A-1: shipped\\"" | a2="agent-b read: b1=\\"order B-2: shipped\\""`)
      assert.strictEqual((yield* asked.state.agentUsage("agent-b")).tasks, 0, "both children ended")
    }).pipe(Effect.scoped))

  it.live("a cycle a -> b -> a whose model answers at once: no stack overflow, it ends at the task limits, and no task is left", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform(cycle, { agentCalls: { "agent-a": ["agent-b"], "agent-b": ["agent-a"] } })
      yield* servingProcess(url, "agent-b", "tok-b", lookupTool([]))
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      yield* watching(state, "agent-b")
      yield* watching(state, "agent-a")
      const output = yield* a.runTask("Ask (a cycle) about order A-1.")
      assert.notInclude(output, "call stack")
      // Each task read its child's answer: the root's nests them.
      assert.isTrue(output.startsWith(`c="c=\\"c=`), output.slice(0, 100))
      // Every task of the cycle ended with the root.
      const left = yield* Effect.all([state.agentUsage("agent-a"), state.agentUsage("agent-b")]).pipe(
        Effect.map(([ua, ub]) => ua.tasks + ub.tasks),
        Effect.repeat({ until: (n) => n === 0, schedule: Schedule.spaced("50 millis").pipe(Schedule.upTo("10 seconds")) })
      )
      assert.strictEqual(left, 0)
    }).pipe(Effect.scoped), 60_000)

  it.live("an agent with no allow-list is not offered exec_agent nor list_agents", () =>
    Effect.gen(function*() {
      const { requests, url } = yield* platform("agent-b")
      const c = yield* servingProcess(url, "agent-c", "tok-c", lookupTool([]))
      // agent-c's prompt is the child's: the model looks the order up with its own tool, then answers.
      const output = yield* c.runTask(childPrompt)
      assert.strictEqual(output, `agent-b read: b1="order A-1: shipped"`)
      const offered = (yield* requests).map((r) => r.tools.map((t) => t.name))
      assert.deepStrictEqual(offered, [["lookup"], ["lookup"]])
    }).pipe(Effect.scoped))

  it.live("exec_agent of an agent with no serving process connected fails with the reason and starts no task", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform("agent-b")
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      const output = yield* a.runTask("Ask agent-b about order A-1.")
      assert.include(output, `"agent":"agent-b","connected":false,"tools":[]`)
      assert.include(
        output,
        "a2!AgentCallFailed: exec_agent agent-b: agent agent-b has no serving process connected (none watches for tasks to run); " +
          "no task was started"
      )
      assert.strictEqual(yield* state.taskCount, 1)
    }).pipe(Effect.scoped))

  it.live("past the exec_agent call's deadline the child task is stopped, not left running", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform("agent-b", { agentCallTimeout: "1 second" })
      const bRuns: Array<string> = []
      const interrupted: Array<{ readonly orderId: string; readonly at: number }> = []
      const deadlines: Array<number> = []
      const b = yield* servingProcess(url, "agent-b", "tok-b", lookupTool(bRuns, { takes: "20 seconds", interrupted, deadlines }))
      yield* watching(state, "agent-b")
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      const submittedAt = Date.now()
      const events = [...yield* Stream.runCollect(a.submitTask("Ask agent-b about order A-1."))]
      // The child's call was delivered with the exec_agent call's deadline (1 s), not its own 30 s timeout.
      assert.strictEqual(deadlines.length, 1)
      assert.isBelow(deadlines[0]! - submittedAt, 2_000)
      const answeredAt = Date.now()
      // The child's call in agent-b's process is interrupted with its task, not left to its own 30 s timeout.
      yield* Effect.sync(() => interrupted.length).pipe(
        Effect.repeat({ until: (n) => n > 0, schedule: Schedule.spaced("20 millis") }),
        Effect.timeout("5 seconds")
      )
      assert.deepStrictEqual(interrupted.map((i) => i.orderId), ["A-1"])
      assert.isBelow(interrupted[0]!.at - answeredAt, 2000)
      const last = events[events.length - 1]
      const output = last?._tag === "TaskCompleted" ? last.output : ""
      if (output.includes(`a2="agent-b read: b1!lookup timed out`)) {
        // The child's call is capped at the exec_agent call's deadline: on a starved event loop its timer (armed
        // from the loop's cached time) can fire first, and the child answers just in time. Not left running either.
        assert.strictEqual((yield* state.agentUsage("agent-b")).tasks, 0)
        assert.deepStrictEqual(bRuns, ["lookup A-1"])
        return
      }
      assert.include(output, "a2!exec_agent timed out after 1 s")
      assert.notInclude(output, "shipped")
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      // The child's end, as agent-b's process sees it: stopped, saying by what.
      const ended = yield* Effect.flip(b.runAttached(`${last?.taskId}/a2`))
      assert.strictEqual(ended._tag, "TaskFailedError")
      assert.include(ended.message, `the exec_agent call that started it (task ${last?.taskId}, call a2) ended first`)
      assert.strictEqual((yield* state.agentUsage("agent-b")).tasks, 0)
      assert.deepStrictEqual(events.map(described).filter((d) => d !== undefined), [
        "sub-task agent-b of a2",
        "sub-task of a2 timed_out",
        "done"
      ])
    }).pipe(Effect.scoped))

  it.live("approvals reach the root: a child task's call that needs approval suspends the parent, which lists it with its path; decided at the root, the tree completes", () =>
    Effect.gen(function*() {
      const journal = join(yield* tempDir, "journal.sqlite")
      const { state, url } = yield* platform("agent-b", { journal })
      const bRuns: Array<string> = []
      const b = yield* servingProcess(url, "agent-b", "tok-b", lookupTool(bRuns, { needsApproval: true }))
      yield* watching(state, "agent-b")
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      const suspended = yield* Deferred.make<Extract<Protocol.TaskEvent, { _tag: "TaskSuspended" }>>()
      const run = yield* Effect.fork(Stream.runCollect(a.submitTask("Ask agent-b about order A-1.").pipe(
        Stream.tap((event) => event._tag === "TaskSuspended" ? Deferred.succeed(suspended, event) : Effect.void)
      )))
      const { pending, taskId } = yield* Deferred.await(suspended).pipe(Effect.timeout("10 seconds"))
      // The parent's stream says what the tree waits for: agent-b's call, under the exec_agent call that started it.
      assert.deepStrictEqual(pending.map((p) => ({ id: p.toolCallId, name: p.toolName, input: p.input, path: p.path })), [{
        id: "a2/b1",
        name: "lookup",
        input: { orderId: "A-1" },
        path: [
          { runId: taskId, toolCallId: "a2", toolName: "exec_agent" },
          { runId: `${taskId}/a2`, toolCallId: "b1", toolName: "lookup" }
        ]
      }])
      // The child's own agent cannot decide it: the decision is the root's, and the refusal says where.
      const refused = yield* Effect.flip(b.client.approve(`${taskId}/a2`, "b1"))
      assert.strictEqual(refused._tag, "NoPendingTaskApproval")
      assert.include(refused.message, `its calls are decided at the root of the tree, on task ${taskId} as call a2/b1`)
      assert.deepStrictEqual(bRuns, [])
      yield* a.client.approve(taskId, "a2/b1")
      const events = [...yield* Fiber.join(run).pipe(Effect.timeout("20 seconds"))]
      const last = events[events.length - 1]
      assert.strictEqual(last?._tag, "TaskCompleted")
      assert.include(last?._tag === "TaskCompleted" ? last.output : "", `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      // Decided once: the same call again is refused.
      assert.strictEqual((yield* Effect.flip(a.client.approve(taskId, "a2/b1")))._tag, "NoPendingTaskApproval")
      // One child, announced once though its call ran again on resume.
      assert.deepStrictEqual(events.map(described).filter((d) => d?.startsWith("sub-task")), [
        "sub-task agent-b of a2",
        "sub-task of a2 completed"
      ])
    }).pipe(Effect.scoped))

  it.live("a denied nested call never runs, after the platform restarted too, and the parent's model reads the denial", () =>
    Effect.gen(function*() {
      const journal = join(yield* tempDir, "journal.sqlite")
      const port = yield* freePort
      const first = yield* Scope.make()
      const before = yield* Scope.extend(platform("agent-b", { journal, port }), first)
      const processes = yield* Scope.make()
      const bRuns: Array<string> = []
      yield* Scope.extend(servingProcess(before.url, "agent-b", "tok-b", lookupTool(bRuns, { needsApproval: true })), processes)
      yield* watching(before.state, "agent-b")
      const a = yield* Scope.extend(servingProcess(before.url, "agent-a", "tok-a", noteTool([])), processes)
      const suspended = yield* Deferred.make<string>()
      const run = yield* Effect.fork(Stream.runCollect(a.submitTask("Ask agent-b about order A-1.").pipe(
        Stream.tap((event) => event._tag === "TaskSuspended" ? Deferred.succeed(suspended, event.taskId) : Effect.void)
      )))
      const taskId = yield* Deferred.await(suspended).pipe(Effect.timeout("10 seconds"))
      // The tree waits in the journal; the platform stops and starts again before anyone decides.
      yield* Scope.close(first, Exit.void)
      const after = yield* platform("agent-b", { journal, port })
      yield* a.client.deny(taskId, "a2/b1", { reason: "not this order" }).pipe(
        // Refused until the tree, taken back from the journal, waits again.
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(200))))
      )
      const events = [...yield* Fiber.join(run).pipe(Effect.timeout("20 seconds"))]
      yield* Scope.close(processes, Exit.void)
      const last = events[events.length - 1]
      assert.strictEqual(last?._tag, "TaskCompleted")
      const output = last?._tag === "TaskCompleted" ? last.output : ""
      assert.include(output, "the user denied this call: not this order; it did not run")
      assert.deepStrictEqual(bRuns, [])
      // Each model turn asked once across the restart: agent-b's two, agent-a's three.
      const asked = yield* after.requests
      const beforeAsked = yield* before.requests
      const all = [...beforeAsked, ...asked]
      assert.strictEqual(all.filter((r) => promptOf(r) === childPrompt).length, 2)
      assert.strictEqual(all.filter((r) => promptOf(r) !== childPrompt).length, 3)
    }).pipe(Effect.scoped), 30_000)

  it.live("a tree of three tasks: the grandchild's call that needs approval is decided at the root, by its path, and the tree completes", () =>
    Effect.gen(function*() {
      const journal = join(yield* tempDir, "journal.sqlite")
      const agentCalls = { "agent-a": ["agent-b"], "agent-b": ["agent-c"] }
      const { state, url } = yield* platform(three, { journal, agentCalls })
      const cRuns: Array<string> = []
      yield* servingProcess(url, "agent-c", "tok-c", lookupTool(cRuns, { needsApproval: true }))
      const b = yield* servingProcess(url, "agent-b", "tok-b", noteTool([]))
      yield* watching(state, "agent-b")
      yield* watching(state, "agent-c")
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      const suspended = yield* Deferred.make<Extract<Protocol.TaskEvent, { _tag: "TaskSuspended" }>>()
      const run = yield* Effect.fork(Stream.runCollect(a.submitTask("Ask agent-b about order A-1.").pipe(
        Stream.tap((event) => event._tag === "TaskSuspended" ? Deferred.succeed(suspended, event) : Effect.void)
      )))
      const { pending, taskId } = yield* Deferred.await(suspended).pipe(Effect.timeout("10 seconds"))
      assert.deepStrictEqual(pending.map((p) => [p.toolCallId, p.path?.map((hop) => `${hop.runId}:${hop.toolName}`)]), [[
        "a2/b2/b1",
        [`${taskId}:exec_agent`, `${taskId}/a2:exec_agent`, `${taskId}/a2/b2:lookup`]
      ]])
      // The middle task's agent is not the root either.
      const refused = yield* Effect.flip(b.client.approve(`${taskId}/a2`, "b2/b1"))
      assert.include(refused.message, `on task ${taskId} as call a2/b2/b1`)
      yield* a.client.approve(taskId, "a2/b2/b1")
      const events = [...yield* Fiber.join(run).pipe(Effect.timeout("20 seconds"))]
      const last = events[events.length - 1]
      assert.include(
        last?._tag === "TaskCompleted" ? last.output : String(last?._tag),
        `a2="agent-b relayed: b2=\\"agent-b read: b1=\\\\\\"order A-1: shipped\\\\\\"\\""`
      )
      assert.deepStrictEqual(cRuns, ["lookup A-1"])
    }).pipe(Effect.scoped))

  it.live("two exec_agent calls waiting on approvals in two child tasks: each decision reaches only its own call", () =>
    Effect.gen(function*() {
      const journal = join(yield* tempDir, "journal.sqlite")
      const { state, url } = yield* platform(both, { journal })
      const bRuns: Array<string> = []
      yield* servingProcess(url, "agent-b", "tok-b", lookupTool(bRuns, { needsApproval: true }))
      yield* watching(state, "agent-b")
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      const suspended = yield* Deferred.make<Extract<Protocol.TaskEvent, { _tag: "TaskSuspended" }>>()
      const run = yield* Effect.fork(Stream.runCollect(a.submitTask("Ask agent-b about orders A-1 and B-2.").pipe(
        Stream.tap((event) =>
          event._tag === "TaskSuspended" && event.pending.length === 2 ? Deferred.succeed(suspended, event) : Effect.void
        )
      )))
      const { pending, taskId } = yield* Deferred.await(suspended).pipe(Effect.timeout("10 seconds"))
      const inputs = Object.fromEntries(pending.map((p) => [p.toolCallId, (p.input as { orderId: string }).orderId]))
      // Both children's calls are b1 in their own tasks: the paths keep them apart.
      assert.deepStrictEqual(inputs, { "a2/b1": "A-1", "a3/b1": "B-2" })
      yield* a.client.deny(taskId, "a2/b1", { reason: "no" })
      yield* a.client.approve(taskId, "a3/b1")
      const events = [...yield* Fiber.join(run).pipe(Effect.timeout("20 seconds"))]
      const last = events[events.length - 1]
      const output = last?._tag === "TaskCompleted" ? last.output : ""
      assert.deepStrictEqual(bRuns, ["lookup B-2"])
      assert.include(output, `a3="agent-b read: b1=\\"order B-2: shipped\\""`)
      assert.include(output, "the user denied this call: no; it did not run")
    }).pipe(Effect.scoped))

  it.live("a serving process given the child task that goes away is replaced by another of its agent's; the parent gets the answer", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform("agent-b")
      const gate = yield* Deferred.make<void>()
      const processes = yield* Effect.forEach([0, 1], () =>
        Effect.gen(function*() {
          const scope = yield* Scope.make()
          const runs: Array<string> = []
          yield* Scope.extend(servingProcess(url, "agent-b", "tok-b", lookupTool(runs, { gate })), scope)
          return { scope, runs }
        }))
      yield* state.watchingProcesses("agent-b").pipe(
        Effect.repeat({ until: (watching) => watching.length === 2, schedule: Schedule.spaced("10 millis") }),
        Effect.timeout("5 seconds")
      )
      const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
      const run = yield* Effect.fork(a.runTask("Ask agent-b about order A-1."))
      // The process given the child runs its call, and stops mid-call (deregistered: it is gone).
      const { output, runs } = yield* replacedMidCall([processes[0]!, processes[1]!], gate, run)
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(runs, [["lookup A-1"], ["lookup A-1"]])
    }).pipe(Effect.scoped), 30_000)

  it.live("one trace: the child task's run is a child of the parent's exec_agent call, its call of agent-b's process", () =>
    Effect.gen(function*() {
      const r = yield* Effect.acquireRelease(Effect.promise(startReceiver), (r) => Effect.promise(r.close))
      const exported = (serviceName: string) => Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName })
      yield* Effect.gen(function*() {
        const { state, url } = yield* platform("agent-b", {}, exported("platform"))
        yield* servingProcess(url, "agent-b", "tok-b", lookupTool([]), exported("agent-b"))
        yield* watching(state, "agent-b")
        const a = yield* servingProcess(url, "agent-a", "tok-a", noteTool([]))
        yield* a.runTask("Ask agent-b about order A-1.").pipe(Effect.withSpan("submit"), Effect.provide(exported("agent-a")))
      }).pipe(Effect.scoped)
      const submit = r.spans.find((s) => s.name === "submit")!
      const parentRun = r.spans.find((s) => s.name === "invoke_agent agent-a")
      assert.strictEqual(parentRun?.traceId, submit.traceId)
      const execAgent = r.spans.find((s) => s.name === "execute_tool exec_agent" && s.parentSpanId === parentRun?.spanId)
      assert.isDefined(execAgent, "no exec_agent call under the parent's run")
      const childRun = r.spans.find((s) => s.name === "invoke_agent agent-b")
      assert.strictEqual(childRun?.parentSpanId, execAgent!.spanId)
      assert.strictEqual(childRun?.traceId, submit.traceId)
      const platformCall = r.spans.find((s) => s.name === "execute_tool lookup" && s.parentSpanId === childRun?.spanId)
      assert.isDefined(platformCall, "no lookup call under the child's run")
      const servedCall = r.spans.find((s) => s.service === "agent-b" && s.parentSpanId === platformCall!.spanId)
      assert.strictEqual(servedCall?.name, "execute_tool lookup")
    }).pipe(Effect.scoped))

  it.effect("PLATFORM_AGENT_CALLS gives each caller every callee; a bad agentCalls or agentCallTimeout refuses the start, naming the field", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(PlatformServer.parseAgentCalls("support:billing, support:shipping\nops:support"), {
        support: ["billing", "shipping"],
        ops: ["support"]
      })
      const refused = yield* Effect.exit(Effect.scoped(Layer.build(
        PlatformServer.layerHandlers({ tokens, agentCalls: { support: "billing" as unknown as ReadonlyArray<string> } }).pipe(
          Layer.provide(LanguageModel.layerScripted([]))
        )
      )))
      assert.isTrue(Exit.isFailure(refused))
      assert.include(
        Exit.isFailure(refused) ? String(Cause.squash(refused.cause)) : "",
        `platform options: agentCalls.support must be an array of agent ids (non-empty strings), like ["billing"]`
      )
      const tooLong = yield* Effect.exit(Effect.scoped(Layer.build(
        PlatformServer.layerHandlers({ tokens, agentCalls: { support: ["billing"] }, agentCallTimeout: "2 hours" }).pipe(
          Layer.provide(LanguageModel.layerScripted([]))
        )
      )))
      assert.include(
        Exit.isFailure(tooLong) ? String(Cause.squash(tooLong.cause)) : "",
        `agentCallTimeout must be a duration of more than 0 and at most 3600 s`
      )
    }))

  it.live("a platform restarted mid-call goes on with the same child task: agent-b's tool runs once, the parent gets its answer", () =>
    Effect.gen(function*() {
      const journal = join(yield* tempDir, "journal.sqlite")
      const port = yield* freePort
      const first = yield* Scope.make()
      const before = yield* Scope.extend(platform("agent-b", { journal, port }), first)
      // The serving processes stop before the platform they end on: their deregistrations reach it.
      const processes = yield* Scope.make()
      const bRuns: Array<string> = []
      const gate = yield* Deferred.make<void>()
      yield* Scope.extend(servingProcess(before.url, "agent-b", "tok-b", lookupTool(bRuns, { gate })), processes)
      yield* watching(before.state, "agent-b")
      const a = yield* Scope.extend(servingProcess(before.url, "agent-a", "tok-a", noteTool([])), processes)
      const run = yield* Effect.fork(a.runTask("Ask agent-b about order A-1."))
      // agent-b's process runs the child task's call; the platform stops under it, and starts again.
      yield* Effect.sync(() => bRuns.length).pipe(
        Effect.repeat({ until: (n) => n > 0, schedule: Schedule.spaced("10 millis") }),
        Effect.timeout("5 seconds")
      )
      yield* Scope.close(first, Exit.void)
      const after = yield* platform("agent-b", { journal, port })
      yield* Deferred.succeed(gate, undefined)
      const output = yield* Fiber.join(run).pipe(Effect.timeout("20 seconds"))
      yield* Scope.close(processes, Exit.void)
      assert.include(output, `a2="agent-b read: b1=\\"order A-1: shipped\\""`)
      assert.deepStrictEqual(bRuns, ["lookup A-1"])
      // The parent and the one child it started, both taken back: no second child.
      assert.strictEqual(yield* after.state.taskCount, 2)
    }).pipe(Effect.scoped), 30_000)
})
