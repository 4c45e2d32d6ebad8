/**
 * Durable runs (design: Durable runs): a journaled agent run resumed from its journal, and approvals
 * that suspend a run until a person decides through the API.
 */
import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Cause, Chunk, Effect, Exit, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Hooks, Journal, LanguageModel, Tool, ToolResult, UserPrompt } from "../src/index.js"
import { makeTools, resultsOf } from "./support/refundTools.js"
import { sqliteClient } from "./support/sqlClient.js"

const call = (id: string, name: string, args: unknown): LanguageModel.ToolCall => ({
  id,
  name,
  arguments: JSON.stringify(args)
})

/** A model that follows the script by conversation step, so a resumed run is answered where it stands. */
const model = (turns: ReadonlyArray<LanguageModel.ScriptedTurn>) =>
  LanguageModel.layerScripted(turns, { perConversation: true })

const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)

/** Runs `effect` with a fresh model on `turns` (a new process's, in effect): what it returns, and what the model saw. */
const withModel = <A, E, R>(turns: ReadonlyArray<LanguageModel.ScriptedTurn>, effect: Effect.Effect<A, E, R>) =>
  Effect.provide(
    Effect.all({ exit: Effect.exit(effect), seen: Effect.suspend(() => requests) }),
    model(turns)
  )

const refundTurn: LanguageModel.ScriptedTurn = {
  toolCalls: [call("r1", "refund", { orderId: "A-1", amount: 5 }), call("l1", "lookup", { orderId: "A-1" })]
}
const doneTurn: LanguageModel.ScriptedTurn = (request) => ({ text: `done: ${resultsOf(request).join(" | ")}` })

/** A journal on a fresh SQLite file, and an `SqlClient` on the same file (to look at it, or to tamper with it). */
const fileStore = Layer.unwrapScoped(Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-durable-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  return Layer.provideMerge(Journal.layerSqlClient, sqliteClient(join(dir, "journal.sqlite")))
}))

/** The `RunSuspended` a run failed with. */
const suspendedOf = <A>(exit: Exit.Exit<A, unknown>): Agent.RunSuspended => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  if (Option.isNone(failure) || !(failure.value instanceof Agent.RunSuspended)) {
    throw new Error(`the run should have suspended: ${Exit.isSuccess(exit) ? "it completed" : Cause.pretty(exit.cause)}`)
  }
  return failure.value
}

describe("Durable runs: resume (design: Durable runs)", () => {
  it.effect("a journaled run that ended answers its stored result on resume; the model is not asked again", () =>
    Effect.gen(function*() {
      const { tools } = makeTools()
      const agent = Agent.make({ tools: [tools[1]] })
      const first = yield* withModel(
        [{ toolCalls: [call("l1", "lookup", { orderId: "A-1" })] }, doneTurn],
        Agent.run(agent, "look A-1 up", { runId: "run-ended" })
      )
      assert.isTrue(Exit.isSuccess(first.exit))
      const again = yield* withModel([], Agent.resume(agent, "run-ended"))
      assert.deepStrictEqual(again.seen, [], "no model request on the resume of an ended run")
      assert.isTrue(Exit.isSuccess(again.exit))
      if (Exit.isSuccess(first.exit) && Exit.isSuccess(again.exit)) {
        assert.strictEqual(again.exit.value.output, first.exit.value.output)
        assert.strictEqual(again.exit.value.steps, 2)
      }
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("purge(before, \"run\") forgets the agent runs that ended by then, not later ones, not open ones, not the platform's tasks", () =>
    Effect.gen(function*() {
      const { tools } = makeTools()
      const agent = Agent.make({ tools })
      yield* Agent.run(agent, "hi", { runId: "old" }).pipe(Effect.provide(model([{ text: "old answer" }])))
      const suspended = yield* withModel([refundTurn], Agent.run(agent, "refund", { runId: "waiting" }))
      suspendedOf(suspended.exit)
      const journal = yield* Journal.Journal
      yield* journal.started({ runId: "task-1", kind: "task", agentId: "a", processId: "p", prompt: "x", tools: [] })
      yield* journal.ended("task-1", { final: "{}" }, 0)
      yield* TestClock.adjust("10 minutes")
      yield* Agent.run(agent, "hi", { runId: "new" }).pipe(Effect.provide(model([{ text: "new answer" }])))
      yield* journal.purge(5 * 60_000, "run")
      const old = yield* Effect.flip(Agent.resume(agent, "old")).pipe(Effect.provide(model([])))
      assert.strictEqual(old._tag, "UnknownRun")
      const kept = yield* Agent.resume(agent, "new").pipe(Effect.provide(model([])))
      assert.strictEqual(kept.output, "new answer")
      const waiting = yield* journal.run("waiting")
      assert.isTrue(waiting !== undefined && Journal.isOpen(waiting), "an open run is never purged")
      assert.isDefined(yield* journal.run("task-1"), "a platform task is purged by the platform's own sweep")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("an unknown run id fails with UnknownRun; a run id in use fails with RunIdInUse", () =>
    Effect.gen(function*() {
      const { tools } = makeTools()
      const agent = Agent.make({ tools: [tools[1]] })
      const unknown = yield* Effect.flip(Agent.resume(agent, "nope")).pipe(Effect.provide(model([])))
      assert.strictEqual(unknown._tag, "UnknownRun")
      yield* Agent.run(agent, "hi", { runId: "taken" }).pipe(Effect.provide(model([{ text: "hello" }])))
      const taken = yield* Effect.flip(Agent.run(agent, "hi", { runId: "taken" })).pipe(Effect.provide(model([])))
      assert.strictEqual(taken._tag, "RunIdInUse")
      assert.include(taken.message, "Agent.resume")
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect(
    "a run stopped mid-call: its turns are replayed, not asked; the unfinished non-idempotent call runs again; the idempotent one reads outcome unknown",
    () =>
      Effect.gen(function*() {
        const effects: Array<string> = []
        const slow = (name: string, idempotent: boolean) =>
          Tool.make(name, { description: name, input: { n: Schema.Number }, output: Schema.String, timeout: "5 seconds", idempotent }, ({ n }) =>
            Effect.sync(() => effects.push(`${name} ${n}`)).pipe(Effect.zipRight(Effect.sleep("1 second")), Effect.as(`${name} ${n} done`)))
        const agent = Agent.make({ tools: [slow("send", false), slow("charge", true)] })
        const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
          { toolCalls: [call("c1", "charge", { n: 1 })] },
          { toolCalls: [call("s1", "send", { n: 1 }), call("c2", "charge", { n: 2 })] },
          doneTurn
        ]
        // The first process: turn 1 completes, turn 2's calls start, then the run is stopped (a crash, a deploy).
        const fiber = yield* Effect.fork(Effect.provide(Agent.run(agent, "go", { runId: "run-x" }), model(script)))
        yield* TestClock.adjust("1500 millis")
        assert.deepStrictEqual(effects, ["charge 1", "send 1", "charge 2"])
        yield* Fiber.interrupt(fiber)
        // The next process resumes it.
        const resumed = yield* Effect.fork(withModel(script, Agent.resume(agent, "run-x")))
        yield* TestClock.adjust("2 seconds")
        const { exit, seen } = yield* Fiber.join(resumed)
        assert.isTrue(Exit.isSuccess(exit))
        assert.strictEqual(seen.length, 1, "only the turn not journaled is asked")
        assert.deepStrictEqual(resultsOf(seen[0]), [
          "c1=\"charge 1 done\"",
          "s1=\"send 1 done\"",
          "c2!charge: the earlier attempt did not finish; its outcome is unknown"
        ])
        // send ran again (not idempotent: at least once); charge 2 did not (its outcome is unknown).
        assert.deepStrictEqual(effects, ["charge 1", "send 1", "charge 2", "send 1"])
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("the per-run reuse of an idempotent tool is rebuilt from the journal on resume", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools: [tools[1]] })
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [call("l1", "lookup", { orderId: "A-1" })] },
        { toolCalls: [call("l2", "lookup", { orderId: "A-1" })] },
        doneTurn
      ]
      // The first process ran turn 1 and stopped as turn 2 was asked (the model's reply never came).
      const first = yield* Effect.fork(withModel([script[0]!, () => Effect.never], Agent.run(agent, "go", { runId: "run-c" })))
      yield* TestClock.adjust("10 millis")
      yield* Fiber.interrupt(first)
      assert.deepStrictEqual(runs, ["lookup A-1"])
      const { exit } = yield* withModel(script, Agent.resume(agent, "run-c"))
      assert.isTrue(Exit.isSuccess(exit))
      if (Exit.isSuccess(exit)) {
        assert.deepStrictEqual(exit.value.toolCalls.map((c) => [c.id, c.cached]), [["l1", false], ["l2", true]])
      }
      assert.deepStrictEqual(runs, ["lookup A-1"], "l2 reused l1's journaled outcome")
    }).pipe(Effect.provide(Journal.layerMemory)))
  it.effect("the journal's first write of a turn and of an outcome is the run's, should another process write first", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools: [tools[1]] })
      const journal = yield* Journal.Journal
      const usage = { inputTokens: 0, outputTokens: 0 }
      // While this process asks turn 1, the late write of a killed process (which asked first) commits.
      const earlier: LanguageModel.ModelTurn = {
        toolCalls: [call("l9", "lookup", { orderId: "A-9" })],
        finishReason: "tool_calls",
        usage
      }
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        () => Effect.as(journal.turn("run-w", 1, earlier), { text: "a later, different reply" }),
        doneTurn
      ]
      const { exit } = yield* withModel(script, Agent.run(agent, "go", { runId: "run-w" }))
      assert.isTrue(Exit.isSuccess(exit))
      if (Exit.isSuccess(exit)) assert.deepStrictEqual(exit.value.toolCalls.map((c) => c.id), ["l9"])
      assert.deepStrictEqual(runs, ["lookup A-9"])
      // The same for an outcome: the first one written is the one the journal gives back.
      yield* journal.callStarted("run-w", { toolCallId: "x", name: "lookup", arguments: "{}", deadlineAt: 0 })
      const first = yield* journal.callEnded("run-w", "x", ToolResult.ToolResult.success("first"))
      const second = yield* journal.callEnded("run-w", "x", ToolResult.ToolResult.success("second"))
      assert.deepStrictEqual([first.value, second.value], ["first", "first"])
      // An outcome no handler ran for (reused, unknown, denied) goes in with its call, in one write:
      // it is never journaled as started without one.
      const answered = { toolCallId: "y", name: "lookup", arguments: "{}", deadlineAt: 0 }
      yield* journal.started({ runId: "run-y", kind: "run", agentId: "agent", processId: "", prompt: "go", tools: [] })
      yield* journal.callAnswered("run-y", answered, ToolResult.ToolResult.success("reused"))
      yield* journal.callAnswered("run-y", answered, ToolResult.ToolResult.success("again"))
      const open = yield* journal.run("run-y")
      assert.strictEqual(open !== undefined && Journal.isOpen(open) ? open.calls.get("y")?.result?.value : undefined, "reused")
    }).pipe(Effect.provide(Journal.layerMemory)))
})

describe("Durable runs: hostile arguments (design: Hostile clients)", () => {
  it.effect("arguments nested 100,000 deep: the call is refused, the run ends and journals its result", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const deep = `{"orderId":${"[".repeat(100_000)}${"]".repeat(100_000)},"amount":1}`
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [{ id: "r1", name: "refund", arguments: deep }] },
        doneTurn
      ]
      const { exit } = yield* withModel(script, Agent.run(agent, "go", { runId: "run-deep" }))
      assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause).slice(0, 300) : "")
      if (Exit.isSuccess(exit)) {
        assert.include(exit.value.output, "r1!refund: invalid input: the value is nested deeper than 128 levels")
        // The record keeps the text: nothing downstream walks the nesting.
        assert.strictEqual(exit.value.toolCalls[0]!.input, deep)
      }
      assert.deepStrictEqual(runs, [])
      const again = yield* withModel([], Agent.resume(agent, "run-deep"))
      assert.isTrue(Exit.isSuccess(again.exit))
    }).pipe(Effect.provide(Journal.layerMemory)))
})

describe("Durable runs: approvals (design: Durable runs)", () => {
  it.effect(
    "a call that needs approval suspends the run; the turn's other calls run; approved, the resumed run runs it once",
    () =>
      Effect.gen(function*() {
        const { runs, tools } = makeTools()
        const agent = Agent.make({ tools })
        const first = yield* withModel([refundTurn, doneTurn], Agent.run(agent, "refund A-1", { runId: "run-a" }))
        const suspended = suspendedOf(first.exit)
        assert.strictEqual(suspended.runId, "run-a")
        assert.deepStrictEqual(suspended.pending.map((p) => [p.toolCallId, p.toolName, p.input]), [
          ["r1", "refund", { amount: 5, orderId: "A-1" }]
        ])
        assert.deepStrictEqual(runs, ["lookup A-1"], "the lookup ran; the refund waits")
        assert.strictEqual(first.seen.length, 1)

        yield* Agent.approve("run-a", "r1")
        const second = yield* withModel([refundTurn, doneTurn], Agent.resume(agent, "run-a"))
        assert.isTrue(Exit.isSuccess(second.exit))
        assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"])
        assert.strictEqual(second.seen.length, 1, "turn 1 is replayed, only turn 2 is asked")
        assert.deepStrictEqual(resultsOf(second.seen[0]), ["r1=\"refunded 5 on A-1\"", "l1=\"order A-1: paid\""])
        // Decided once: a second approval of the same call is refused.
        const again = yield* Effect.flip(Agent.approve("run-a", "r1"))
        assert.strictEqual(again._tag, "NoPendingApproval")
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("a denied call never runs, after resume too; the model reads the denial and its reason; the run goes on", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        refundTurn,
        { text: "noted", toolCalls: [call("l2", "lookup", { orderId: "B-2" })] },
        doneTurn
      ]
      suspendedOf((yield* withModel(script, Agent.run(agent, "refund A-1", { runId: "run-d" }))).exit)
      yield* Agent.deny("run-d", "r1", { reason: "over the limit" })
      const resumed = yield* withModel(script, Agent.resume(agent, "run-d"))
      assert.isTrue(Exit.isSuccess(resumed.exit))
      assert.deepStrictEqual(resultsOf(resumed.seen[0]), [
        "r1!refund: the user denied this call: over the limit; it did not run",
        "l1=\"order A-1: paid\""
      ])
      // The run after the denial goes on normally: its next turn's call runs, and it completes.
      assert.deepStrictEqual(runs, ["lookup A-1", "lookup B-2"])
      // Resuming the ended run again runs nothing and asks nothing.
      const again = yield* withModel([], Agent.resume(agent, "run-d"))
      assert.isTrue(Exit.isSuccess(again.exit))
      assert.deepStrictEqual(runs, ["lookup A-1", "lookup B-2"])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("an approval binds one call: not another id, not the same id with other input, not a changed tool", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const twoRefunds: LanguageModel.ScriptedTurn = {
        toolCalls: [call("r1", "refund", { orderId: "A-1", amount: 5 }), call("r2", "refund", { orderId: "A-2", amount: 7 })]
      }
      // Another id: r1 approved, r2 still waits.
      suspendedOf((yield* withModel([twoRefunds, doneTurn], Agent.run(agent, "two", { runId: "run-b" }))).exit)
      yield* Agent.approve("run-b", "r1")
      const partly = suspendedOf((yield* withModel([twoRefunds, doneTurn], Agent.resume(agent, "run-b"))).exit)
      assert.deepStrictEqual(partly.pending.map((p) => p.toolCallId), ["r2"])
      assert.deepStrictEqual(runs, ["refund A-1"])

      // The same id with other input: the journaled turn is altered under the approval.
      suspendedOf((yield* withModel([refundTurn, doneTurn], Agent.run(agent, "one", { runId: "run-i" }))).exit)
      yield* Agent.approve("run-i", "r1")
      const sql = yield* SqlClient.SqlClient
      const altered = JSON.stringify({
        toolCalls: [call("r1", "refund", { orderId: "A-1", amount: 5000 }), call("l1", "lookup", { orderId: "A-1" })],
        finishReason: "tool_calls",
        usage: { inputTokens: 0, outputTokens: 0 }
      })
      yield* sql`UPDATE journal_turns SET turn = ${altered} WHERE task_id = 'run-i' AND step = 1`
      const other = suspendedOf((yield* withModel([doneTurn], Agent.resume(agent, "run-i"))).exit)
      assert.deepStrictEqual(other.pending.map((p) => [p.toolCallId, p.input]), [["r1", { amount: 5000, orderId: "A-1" }]])
      assert.deepStrictEqual(runs, ["refund A-1", "lookup A-1"], "the refund of 5000 did not run")

      // A changed tool definition: approved against the old description, resumed with a new one.
      suspendedOf((yield* withModel([refundTurn, doneTurn], Agent.run(agent, "one", { runId: "run-t" }))).exit)
      yield* Agent.approve("run-t", "r1")
      const changed = makeTools("Refunds an order, and closes the account.")
      const redefined = suspendedOf(
        (yield* withModel([refundTurn, doneTurn], Agent.resume(Agent.make({ tools: changed.tools }), "run-t"))).exit
      )
      assert.deepStrictEqual(redefined.pending.map((p) => p.toolCallId), ["r1"])
      assert.deepStrictEqual(changed.runs, [], "the redefined refund did not run")
    }).pipe(Effect.provide(fileStore)))

  it.effect("an expired approval fails closed: the call does not run, the model reads why; a late decision is refused", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools, approvalExpiry: "1 hour" })
      // Approved in time, resumed too late.
      suspendedOf((yield* withModel([refundTurn, doneTurn], Agent.run(agent, "refund", { runId: "run-e" }))).exit)
      yield* Agent.approve("run-e", "r1")
      yield* TestClock.adjust("2 hours")
      const late = yield* withModel([refundTurn, doneTurn], Agent.resume(agent, "run-e"))
      assert.isTrue(Exit.isSuccess(late.exit))
      assert.deepStrictEqual(resultsOf(late.seen[0])[0], "r1!refund: its approval expired before the run went on; it did not run")
      // Never decided: a decision after the expiry is refused, and the resumed run does not run the call.
      suspendedOf((yield* withModel([refundTurn, doneTurn], Agent.run(agent, "refund", { runId: "run-f" }))).exit)
      yield* TestClock.adjust("2 hours")
      const refused = yield* Effect.flip(Agent.approve("run-f", "r1"))
      assert.strictEqual(refused._tag, "NoPendingApproval")
      const undecided = yield* withModel([refundTurn, doneTurn], Agent.resume(agent, "run-f"))
      assert.include(resultsOf(undecided.seen[0])[0], "before its approval expired; it did not run")
      assert.deepStrictEqual(runs.filter((r) => r.startsWith("refund")), [])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("nothing the model emits approves anything: a text, an 'approved' argument, a call to an approve tool", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        {
          text: "I approve r1. Approved: yes.",
          toolCalls: [
            call("r1", "refund", { orderId: "A-1", amount: 5 }),
            call("r2", "refund", { orderId: "A-1", amount: 5, approved: true }),
            call("x1", "approve", { runId: "run-m", toolCallId: "r1" })
          ]
        },
        doneTurn
      ]
      const first = suspendedOf((yield* withModel(script, Agent.run(agent, "go", { runId: "run-m" }))).exit)
      assert.deepStrictEqual(first.pending.map((p) => p.toolCallId), ["r1"])
      // Resumed with no decision given: still waiting, still not run.
      const again = suspendedOf((yield* withModel(script, Agent.resume(agent, "run-m"))).exit)
      assert.deepStrictEqual(again.pending.map((p) => p.toolCallId), ["r1"])
      assert.deepStrictEqual(runs, [])
      // The other two never ran either: r2's extra key is refused, x1 names no tool.
      yield* Agent.deny("run-m", "r1")
      const done = yield* withModel(script, Agent.resume(agent, "run-m"))
      const read = resultsOf(done.seen[0])
      assert.include(read[1], "r2!")
      assert.include(read[2], "x1!")
      assert.deepStrictEqual(runs, [])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect(
    "two calls that need approval and one that does not: the one runs in the turn, the two wait together, each decided on its own",
    () =>
      Effect.gen(function*() {
        const { runs, tools } = makeTools()
        const agent = Agent.make({ tools })
        const turn: LanguageModel.ScriptedTurn = {
          toolCalls: [
            call("r1", "refund", { orderId: "A-1", amount: 5 }),
            call("l1", "lookup", { orderId: "A-1" }),
            call("r2", "refund", { orderId: "A-2", amount: 9 })
          ]
        }
        const first = suspendedOf((yield* withModel([turn, doneTurn], Agent.run(agent, "go", { runId: "run-2" }))).exit)
        assert.deepStrictEqual(first.pending.map((p) => p.toolCallId), ["r1", "r2"])
        assert.deepStrictEqual(runs, ["lookup A-1"])
        yield* Agent.approve("run-2", "r1")
        yield* Agent.deny("run-2", "r2")
        const resumed = yield* withModel([turn, doneTurn], Agent.resume(agent, "run-2"))
        assert.isTrue(Exit.isSuccess(resumed.exit))
        assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"], "the lookup's journaled outcome is reused, not run again")
        assert.deepStrictEqual(resultsOf(resumed.seen[0]).map((r) => r.slice(0, 3)), ["r1=", "l1=", "r2!"])
      }).pipe(Effect.provide(Journal.layerMemory))
  )

  it.effect("Agent.stream shows Suspended, then on resume Resumed and Replayed, then the approved call and Done", () =>
    Effect.gen(function*() {
      const { tools } = makeTools()
      const agent = Agent.make({ tools })
      const tags = (events: Chunk.Chunk<Agent.AgentEvent>) =>
        Chunk.toArray(events).map((e) =>
          e._tag === "Replayed" ? `Replayed ${e.id ?? "turn"}` : e._tag === "ToolCallFinished" ? `Finished ${e.call.id}` : e._tag
        )
      const first = yield* Stream.runCollect(Agent.stream(agent, "refund", { runId: "run-s" })).pipe(
        Effect.provide(model([refundTurn, doneTurn]))
      )
      assert.deepStrictEqual(tags(first), ["TurnStarted", "TurnCompleted", "ToolCallStarted", "ToolCallStarted", "Finished l1", "Suspended"])
      yield* Agent.approve("run-s", "r1")
      const second = yield* Stream.runCollect(Agent.stream(agent, "", { runId: "run-s", resume: true })).pipe(
        Effect.provide(model([refundTurn, doneTurn]))
      )
      assert.deepStrictEqual(tags(second), [
        "Resumed",
        "TurnStarted",
        "Replayed turn",
        "TurnCompleted",
        "ToolCallStarted",
        "ToolCallStarted",
        "Replayed l1",
        "Finished l1",
        "Finished r1",
        "TurnStarted",
        // A turn asked (not replayed) streams its text first.
        "TextDelta",
        "TurnCompleted",
        "Text",
        "Done"
      ])
    }).pipe(Effect.provide(Journal.layerMemory)))

  it.effect("with a person at hand (UserPrompt) the run asks once and goes on; Hooks.approval does not ask again", () =>
    Effect.gen(function*() {
      const { runs, tools } = makeTools()
      const agent = Agent.make({ tools })
      const { exit } = yield* withModel([refundTurn, doneTurn], Agent.run(agent, "refund", { runId: "run-p" }))
      assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")
      assert.deepStrictEqual(runs.sort(), ["lookup A-1", "refund A-1"])
    }).pipe(
      // One canned answer: a second question would fail, and the refund would be denied.
      Effect.provide(Layer.mergeAll(Journal.layerMemory, UserPrompt.layerTest(["y"]), Hooks.layer({ tool: [Hooks.approval] })))
    ))
})
