/**
 * Agents that call agents (design: Agents that call agents): an agent as a tool of another (`Agent.asTool`), the
 * approvals its calls ask reaching the root, the tree resumed from its journal, and handoffs. Each test is named
 * after the bug it rules out (bugs the multi-agent frameworks have had where nesting meets durability and
 * approvals).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Context, Effect, Exit, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Hooks, Journal, LanguageModel, Tool } from "../src/index.js"
import { recordingTracer } from "./support/recordingTracer.js"
import { makeTools, resultsOf } from "./support/refundTools.js"
import { sqliteClient } from "./support/sqlClient.js"

const call = (id: string, name: string, args: unknown): LanguageModel.ToolCall => ({
  id,
  name,
  arguments: JSON.stringify(args)
})

/**
 * A model whose script is per agent (told apart by their instructions) and per conversation step: a resumed run,
 * at any depth, is answered where it stands, whichever process asks.
 */
const byAgent = (scripts: Record<string, ReadonlyArray<LanguageModel.ScriptedTurn>>) => {
  const steps = Math.max(...Object.values(scripts).map((turns) => turns.length))
  const turns = Array.from({ length: steps }, (_, step): LanguageModel.ScriptedTurn => (request) => {
    const turn = scripts[request.instructions ?? ""]?.[step]
    if (turn === undefined) throw new Error(`no turn ${step + 1} scripted for "${request.instructions}"`)
    return typeof turn === "function" ? turn(request) : turn
  })
  return LanguageModel.layerScripted(turns, { perConversation: true })
}

/** The requests the model got, by agent (its instructions). */
const askedBy = (instructions: string) =>
  Effect.map(
    Effect.flatMap(LanguageModel.Scripted, (s) => s.requests),
    (requests) => requests.filter((r) => r.instructions === instructions)
  )

/** `effect` with a fresh model on `scripts` (a new process's, in effect): its exit, and the requests by agent. */
const withModel = <A, E, R>(scripts: Record<string, ReadonlyArray<LanguageModel.ScriptedTurn>>, effect: Effect.Effect<A, E, R>) =>
  Effect.provide(
    Effect.all({
      exit: Effect.exit(effect),
      asked: Effect.suspend(() =>
        Effect.map(
          Effect.all(Object.keys(scripts).map((agent) => Effect.map(askedBy(agent), (requests) => [agent, requests] as const))),
          (entries) => Object.fromEntries(entries) as Record<string, ReadonlyArray<LanguageModel.ModelRequest>>
        )
      )
    }),
    byAgent(scripts)
  )

/** The `RunSuspended` a run failed with. */
const suspendedOf = <A>(exit: Exit.Exit<A, unknown>): Agent.RunSuspended => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  if (Option.isNone(failure) || !(failure.value instanceof Agent.RunSuspended)) {
    throw new Error(`the run should have suspended: ${Exit.isSuccess(exit) ? "it completed" : Cause.pretty(exit.cause)}`)
  }
  return failure.value
}

const succeeded = <A>(exit: Exit.Exit<A, unknown>): A => {
  if (Exit.isFailure(exit)) throw new Error(`the run failed: ${Cause.pretty(exit.cause)}`)
  return exit.value
}

/** A journal on a fresh SQLite file: everything a resume reads went through JSON and the database. */
const fileJournal = Layer.unwrapScoped(Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-subagents-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  return Layer.provide(Journal.layerSqlClient, sqliteClient(join(dir, "journal.sqlite")))
}))

/** Billing's tools, counting their runs: an idempotent lookup, and a refund that needs approval. */
const billingTools = () => {
  const { runs, tools: [refund, lookup] } = makeTools()
  return { runs, lookup, refund }
}

const SUPPORT = "You are support."
const BILLING = "You are billing."

/** A support agent with billing as a tool, and billing's tool runs. */
const tree = () => {
  const tools = billingTools()
  const billing = Agent.make({ name: "billing", instructions: BILLING, tools: [tools.lookup, tools.refund] })
  const billingTool = Agent.asTool(billing, { name: "billing", description: "Billing questions: refunds, invoices." })
  const support = Agent.make({ name: "support", instructions: SUPPORT, tools: [billingTool] })
  return { ...tools, billing, support }
}

/** Billing's script: look the order up, then refund it, then say what the refund tool answered. */
const billingScript = (orderId: string, amount: number): ReadonlyArray<LanguageModel.ScriptedTurn> => [
  { toolCalls: [call("l1", "lookup", { orderId })] },
  { toolCalls: [call("r1", "refund", { orderId, amount })] },
  (request) => ({ text: `billing: ${resultsOf(request).at(-1)}` })
]

const supportScript = (calls: ReadonlyArray<LanguageModel.ToolCall>): ReadonlyArray<LanguageModel.ScriptedTurn> => [
  { toolCalls: calls },
  (request) => ({ text: `support: ${resultsOf(request).join(" | ")}` })
]

/**
 * Support (run "root") asks billing to refund A-1 (call b1); billing looks the order up, then asks for the refund
 * (call r1), which needs approval: the tree suspends on "b1/r1".
 */
const suspendedTree = Effect.gen(function*() {
  const { runs, support } = tree()
  const scripts = {
    [SUPPORT]: supportScript([call("b1", "billing", { prompt: "refund A-1" })]),
    [BILLING]: billingScript("A-1", 30)
  }
  const first = yield* withModel(scripts, Agent.run(support, "refund A-1", { runId: "root" }))
  return { first, runs, scripts, support, suspended: suspendedOf(first.exit) }
})

describe("Agents that call agents: a sub-agent as a tool (design: Agents that call agents)", () => {
  it.effect("a sub-agent answers the parent's call: its output is the call's result, its run the parent's child", () =>
    Effect.gen(function*() {
      const { support } = tree()
      const scripts = {
        [SUPPORT]: supportScript([call("b1", "billing", { prompt: "what is A-1?" })]),
        [BILLING]: [{ toolCalls: [call("l1", "lookup", { orderId: "A-1" })] }, (request: LanguageModel.ModelRequest) => ({ text: `billing: ${resultsOf(request)[0]}` })]
      }
      const { asked, exit } = yield* withModel(scripts, Agent.run(support, "refund A-1", { runId: "root" }))
      const result = succeeded(exit)
      assert.strictEqual(result.output, "support: b1=\"billing: l1=\\\"order A-1: paid\\\"\"")
      assert.strictEqual(asked[BILLING]![0]!.messages[0]!._tag, "UserMessage")
      assert.deepStrictEqual(asked[BILLING]![0]!.messages[0], { _tag: "UserMessage", text: "what is A-1?" })
      // The child run is in the parent's journal, under the parent's id and the call's.
      const journal = yield* Journal.Journal
      const child = yield* journal.run("root/b1")
      assert.isTrue(child !== undefined && !Journal.isOpen(child), "the child run is journaled, and ended")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("subagents can use approvals: a nested approval given after the run went through the journal (JSON, a database) is used once, and the tree completes without interrupting again", () =>
    Effect.gen(function*() {
      const { runs, scripts, support, suspended } = yield* suspendedTree
      assert.strictEqual(suspended.runId, "root")
      assert.deepStrictEqual(suspended.pending.map((p) => [p.toolCallId, p.toolName, p.input]), [["b1/r1", "refund", { orderId: "A-1", amount: 30 }]])
      assert.deepStrictEqual(suspended.pending[0]!.path, [
        { runId: "root", toolCallId: "b1", toolName: "billing" },
        { runId: "root/b1", toolCallId: "r1", toolName: "refund" }
      ])
      assert.deepStrictEqual(runs, ["lookup A-1"])
      yield* Agent.approve("root", "b1/r1")
      // Another process takes the tree up: fresh model, everything read back from the journal.
      const second = yield* withModel(scripts, Agent.resume(support, "root"))
      const result = succeeded(second.exit)
      assert.include(result.output, "refunded 30 on A-1")
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"], "the refund ran once")
      // No journaled turn asked again at any depth: support's 2nd turn and billing's 3rd only.
      assert.strictEqual(second.asked[SUPPORT]!.length, 1)
      assert.strictEqual(second.asked[BILLING]!.length, 1)
      // The approval was used once: resumed again, the tree answers its stored result; nothing runs, no suspension.
      const third = yield* withModel(scripts, Agent.resume(support, "root"))
      assert.strictEqual(succeeded(third.exit).output, result.output)
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"])
    }).pipe(Effect.provide(fileJournal)))

  it.effect("approving inside a sub-agent does not restart it: its earlier calls ran once, its earlier turns are not asked again", () =>
    Effect.gen(function*() {
      const { first, runs, scripts, support, suspended } = yield* suspendedTree
      assert.strictEqual(first.asked[BILLING]!.length, 2)
      // Resumed before anyone decided: the tree suspends again on the same call, nothing asked or run again.
      const early = yield* withModel(scripts, Agent.resume(support, "root"))
      assert.deepStrictEqual(suspendedOf(early.exit).pending, suspended.pending)
      assert.deepStrictEqual([early.asked[SUPPORT]!.length, early.asked[BILLING]!.length], [0, 0])
      yield* Agent.approve("root", "b1/r1")
      const second = yield* withModel(scripts, Agent.resume(support, "root"))
      succeeded(second.exit)
      assert.strictEqual(runs.filter((r) => r.startsWith("lookup")).length, 1, "the lookup before the approval ran once")
      assert.strictEqual(second.asked[BILLING]!.length, 1, "billing's turns before the approval were replayed")
      assert.deepStrictEqual(resultsOf(second.asked[BILLING]![0]!), ["l1=\"order A-1: paid\"", "r1=\"refunded 30 on A-1\""])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("two parallel calls needing approval in two sub-agents (same call id in both): each decision reaches only its own call", () =>
    Effect.gen(function*() {
      const { runs, support } = tree()
      // Two billing runs at once, each asking for refund "r1": one for A-1 (approved), one for B-2 (denied).
      const scripts = {
        [SUPPORT]: supportScript([
          call("b1", "billing", { prompt: "refund A-1 by 30" }),
          call("b2", "billing", { prompt: "refund B-2 by 70" })
        ]),
        [BILLING]: [
          (request: LanguageModel.ModelRequest) => {
            const order = (request.messages[0] as { text: string }).text.includes("A-1") ? "A-1" : "B-2"
            return { toolCalls: [call("l1", "lookup", { orderId: order })] }
          },
          (request: LanguageModel.ModelRequest) => {
            const order = (request.messages[0] as { text: string }).text.includes("A-1") ? "A-1" : "B-2"
            return { toolCalls: [call("r1", "refund", { orderId: order, amount: order === "A-1" ? 30 : 70 })] }
          },
          (request: LanguageModel.ModelRequest) => ({ text: `billing: ${resultsOf(request).at(-1)}` })
        ]
      }
      const first = yield* withModel(scripts, Agent.run(support, "two refunds", { runId: "root" }))
      const suspended = suspendedOf(first.exit)
      assert.deepStrictEqual(
        suspended.pending.map((p) => [p.toolCallId, (p.input as { orderId: string }).orderId]).sort(),
        [["b1/r1", "A-1"], ["b2/r1", "B-2"]]
      )
      // The decisions given the other way round from the order they were asked in.
      yield* Agent.deny("root", "b2/r1", { reason: "too much" })
      yield* Agent.approve("root", "b1/r1")
      // A decision for a call that is not pending is refused, not given to another call.
      const stray = yield* Effect.flip(Agent.approve("root", "b3/r1"))
      assert.strictEqual(stray._tag, "NoPendingApproval")
      const second = yield* withModel(scripts, Agent.resume(support, "root"))
      const result = succeeded(second.exit)
      assert.deepStrictEqual(runs.filter((r) => r.startsWith("refund")), ["refund A-1"], "only the approved call ran")
      assert.include(result.output, "b1=\"billing: r1=\\\"refunded 30 on A-1\\\"\"")
      assert.include(result.output, "b2=\"billing: r1!refund: the user denied this call: too much; it did not run\"")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("a denied nested call never runs, after resume too, and the parent model reads the denial", () =>
    Effect.gen(function*() {
      const { runs, scripts, support } = yield* suspendedTree
      yield* Agent.deny("root", "b1/r1", { reason: "not eligible" })
      const second = yield* withModel(scripts, Agent.resume(support, "root"))
      const result = succeeded(second.exit)
      assert.include(resultsOf(second.asked[SUPPORT]![0]!)[0]!, "the user denied this call: not eligible")
      assert.include(result.output, "did not run")
      const third = yield* withModel(scripts, Agent.resume(support, "root"))
      succeeded(third.exit)
      assert.deepStrictEqual(runs, ["lookup A-1"], "the refund never ran")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("a sub-agent's calls count against the root's call budget", () =>
    Effect.gen(function*() {
      const { billing, lookup, runs } = tree()
      const billingTool = Agent.asTool(billing, { name: "billing", description: "Billing." })
      const support = Agent.make({ name: "support", instructions: SUPPORT, tools: [lookup, billingTool] })
      const scripts = {
        [SUPPORT]: [
          { toolCalls: [call("l0", "lookup", { orderId: "A-1" })] },
          { toolCalls: [call("b1", "billing", { prompt: "look up B-2" })] },
          (request: LanguageModel.ModelRequest) => ({ text: resultsOf(request).join(" | ") })
        ],
        [BILLING]: [
          { toolCalls: [call("l1", "lookup", { orderId: "B-2" })] },
          (request: LanguageModel.ModelRequest) => ({ text: resultsOf(request).join(" | ") })
        ]
      }
      // One call per tool: support's lookup spends the budget of the whole tree, billing's is refused.
      const { exit } = yield* withModel(scripts, Agent.run(support, "go")).pipe(
        Effect.provide(Hooks.layer({ tool: [Hooks.callBudget(1)] }))
      )
      const result = succeeded(exit)
      assert.deepStrictEqual(runs, ["lookup A-1"])
      assert.include(result.output, "l1!")
      assert.include(result.output, "the budget of 1 call for this run is spent")
    }))

  it.effect("the parent call's timeout bounds the child run: a child still running then is stopped, and the parent reads TimedOut", () =>
    Effect.gen(function*() {
      const finished: Array<string> = []
      const slow = Tool.make("slow", { description: "Takes a minute.", input: {}, timeout: "5 minutes" }, () =>
        Effect.sleep("1 minute").pipe(Effect.tap(() => Effect.sync(() => finished.push("slow")))))
      const worker = Agent.make({ name: "worker", instructions: "worker", tools: [slow] })
      const boss = Agent.make({
        name: "boss",
        instructions: "boss",
        tools: [Agent.asTool(worker, { name: "worker", description: "Does slow work.", timeout: "10 seconds" })]
      })
      const scripts = {
        boss: supportScript([call("w1", "worker", { prompt: "work" })]),
        worker: [{ toolCalls: [call("s1", "slow", {})] }, { text: "done" }]
      }
      const fiber = yield* Effect.fork(withModel(scripts, Agent.run(boss, "go")))
      yield* TestClock.adjust("11 seconds")
      const { exit } = yield* Fiber.join(fiber)
      assert.include(succeeded(exit).output, "w1!worker timed out after 10")
      yield* TestClock.adjust("2 minutes")
      assert.deepStrictEqual(finished, [], "the child's call was stopped with it")
    }))

  it.effect("an idempotent sub-agent call with the same input is reused within the run, not run twice", () =>
    Effect.gen(function*() {
      const { billing } = tree()
      const ask = Agent.asTool(billing, { name: "billing", description: "Billing.", idempotent: true })
      const support = Agent.make({ name: "support", instructions: SUPPORT, tools: [ask] })
      const scripts = {
        [SUPPORT]: supportScript([call("b1", "billing", { prompt: "balance?" }), call("b2", "billing", { prompt: "balance?" })]),
        [BILLING]: [{ text: "balance 0" }]
      }
      const { asked, exit } = yield* withModel(scripts, Agent.run(support, "go"))
      const result = succeeded(exit)
      assert.strictEqual(asked[BILLING]!.length, 1)
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.cached]), [["b1", false], ["b2", true]])
    }))

  it.effect("two identical idempotent sub-agent calls whose child waits for approval: both wait, and after the approval both read the one child's answer", () =>
    Effect.gen(function*() {
      const { billing, runs } = tree()
      const ask = Agent.asTool(billing, { name: "billing", description: "Billing.", idempotent: true })
      const support = Agent.make({ name: "support", instructions: SUPPORT, tools: [ask] })
      const scripts = {
        [SUPPORT]: supportScript([call("b1", "billing", { prompt: "refund A-1" }), call("b2", "billing", { prompt: "refund A-1" })]),
        [BILLING]: billingScript("A-1", 30)
      }
      const first = yield* withModel(scripts, Agent.run(support, "go", { runId: "root" }))
      assert.deepStrictEqual(suspendedOf(first.exit).pending.map((p) => p.toolCallId), ["b1/r1"])
      yield* Agent.approve("root", "b1/r1")
      const second = yield* withModel(scripts, Agent.resume(support, "root"))
      const result = succeeded(second.exit)
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.cached, c.result.success]), [["b1", false, true], ["b2", true, true]])
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("a watched run (Agent.stream) shows its sub-agent's events as they happen, each wrapped with the call that runs it", () =>
    Effect.gen(function*() {
      const { support } = tree()
      const scripts = {
        [SUPPORT]: supportScript([call("b1", "billing", { prompt: "what is A-1?" })]),
        [BILLING]: [{ toolCalls: [call("l1", "lookup", { orderId: "A-1" })] }, { text: "paid" }]
      }
      const events = yield* Agent.stream(support, "go", { runId: "root" }).pipe(Stream.runCollect, Effect.provide(byAgent(scripts)))
      const shown = Chunk.toReadonlyArray(events).map((event) =>
        event._tag === "SubAgent" ? `${event.toolCallId}@${event.runId}:${event.event._tag}` : event._tag
      )
      assert.deepStrictEqual(shown, [
        "TurnStarted",
        "TurnCompleted",
        "ToolCallStarted",
        "b1@root/b1:TurnStarted",
        "b1@root/b1:TurnCompleted",
        "b1@root/b1:ToolCallStarted",
        "b1@root/b1:ToolCallFinished",
        "b1@root/b1:TurnStarted",
        "b1@root/b1:TextDelta",
        "b1@root/b1:TurnCompleted",
        "b1@root/b1:Text",
        "b1@root/b1:Done",
        "ToolCallFinished",
        "TurnStarted",
        "TextDelta",
        "TurnCompleted",
        "Text",
        "Done"
      ])
    }))

  it.effect("a sub-agent call whose arguments nest 100,000 deep is refused before any child run starts; the run goes on", () =>
    Effect.gen(function*() {
      const { support } = tree()
      const deep = "[".repeat(100_000) + "]".repeat(100_000)
      const scripts = {
        [SUPPORT]: supportScript([{ id: "b1", name: "billing", arguments: `{"prompt":${deep}}` }]),
        [BILLING]: [{ text: "never asked" }]
      }
      const { asked, exit } = yield* withModel(scripts, Agent.run(support, "go", { runId: "root" }))
      const result = succeeded(exit)
      assert.strictEqual(asked[BILLING]!.length, 0, "no child run")
      assert.isFalse(result.toolCalls[0]!.result.success)
      assert.isUndefined(yield* Effect.flatMap(Journal.Journal, (journal) => journal.run("root/b1")))
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("the child run's invoke_agent span is a child of the parent's execute_tool span", () =>
    Effect.gen(function*() {
      const { support } = tree()
      const { spans, tracer } = recordingTracer()
      const scripts = {
        [SUPPORT]: supportScript([call("b1", "billing", { prompt: "hi" })]),
        [BILLING]: [{ text: "hello" }]
      }
      succeeded((yield* withModel(scripts, Agent.run(support, "go")).pipe(Effect.withTracer(tracer))).exit)
      const named = (name: string) => spans.find((s) => s.name === name)
      const parent = named("invoke_agent support")
      const tool = named("execute_tool billing")
      const child = named("invoke_agent billing")
      // The links themselves: the call's span under the parent's run, the child's run under the call.
      assert.isDefined(child, spans.map((s) => s.name).join(", "))
      assert.strictEqual(tool?.parentSpanId, parent?.spanId)
      assert.strictEqual(child?.parentSpanId, tool?.spanId)
    }))
})

describe("Agents that call agents: handoffs (design: Agents that call agents)", () => {
  const handoffTree = () => {
    const tools = billingTools()
    const billing = Agent.make({ name: "billing", instructions: BILLING, tools: [tools.lookup, tools.refund] })
    const faq = Tool.make("faq", { description: "Answers FAQs.", input: { q: Schema.String }, timeout: "1 second" }, () => "see the website")
    const support = Agent.make({ name: "support", instructions: SUPPORT, tools: [faq], handoffs: [billing] })
    return { ...tools, support }
  }

  it.effect("a handoff back: billing hands the run back to triage, an agent made after it (given by name and a function)", () =>
    Effect.gen(function*() {
      const { lookup } = billingTools()
      const billing: Agent.Agent = Agent.make({
        name: "billing",
        instructions: BILLING,
        tools: [lookup],
        handoffs: [{ name: "triage", agent: () => triage }]
      })
      const triage: Agent.Agent = Agent.make({ name: "triage", instructions: "triage", tools: [], handoffs: [billing] })
      const turns: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [call("t1", "transfer_to_billing", {})] },
        { toolCalls: [call("l1", "lookup", { orderId: "A-1" }), call("t2", "transfer_to_triage", {})] },
        (request) => ({ text: `${request.instructions}: ${resultsOf(request).join(" | ")}` })
      ]
      const result = yield* Agent.run(triage, "help").pipe(Effect.provide(LanguageModel.layerScripted(turns, { perConversation: true })))
      assert.strictEqual(
        result.output,
        "triage: t1=\"the conversation is now with billing\" | l1=\"order A-1: paid\" | t2=\"the conversation is now with triage\""
      )
    }))

  it("a handoff's services are the handing agent's: its run needs them (checked by the compiler)", () => {
    class Ledger extends Context.Tag("test/Ledger")<Ledger, { readonly total: number }>() {}
    const total = Tool.make("total", { description: "The ledger's total.", input: {}, timeout: "1 second" }, () =>
      Effect.map(Ledger, (ledger) => ledger.total))
    const accounting = Agent.make({ name: "accounting", instructions: "accounting", tools: [total] })
    const front = Agent.make({ name: "front", instructions: "front", tools: [], handoffs: [accounting] })
    // @effect-diagnostics-next-line missingEffectContext:off
    // @ts-expect-error the run needs the Ledger that the agent it may hand over to needs
    const withoutLedger: Effect.Effect<unknown, unknown, LanguageModel.LanguageModel> = Agent.run(front, "hi")
    const withLedger: Effect.Effect<unknown, unknown, LanguageModel.LanguageModel> = Agent.run(front, "hi").pipe(
      Effect.provideService(Ledger, { total: 1 })
    )
    assert.deepStrictEqual(front.tools.map((t) => t.name), ["transfer_to_accounting"])
    assert.isDefined(withoutLedger)
    assert.isDefined(withLedger)
  })

  it.effect("a handoff: the conversation carries over, the tools change, and a resume goes on with the agent that held the run", () =>
    Effect.gen(function*() {
      const { runs, support } = handoffTree()
      // Steps are the conversation's: support asks the FAQ, then transfers; billing looks up and refunds.
      const turns: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [call("f1", "faq", { q: "refunds?" })] },
        { toolCalls: [call("t1", "transfer_to_billing", {})] },
        { toolCalls: [call("l1", "lookup", { orderId: "A-1" })] },
        { toolCalls: [call("r1", "refund", { orderId: "A-1", amount: 30 })] },
        (request) => ({ text: `done as ${request.instructions}: ${resultsOf(request).at(-1)}` })
      ]
      const model = LanguageModel.layerScripted(turns, { perConversation: true })
      const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      const first = yield* Effect.all({ exit: Effect.exit(Agent.run(support, "I want a refund", { runId: "h" })), seen: requests }).pipe(
        Effect.provide(model)
      )
      suspendedOf(first.exit)
      const seen = first.seen
      assert.deepStrictEqual(seen.map((r) => r.instructions), [SUPPORT, SUPPORT, BILLING, BILLING])
      assert.deepStrictEqual(seen[0]!.tools.map((t) => t.name), ["faq", "transfer_to_billing"])
      assert.deepStrictEqual(seen[2]!.tools.map((t) => t.name), ["lookup", "refund"])
      // The conversation so far went over: the user's message and support's turns.
      assert.deepStrictEqual(seen[2]!.messages[0], { _tag: "UserMessage", text: "I want a refund" })
      assert.include(resultsOf(seen[2]!).join(" "), "f1=")
      // Stopped there (a suspension, read back from the journal like a restart): the resume goes on as billing.
      yield* Agent.approve("h", "r1")
      const second = yield* Effect.all({ exit: Effect.exit(Agent.resume(support, "h")), seen: requests }).pipe(Effect.provide(model))
      assert.deepStrictEqual(second.seen.map((r) => r.instructions), [BILLING])
      assert.strictEqual(succeeded(second.exit).output, `done as ${BILLING}: r1="refunded 30 on A-1"`)
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"])
    }).pipe(Effect.provide(Journal.layerMemory)))
})
