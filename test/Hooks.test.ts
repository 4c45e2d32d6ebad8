// @effect-diagnostics globalErrorInEffectFailure:off
import { assert, describe, it } from "@effect/vitest"
import { collected } from "./support/collected.js"
import { mcpClient, mcpServer, mcpSession } from "./support/mcpHttp.js"
import { clientLayer } from "./support/platform.js"
import { Clock, ConfigProvider, Context, type Duration, Effect, Fiber, Layer, Logger, Schema, Stream, TestClock } from "effect"
import {
  Agent,
  Hooks,
  Ids,
  Invocation,
  Journal,
  LanguageModel,
  Tool,
  ToolContext,
  Toolkit,
  UserPrompt
} from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { ToolResult } from "../src/ToolResult.js"

/** A refund of `amount` that needs approval, its timeout 5 seconds: `body` is its handler. */
const refundTool = (body: () => Effect.Effect<number>) =>
  Tool.make("refund", {
    description: "Refund.",
    input: { amount: Schema.Number },
    timeout: "5 seconds",
    needsApproval: true
  }, body)

type Outcome = { readonly value?: unknown; readonly error?: string }
const outcome = (result: ToolResult): Outcome =>
  result.error === undefined ? { value: result.value } : { error: result.error }

const script = (name: string, args: unknown): ReadonlyArray<LanguageModel.ScriptedTurn> => [
  { toolCalls: [{ id: "c1", name, arguments: JSON.stringify(args) }] },
  { text: "done" }
]

/** One call of `name` through an agent run, with `hooks` installed. */
const viaAgent = (toolkit: Toolkit.Toolkit<never>, hooks: Layer.Layer<never>, name: string, args: unknown) =>
  Effect.gen(function*() {
    // The toolkit was made from tools needing nothing: so does the agent.
    const result = yield* Agent.run(Agent.make({ tools: toolkit.tools }) as Agent.Agent<never>, "go")
    assert.strictEqual(result.output, "done", "the run goes on")
    return outcome(result.toolCalls[0]!.result)
  }).pipe(Effect.provide(Layer.merge(LanguageModel.layerScripted(script(name, args)), hooks)))

/** The same call delivered by the platform (in process) to a serving process with `hooks`. */
const viaServe = (toolkit: Toolkit.Toolkit<never>, hooks: Layer.Layer<never>, name: string, args: unknown) =>
  Effect.gen(function*() {
    const served = yield* Serve.makeConfig(toolkit)
    const events = yield* Stream.runCollect(served.submitTask("go"))
    const completed = [...events].find((e) => e._tag === "ToolCallCompleted")
    assert.isDefined(completed)
    return outcome((completed as { result: ToolResult }).result)
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.mergeAll(
      PlatformClient.layerTest.pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "agent-1"]]) })),
        Layer.provide(LanguageModel.layerScripted(script(name, args)))
      ),
      hooks
    ).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok"]]))))))
  )

/**
 * `count` tasks submitted one after another to one serving process with `hooks`, the model playing
 * `turns` in order: each task's calls' successes, in call order. `whileServing` runs before serving stops.
 */
const servedTasks = (
  toolkit: Toolkit.Toolkit<never>,
  hooks: Layer.Layer<never>,
  turns: ReadonlyArray<LanguageModel.ScriptedTurn>,
  count: number,
  whileServing: (tasks: ReadonlyArray<ReadonlyArray<boolean>>) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const served = yield* Serve.makeConfig(toolkit)
    const tasks: Array<ReadonlyArray<boolean>> = []
    for (let i = 0; i < count; i++) {
      const events = yield* Stream.runCollect(served.submitTask("go"))
      tasks.push([...events].flatMap((e) => e._tag === "ToolCallCompleted" ? [e.result.success] : []))
    }
    yield* whileServing(tasks)
    return tasks
  }).pipe(
    Effect.scoped,
    Effect.provide(Layer.mergeAll(
      PlatformClient.layerTest.pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "agent-1"]]) })),
        Layer.provide(LanguageModel.layerScripted(turns, { repeat: false }))
      ),
      hooks
    ).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok"]]))))))
  )

/** The same call from the official MCP client, over HTTP, to a server with `hooks`. */
const viaMcp = (toolkit: Toolkit.Toolkit<never>, hooks: Layer.Layer<never>, name: string, args: unknown) =>
  Effect.gen(function*() {
    const { client } = yield* mcpClient(toolkit, hooks)
    const result = yield* Effect.promise(() => client.callTool({ name, arguments: args as Record<string, unknown> }))
    if (result.isError === true) return { error: (result.content as Array<{ text: string }>)[0]!.text }
    const structured = result.structuredContent as Record<string, unknown>
    return { value: Object.keys(structured).length === 1 && "result" in structured ? structured.result : structured }
  }).pipe(Effect.scoped)

/** The outcome of the call through each path, in order: agent, serve, MCP. */
const throughAllPaths = (toolkit: Toolkit.Toolkit<never>, hooks: Layer.Layer<never>, name: string, args: unknown) =>
  Effect.all([viaAgent(toolkit, hooks, name, args), viaServe(toolkit, hooks, name, args), viaMcp(toolkit, hooks, name, args)])

const counted = () => {
  const runs = { count: 0 }
  const person = Tool.make("person", {
    description: "A person record.",
    input: { id: Schema.String },
    output: Schema.Struct({ id: Schema.String, name: Schema.String, ssn: Schema.String }),
    timeout: "5 seconds"
  }, ({ id }) => Effect.sync(() => (runs.count++, { id, name: "Ada", ssn: "123-45-6789" })))
  return { runs, person }
}

describe("Hooks: the same hook through an agent run, a served call and an MCP call (design: Hooks)", () => {
  it.live("a hook that denies: an error result with its reason, the handler never ran", () =>
    Effect.gen(function*() {
      const { person, runs } = counted()
      const toolkit = yield* Toolkit.make(person)
      const deny = Hooks.layer({
        tool: [(call, proceed) =>
          call.tool.name === "person"
            ? Effect.succeed(ToolResult.failure("person: denied by policy"))
            : proceed]
      })
      const outcomes = yield* throughAllPaths(toolkit, deny, "person", { id: "p1" })
      assert.deepStrictEqual(outcomes, [
        { error: "person: denied by policy" },
        { error: "person: denied by policy" },
        { error: "person: denied by policy" }
      ])
      assert.strictEqual(runs.count, 0)
    }))

  it.live("a hook that rewrites the result: a field redacted", () =>
    Effect.gen(function*() {
      const { person, runs } = counted()
      const toolkit = yield* Toolkit.make(person)
      const redact = Hooks.layer({
        tool: [(_, proceed) =>
          Effect.map(proceed, (result) =>
            result.success
              ? ToolResult.success({ ...(result.value as object), ssn: "***" })
              : result)]
      })
      const outcomes = yield* throughAllPaths(toolkit, redact, "person", { id: "p1" })
      for (const o of outcomes) assert.deepStrictEqual(o, { value: { id: "p1", name: "Ada", ssn: "***" } })
      assert.strictEqual(runs.count, 3)
    }))

  it.live("a hook that retries: the call runs again after a failure", () =>
    Effect.gen(function*() {
      let calls = 0
      const flaky = Tool.make("flaky", { description: "Fails every other call.", input: {}, timeout: "5 seconds" }, () =>
        Effect.suspend(() => ++calls % 2 === 1 ? Effect.fail(new Error(`call ${calls} failed`)) : Effect.succeed(`call ${calls}`)))
      const toolkit = yield* Toolkit.make(flaky)
      const retryOnce = Hooks.layer({
        tool: [(_, proceed) => Effect.flatMap(proceed, (result) => result.success ? Effect.succeed(result) : proceed)]
      })
      const outcomes = yield* throughAllPaths(toolkit, retryOnce, "flaky", {})
      assert.deepStrictEqual(outcomes, [{ value: "call 2" }, { value: "call 4" }, { value: "call 6" }])
    }))

  it.live("a hook that itself fails: the call gets an error result, the run goes on", () =>
    Effect.gen(function*() {
      const { person, runs } = counted()
      const toolkit = yield* Toolkit.make(person)
      const broken = Hooks.layer({ tool: [() => Effect.fail(new Error("the audit log is down"))] })
      const outcomes = yield* throughAllPaths(toolkit, broken, "person", { id: "p1" })
      for (const o of outcomes) assert.deepStrictEqual(o, { error: "person: a hook failed: Error: the audit log is down" })
      assert.strictEqual(runs.count, 0)
    }))
  it.live("a hook that needs a service: the layer, given it, lends it to the hook, not to the handler", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const audited: Hooks.ToolHook<Audit> = (call, proceed) =>
        Effect.flatMap(Audit, (audit) => Effect.zipRight(audit.record(`${call.tool.name} ${JSON.stringify(call.input)}`), proceed))
      // The handler (retried: it runs on the fiber that runs the hooks) says whether it sees the hook's service.
      const sees = Tool.make("sees", { description: "Sees Audit?", input: {}, timeout: "5 seconds", retries: 1 }, () =>
        Effect.map(Effect.serviceOption(Audit), (audit) => audit._tag === "Some"))
      const hooks = Hooks.layer({ tool: [audited] }).pipe(
        Layer.provide(Layer.succeed(Audit, { record: (line) => Effect.sync(() => void seen.push(line)) }))
      )
      const outcomes = yield* throughAllPaths(yield* Toolkit.make(sees), hooks, "sees", {})
      assert.deepStrictEqual(outcomes, [{ value: false }, { value: false }, { value: false }])
      assert.deepStrictEqual(seen, ["sees {}", "sees {}", "sees {}"])
    }))
})

/** A service a hook needs (its `R`): an audit log. */
class Audit extends Context.Tag("test/Audit")<Audit, { readonly record: (line: string) => Effect.Effect<void> }>() {}

describe("Hooks: matching the kind of a failure (design: Hooks, Error text)", () => {
  it.effect("a hook retries only a call that timed out, told by the failure's _tag, not by its text", () =>
    Effect.gen(function*() {
      // Both fail the first time: one by running past its timeout, one with an error whose text reads like a timeout.
      const runs = { slow: 0, flaky: 0 }
      const slow = Tool.make("slow", { description: "Slow once.", input: {}, timeout: "1 second" }, () =>
        Effect.suspend(() => ++runs.slow === 1 ? Effect.as(Effect.sleep("1 minute"), "late") : Effect.succeed("fast")))
      const flaky = Tool.make("flaky", { description: "Fails once.", input: {}, timeout: "1 second" }, () =>
        Effect.suspend(() =>
          ++runs.flaky === 1 ? Effect.fail(new Error("the upstream timed out after 30s")) : Effect.succeed("ok")))
      const retryTimeouts = Hooks.layer({
        tool: [(_, proceed) =>
          Effect.flatMap(proceed, (result) => result.failure?._tag === "TimedOut" ? proceed : Effect.succeed(result))]
      })
      const [slowResult, flakyResult] = yield* Effect.gen(function*() {
        const fibers = [yield* Effect.fork(Invocation.run(slow, {})), yield* Effect.fork(Invocation.run(flaky, {}))]
        yield* TestClock.adjust("2 seconds")
        return yield* Fiber.joinAll(fibers)
      }).pipe(Effect.provide(retryTimeouts))
      assert.deepStrictEqual([slowResult!.value, runs.slow], ["fast", 2])
      assert.deepStrictEqual([flakyResult!.error, flakyResult!.failure?._tag, runs.flaky], [
        "Error: the upstream timed out after 30s",
        "HandlerFailed",
        1
      ])
    }))

  it.effect("the failures hooks make are typed too: Denied, HookFailed", () =>
    Effect.gen(function*() {
      const { person } = counted()
      const budget = yield* Invocation.run(person, { id: "p" }, { taskId: "t", run: new Hooks.RunState() }).pipe(
        Effect.repeatN(1),
        Effect.provide(Hooks.layer({ tool: [Hooks.callBudget(1)] }))
      )
      assert.strictEqual(budget.failure?._tag, "Denied")
      const broken = yield* Invocation.run(person, { id: "p" }).pipe(
        Effect.provide(Hooks.layer({ tool: [() => Effect.fail(new Error("down"))] }))
      )
      assert.strictEqual(broken.failure?._tag, "HookFailed")
      assert.strictEqual(broken.error, "person: a hook failed: Error: down")
    }))
})

describe("Hooks: a hook's wait is not the handler's time (design: Hooks, Deadlines)", () => {
  /** A person who takes `delay` to say yes. */
  const slowYes = (delay: Duration.DurationInput) =>
    Layer.succeed(UserPrompt.UserPrompt, UserPrompt.UserPrompt.of({ ask: () => Effect.as(Effect.sleep(delay), "yes") }))

  it.effect("an approval that waits longer than the tool's timeout: the handler still gets its whole timeout", () =>
    Effect.gen(function*() {
      let refunds = 0
      const refund = refundTool(() => Effect.as(Effect.sleep("3 seconds"), ++refunds))
      const fiber = yield* Effect.fork(Invocation.run(refund, { amount: 5 }).pipe(
        Effect.provide(Layer.merge(Hooks.layer({ tool: [Hooks.approval] }), slowYes("10 seconds")))
      ))
      yield* TestClock.adjust("10 seconds")
      yield* TestClock.adjust("3 seconds")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual([result.value, result.error, refunds], [1, undefined, 1])
    }))

  it.effect("the handler's deadline starts when it starts: what it sees in its context is its timeout from then", () =>
    Effect.gen(function*() {
      const seen: Array<number> = []
      const probe = Tool.make("probe", { description: "Probe.", input: {}, timeout: "5 seconds" }, () =>
        Effect.flatMap(ToolContext.ToolContext, (context) =>
          Effect.map(Clock.currentTimeMillis, (now) => seen.push(context.deadlineAt - now))))
      const waits = Hooks.layer({ tool: [(_, proceed) => Effect.zipRight(Effect.sleep("8 seconds"), proceed)] })
      const fiber = yield* Effect.fork(Invocation.run(probe, {}).pipe(Effect.provide(waits)))
      yield* TestClock.adjust("8 seconds")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.error, undefined)
      assert.deepStrictEqual(seen, [5000])
    }))

  it.effect("a delivered deadline bounds the hooks too: past it, the handler never starts (DeadlinePassed)", () =>
    Effect.gen(function*() {
      let runs = 0
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "1 minute" }, () =>
        Effect.sync(() => ++runs))
      const waits = Hooks.layer({ tool: [(_, proceed) => Effect.zipRight(Effect.sleep("10 seconds"), proceed)] })
      const now = yield* Clock.currentTimeMillis
      const fiber = yield* Effect.fork(Invocation.run(slow, {}, { deadlineAt: now + 5_000 }).pipe(Effect.provide(waits)))
      yield* TestClock.adjust("10 seconds")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual([result.failure?._tag, runs], ["DeadlinePassed", 0])
    }))
})

describe("Hooks shipped with the runtime", () => {
  it.effect("logging: one structured line per call", () =>
    Effect.gen(function*() {
      const lines: Array<Record<string, unknown>> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ annotations, message }) => {
        if (String(message) === "tool call") lines.push(Object.fromEntries(annotations))
      }))
      const { person } = counted()
      yield* Agent.run(Agent.make({ tools: [person] }), "go").pipe(
        Effect.provide(Layer.mergeAll(
          LanguageModel.layerScripted([
            { toolCalls: [{ id: "a", name: "person", arguments: "{\"id\":\"p1\"}" }, { id: "b", name: "person", arguments: "{}" }] },
            { text: "done" }
          ]),
          Hooks.layer({ tool: [Hooks.logging] }),
          Ids.layerDeterministic,
          capture
        ))
      )
      // The second call's input is invalid: the pipeline refuses it before any hook.
      assert.strictEqual(lines.length, 1)
      const [line] = lines
      assert.deepStrictEqual(
        [line!.tool, line!.toolCallId, line!.attempts, line!.outcome, line!.reused],
        ["person", "a", 1, "success", false]
      )
      assert.strictEqual(typeof line!.durationMillis, "number")
      // The run's id, from the deterministic ids: the first run of this test.
      assert.strictEqual(line!.taskId, "run-1")
    }))

  it.effect("approval: needsApproval tools ask the UserPrompt; a refusal is an error result the model sees", () =>
    Effect.gen(function*() {
      let refunds = 0
      const refund = refundTool(() => Effect.sync(() => ++refunds))
      const agent = Agent.make({ tools: [refund] })
      const run = (answers: ReadonlyArray<string>) =>
        Agent.run(agent, "refund").pipe(Effect.provide(Layer.mergeAll(
          LanguageModel.layerScripted(script("refund", { amount: 5 })),
          Hooks.layer({ tool: [Hooks.approval] }),
          UserPrompt.layerTest(answers)
        )))
      const refused = yield* run(["no"])
      assert.strictEqual(refused.toolCalls[0]!.result.error, "refund: the user did not approve this call; it did not run")
      assert.strictEqual(refunds, 0)
      const approved = yield* run(["yes"])
      assert.strictEqual(approved.toolCalls[0]!.result.value, 1)
      const nobody = yield* Agent.run(agent, "refund").pipe(Effect.provide(Layer.merge(
        LanguageModel.layerScripted(script("refund", { amount: 5 })),
        Hooks.layer({ tool: [Hooks.approval] })
      )))
      assert.strictEqual(nobody.toolCalls[0]!.result.error, "refund: needs approval, and no user is available to give it")
      assert.strictEqual(refunds, 1)
    }))

  it.effect("callBudget: at most N calls per tool per run; past it an error result; a new run starts afresh", () =>
    Effect.gen(function*() {
      const { person, runs } = counted()
      const agent = Agent.make({ tools: [person] })
      const threeCalls: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: ["a", "b", "c"].map((id) => ({ id, name: "person", arguments: `{"id":"${id}"}` })) },
        { text: "done" }
      ]
      const budget = Hooks.layer({ tool: [Hooks.callBudget(2)] })
      const first = yield* Agent.run(agent, "go").pipe(Effect.provide(Layer.merge(LanguageModel.layerScripted(threeCalls), budget)))
      assert.deepStrictEqual(first.toolCalls.map((c) => c.result.success), [true, true, false])
      assert.strictEqual(first.toolCalls[2]!.result.error, "person: the budget of 2 calls for this run is spent; it did not run")
      assert.strictEqual(runs.count, 2)
      const second = yield* Agent.run(agent, "go").pipe(Effect.provide(Layer.merge(LanguageModel.layerScripted(threeCalls), budget)))
      assert.deepStrictEqual(second.toolCalls.map((c) => c.result.success), [true, true, false])
    }))

  it.effect("callBudget: the counts of a run go with it, even when a later run has the same id", () =>
    Effect.gen(function*() {
      const { person, runs } = counted()
      const agent = Agent.make({ tools: [person] })
      const twoCalls: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: ["a", "b"].map((id) => ({ id, name: "person", arguments: `{"id":"${id}"}` })) },
        { text: "done" }
      ]
      // One hook for every run, as an application installs it; each run's ids start again at run-1.
      const budget = Hooks.layer({ tool: [Hooks.callBudget(2)] })
      const runOnce = Agent.run(agent, "go").pipe(
        Effect.provide(Layer.mergeAll(LanguageModel.layerScripted(twoCalls), budget, Ids.layerDeterministic))
      )
      for (let i = 0; i < 3; i++) {
        const result = yield* runOnce
        assert.deepStrictEqual(result.toolCalls.map((c) => c.result.success), [true, true], `run ${i + 1}`)
      }
      assert.strictEqual(runs.count, 6)
    }))

  it.effect("callBudget counts per run state: calls given one share it; a call given none is a budget of its own", () =>
    Effect.gen(function*() {
      const { person } = counted()
      const budget = Hooks.layer({ tool: [Hooks.callBudget(1)] })
      const call = (options: Invocation.Options) =>
        Invocation.run(person, { id: "p" }, options).pipe(Effect.provide(budget))
      const [one, two] = [new Hooks.RunState(), new Hooks.RunState()]
      const shared = [yield* call({ run: one }), yield* call({ run: one }), yield* call({ run: two })]
      assert.deepStrictEqual(shared.map((r) => r.success), [true, false, true])
      // The task id is no key: the hook keeps nothing of its own.
      const bare = [yield* call({ taskId: "t1" }), yield* call({ taskId: "t1" })]
      assert.deepStrictEqual(bare.map((r) => r.success), [true, true])
    }))

  it.live("callBudget: a served task's calls share a budget, an MCP session's too; the next task or session starts afresh", () =>
    Effect.gen(function*() {
      const { person, runs } = counted()
      const toolkit = yield* Toolkit.make(person)
      const budget = Hooks.layer({ tool: [Hooks.callBudget(1)] })
      const twoCalls: LanguageModel.ScriptedTurn = {
        toolCalls: ["a", "b"].map((id) => ({ id, name: "person", arguments: `{"id":"${id}"}` }))
      }
      const denials: Array<string> = []
      const done: LanguageModel.ScriptedTurn = (request) => {
        for (const m of request.messages) if (m._tag === "ToolResultMessage" && m.isError) denials.push(m.content)
        return { text: "done" }
      }
      const served = yield* servedTasks(toolkit, budget, [twoCalls, done, twoCalls, done], 2)
      assert.deepStrictEqual(served, [[true, false], [true, false]])
      assert.deepStrictEqual(denials, Array(2).fill("person: the budget of 1 call for this task is spent; it did not run"))
      const port = yield* mcpServer(toolkit, budget)
      const session = Effect.gen(function*() {
        const client = yield* mcpSession(port)
        const first = yield* Effect.promise(() => client.callTool({ name: "person", arguments: { id: "a" } }))
        const second = yield* Effect.promise(() => client.callTool({ name: "person", arguments: { id: "b" } }))
        const text = (second.content as Array<{ readonly text?: string }>)[0]?.text
        assert.strictEqual(text, "person: the budget of 1 call for this session is spent; it did not run")
        return [first.isError !== true, second.isError !== true]
      }).pipe(Effect.scoped)
      assert.deepStrictEqual([yield* session, yield* session], [[true, false], [true, false]])
      assert.strictEqual(runs.count, 4)
    }).pipe(Effect.scoped))

  it.live("callBudget: a served task's counts go when its follower ends, while serving goes on", () =>
    Effect.gen(function*() {
      const { person } = counted()
      const toolkit = yield* Toolkit.make(person)
      const states: Array<WeakRef<Hooks.RunState>> = []
      const seen: Hooks.ToolHook = (call, proceed) =>
        Effect.suspend(() => {
          if (call.run !== undefined) states.push(new WeakRef(call.run))
          return proceed
        })
      const hooks = Hooks.layer({ tool: [seen, Hooks.callBudget(1)] })
      const oneCall: LanguageModel.ScriptedTurn = {
        toolCalls: [{ id: "a", name: "person", arguments: "{\"id\":\"a\"}" }]
      }
      const served = yield* servedTasks(toolkit, hooks, [oneCall, { text: "done" }], 1, (tasks) =>
        Effect.gen(function*() {
          // Serving goes on (its scope is open); the task's follower and its calls have ended.
          assert.deepStrictEqual(tasks, [[true]])
          assert.strictEqual(states.length, 1)
          assert.isTrue(yield* collected(states[0]!), "the task's run state is not held once the task ended")
        }))
      assert.deepStrictEqual(served, [[true]])
    }))

  it.effect("a turn hook changes the instructions and the tools offered, and sees the turn", () =>
    Effect.gen(function*() {
      const { person } = counted()
      const other = Tool.make("other", { description: "Other.", input: {}, timeout: "1 second" }, () => Effect.void)
      const seen: Array<string> = []
      const focus: Hooks.TurnHook = (turn, proceed) =>
        Effect.tap(
          proceed({ ...turn, instructions: `${turn.instructions ?? ""} Be brief.`, tools: turn.tools.filter((t) => t.name !== "other") }),
          (result) => Effect.sync(() => seen.push(`${turn.step}:${result.finishReason}`))
        )
      const requests = yield* Effect.gen(function*() {
        yield* Agent.run(Agent.make({ tools: [person, other], instructions: "Help." }), "go")
        return yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      }).pipe(Effect.provide(Layer.merge(LanguageModel.layerScripted(script("person", { id: "p" })), Hooks.layer({ turn: [focus] }))))
      for (const request of requests) {
        assert.strictEqual(request.instructions, "Help. Be brief.")
        assert.deepStrictEqual(request.tools.map((t) => t.name), ["person"])
      }
      assert.deepStrictEqual(seen, ["1:tool_calls", "2:stop"])
    }))
})

describe("Hooks: approvals fail closed (design: Hooks)", () => {
  const refusal = "refund: needs approval, and nothing here gave it: install Hooks.approval (it asks the UserPrompt " +
    "service), run the agent with a journal and decide with Agent.approve, or approve the call on a platform with a " +
    "journal; it did not run"

  /** The refund tool in a toolkit, counting the refunds its body made. */
  const refunds = () =>
    Effect.gen(function*() {
      const made = { count: 0 }
      const toolkit: Toolkit.Toolkit<never> = yield* Toolkit.make(refundTool(() => Effect.sync(() => ++made.count)))
      return { made, toolkit }
    })

  /** The call submitted to the embedded platform over a real WebSocket (no journal), served by a process with `hooks`. */
  const viaWebSocket = (toolkit: Toolkit.Toolkit<never>, hooks: Layer.Layer<never>, name: string, args: unknown) =>
    Effect.gen(function*() {
      const platform = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
          Layer.provide(LanguageModel.layerScripted(script(name, args)))
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, platform)
      const events = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(toolkit)
        return yield* Stream.runCollect(served.submitTask("go"))
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(clientLayer({ url }, Layer.empty), hooks)))
      const completed = [...events].find((e) => e._tag === "ToolCallCompleted")
      assert.isDefined(completed)
      assert.strictEqual([...events].at(-1)?._tag, "TaskCompleted", "the task goes on")
      return outcome((completed as { result: ToolResult }).result)
    }).pipe(Effect.scoped)

  it.live("no journal, no hook, no prompt: refused on every face (agent run, served task over a WebSocket, MCP); the body never runs", () =>
    Effect.gen(function*() {
      const { made, toolkit } = yield* refunds()
      const outcomes = yield* Effect.all([
        viaAgent(toolkit, Layer.empty, "refund", { amount: 5 }),
        viaWebSocket(toolkit, Layer.empty, "refund", { amount: 5 }),
        viaMcp(toolkit, Layer.empty, "refund", { amount: 5 })
      ])
      assert.deepStrictEqual(outcomes, [{ error: refusal }, { error: refusal }, { error: refusal }])
      assert.strictEqual(made.count, 0)
    }))

  it.live("hooks installed but none approves (a logging hook, a hook that only proceeds): refused, the body never runs", () =>
    Effect.gen(function*() {
      const { made, toolkit } = yield* refunds()
      const kinds: Array<string | undefined> = []
      const watch: Hooks.ToolHook = (_, proceed) => Effect.tap(proceed, (result) => Effect.sync(() => kinds.push(result.failure?._tag)))
      const hooks = Layer.merge(
        Hooks.layer({ tool: [watch, Hooks.logging, (_, proceed) => proceed] }),
        Logger.replace(Logger.defaultLogger, Logger.none)
      )
      const outcomes = yield* throughAllPaths(toolkit, hooks, "refund", { amount: 5 })
      assert.deepStrictEqual(outcomes, [{ error: refusal }, { error: refusal }, { error: refusal }])
      assert.strictEqual(made.count, 0)
      // The refusal is a result the hooks see, of the hooks' own kind.
      assert.deepStrictEqual(kinds, ["Denied", "Denied", "Denied"])
    }))

  it.live("Hooks.approval with a yes from the UserPrompt: the call runs once on every face", () =>
    Effect.gen(function*() {
      const { made, toolkit } = yield* refunds()
      const outcomes = yield* Effect.all([
        viaAgent(toolkit, Layer.merge(Hooks.layer({ tool: [Hooks.approval] }), UserPrompt.layerTest(["yes"])), "refund", { amount: 5 }),
        viaWebSocket(toolkit, Layer.merge(Hooks.layer({ tool: [Hooks.approval] }), UserPrompt.layerTest(["yes"])), "refund", { amount: 5 }),
        viaMcp(toolkit, Layer.merge(Hooks.layer({ tool: [Hooks.approval] }), UserPrompt.layerTest(["yes"])), "refund", { amount: 5 })
      ])
      assert.deepStrictEqual(outcomes, [{ value: 1 }, { value: 2 }, { value: 3 }])
      assert.strictEqual(made.count, 3)
    }))

  it.effect("a user's hook approves through Hooks.approved; a copy of the call, or an approval never run, approves nothing", () =>
    Effect.gen(function*() {
      let made = 0
      const refund = refundTool(() => Effect.sync(() => ++made))
      const call = (hook: Hooks.ToolHook) =>
        Effect.map(Invocation.run(refund, { amount: 5 }).pipe(Effect.provide(Hooks.layer({ tool: [hook] }))), outcome)
      const byPolicy: Hooks.ToolHook = (call, proceed) =>
        (call.input as { amount: number }).amount <= 10 ? Hooks.approved(call, proceed) : proceed
      assert.deepStrictEqual(yield* call(byPolicy), { value: 1 })
      assert.deepStrictEqual(yield* call((call, proceed) => Hooks.approved({ ...call }, proceed)), { error: refusal })
      assert.deepStrictEqual(yield* call((call, proceed) => (Hooks.approved(call, Effect.never), proceed)), { error: refusal })
      assert.strictEqual(made, 1)
    }))

  it.effect("a call a hook around Hooks.approval approved is not asked again; one it did not approve is", () =>
    Effect.gen(function*() {
      let made = 0
      const refund = refundTool(() => Effect.sync(() => ++made))
      const asked: Array<string> = []
      const prompt = Layer.succeed(UserPrompt.UserPrompt, UserPrompt.UserPrompt.of({
        ask: (question) => Effect.as(Effect.sync(() => asked.push(question)), "no")
      }))
      const small: Hooks.ToolHook = (call, proceed) =>
        (call.input as { amount: number }).amount <= 10 ? Hooks.approved(call, proceed) : proceed
      const hooks = Layer.merge(Hooks.layer({ tool: [small, Hooks.approval] }), prompt)
      const results = yield* Effect.forEach([5, 50], (amount) =>
        Effect.map(Invocation.run(refund, { amount }).pipe(Effect.provide(hooks)), outcome))
      assert.deepStrictEqual(results, [{ value: 1 }, { error: "refund: the user did not approve this call; it did not run" }])
      assert.deepStrictEqual(asked, ["Allow refund {\"amount\":50}? [y/N]"])
      assert.strictEqual(made, 1)
    }))

  it.effect("a journaled run's call approved with Agent.approve runs, with no hook installed", () =>
    Effect.gen(function*() {
      let made = 0
      const agent = Agent.make({ tools: [refundTool(() => Effect.sync(() => ++made))] })
      const suspended = yield* Effect.flip(Agent.run(agent, "refund"))
      assert.strictEqual(suspended._tag, "RunSuspended")
      assert.strictEqual(made, 0)
      if (suspended._tag !== "RunSuspended") return
      yield* Agent.approve(suspended.runId, "c1")
      const result = yield* Agent.resume(agent, suspended.runId)
      assert.deepStrictEqual([outcome(result.toolCalls[0]!.result), made], [{ value: 1 }, 1])
    }).pipe(Effect.provide(Layer.merge(
      LanguageModel.layerScripted(script("refund", { amount: 5 }), { perConversation: true }),
      Journal.layerMemory
    ))))
})
