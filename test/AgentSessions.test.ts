/**
 * Sessions (`Session.ts`): runs of one session go on with its conversation, kept in the run journal; a history
 * policy chooses what the model reads; two runs of one session never interleave (the second is refused).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Journal, LanguageModel, Session, Tool } from "../src/index.js"
import * as SessionsExample from "../examples/sessions.js"
import { linesOf, threeRuns, threeRunsScript } from "./support/sessions.js"

const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)

/** The error a run failed with. */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  if (Option.isNone(failure)) throw new Error(`the run should have failed: ${Exit.isSuccess(exit) ? "it completed" : Cause.pretty(exit.cause)}`)
  return failure.value
}

/** Answers each request with `answer <n>`. */
const answers = (n: number): Array<LanguageModel.ScriptedTurn> => Array.from({ length: n }, (_, i) => ({ text: `answer ${i + 1}` }))

describe("Sessions", () => {
  it.effect("three runs of one session: the third model request holds the first two runs' turns, calls paired with results", () =>
    threeRuns("s-42").pipe(Effect.provide(Layer.merge(Journal.layerMemory, LanguageModel.layerScripted(threeRunsScript)))))

  it.effect("runs of other sessions, and runs of none, do not see a session's turns", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [] })
      yield* Agent.run(agent, "one", { session: "a" })
      yield* Agent.run(agent, "two", { session: "b" })
      yield* Agent.run(agent, "three")
      yield* Agent.run(agent, "four", { session: "a" })
      const seen = yield* requests
      assert.deepStrictEqual(seen.map(linesOf), [
        ["user: one"],
        ["user: two"],
        ["user: three"],
        ["user: one", "assistant: answer 1", "user: four"]
      ])
    }).pipe(Effect.provide(Layer.merge(Journal.layerMemory, LanguageModel.layerScripted(answers(4))))))

  it.effect("lastTurns: the model reads the last N runs of the session, whole", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [], history: { lastTurns: 2 } })
      for (const prompt of ["p1", "p2", "p3", "p4"]) yield* Agent.run(agent, prompt, { session: "s" })
      const seen = yield* requests
      assert.deepStrictEqual(linesOf(seen[3]), [
        "user: p2",
        "assistant: answer 2",
        "user: p3",
        "assistant: answer 3",
        "user: p4"
      ])
    }).pipe(Effect.provide(Layer.merge(Journal.layerMemory, LanguageModel.layerScripted(answers(4))))))

  it.effect("maxTokens with a summarizing hook: called once the budget is passed, its summary read first, kept for later runs", () =>
    Effect.gen(function*() {
      const summarized: Array<{ summary: string | undefined; lines: Array<string> }> = []
      const agent = Agent.make({
        tools: [],
        history: {
          // One run of this session is 28 estimated tokens (its two messages' JSON, 4 characters a token): two fit.
          maxTokens: 60,
          summarize: ({ messages, summary }) =>
            Effect.sync(() => {
              summarized.push({ summary, lines: linesOf({ messages, tools: [] }) })
              return `summary ${summarized.length}`
            })
        }
      })
      for (const prompt of ["p1", "p2", "p3", "p4", "p5"]) yield* Agent.run(agent, prompt, { session: "s" })
      const seen = yield* requests
      // The fourth run passed the budget first: p1's turn was summarized; the fifth summarized p2's with that summary.
      assert.deepStrictEqual(summarized, [
        { summary: undefined, lines: ["user: p1", "assistant: answer 1"] },
        { summary: "summary 1", lines: ["user: p2", "assistant: answer 2"] }
      ])
      assert.deepStrictEqual(linesOf(seen[2]), ["user: p1", "assistant: answer 1", "user: p2", "assistant: answer 2", "user: p3"])
      assert.deepStrictEqual(linesOf(seen[4]), [
        `user: ${Session.summaryText("summary 2")}`,
        "user: p3",
        "assistant: answer 3",
        "user: p4",
        "assistant: answer 4",
        "user: p5"
      ])
    }).pipe(Effect.provide(Layer.merge(Journal.layerMemory, LanguageModel.layerScripted(answers(5))))))

  it.effect("a second run of a session while the first goes is refused with SessionBusy; the model is not asked for it", () =>
    Effect.gen(function*() {
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const wait = Tool.make("wait", { description: "Waits.", input: {}, output: Schema.String, timeout: "1 minute" }, () =>
        Effect.zipRight(Deferred.succeed(entered, undefined), Effect.as(Deferred.await(release), "waited")))
      const agent = Agent.make({ tools: [wait] })
      const first = yield* Effect.fork(Agent.run(agent, "first", { session: "s", runId: "run-first" }))
      yield* Deferred.await(entered)
      const refused = failureOf(yield* Effect.exit(Agent.run(agent, "second", { session: "s" })))
      assert.instanceOf(refused, Session.SessionBusy)
      assert.deepStrictEqual([refused._tag, refused.session, refused.runId], ["SessionBusy", "s", "run-first"])
      assert.match(refused.message, /held by the run run-first/)
      assert.strictEqual((yield* requests).length, 1)
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(first)).output, "done")
      // Once the first has ended, the session is free, and holds the first run's turn, never the refused one's.
      const third = yield* Agent.run(agent, "third", { session: "s" })
      assert.strictEqual(third.output, "third done")
      const seen = yield* requests
      assert.deepStrictEqual(linesOf(seen[2]), [
        "user: first",
        "assistant:  [w1 wait]",
        "tool w1: \"waited\"",
        "assistant: done",
        "user: third"
      ])
    }).pipe(Effect.provide(Layer.merge(
      Journal.layerMemory,
      LanguageModel.layerScripted([{ toolCalls: [{ id: "w1", name: "wait", arguments: "{}" }] }, { text: "done" }, { text: "third done" }])
    ))))

  it.effect("a run that fails lets the session go unchanged: the next run reads none of it", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [], maxSteps: 1, completion: "explicit" })
      const failed = failureOf(yield* Effect.exit(Agent.run(agent, "fails", { session: "s" })))
      assert.strictEqual(failed._tag, "MaxStepsExceeded")
      const plain = Agent.make({ tools: [] })
      yield* Agent.run(plain, "after", { session: "s" })
      assert.deepStrictEqual(linesOf((yield* requests)[1]), ["user: after"])
    }).pipe(Effect.provide(Layer.merge(Journal.layerMemory, LanguageModel.layerScripted(answers(2))))))
})

describe("Sessions and durable runs", () => {
  it.effect("a run suspended for approval holds its session; resumed (no session named) it ends and keeps its turn there", () =>
    Effect.gen(function*() {
      const refunds: Array<string> = []
      const refund = Tool.make("refund", {
        description: "Refund an order.",
        input: { orderId: Schema.String },
        output: Schema.String,
        timeout: "10 seconds",
        needsApproval: true
      }, ({ orderId }) => Effect.sync(() => (refunds.push(orderId), "refunded")))
      const agent = Agent.make({ tools: [refund] })
      const suspended = failureOf(yield* Effect.exit(Agent.run(agent, "refund A-1", { session: "s", runId: "run-1" })))
      assert.strictEqual(suspended._tag, "RunSuspended")
      const busy = failureOf(yield* Effect.exit(Agent.run(agent, "meanwhile", { session: "s" })))
      assert.deepStrictEqual([busy._tag, (busy as Session.SessionBusy).runId], ["SessionBusy", "run-1"])
      yield* Agent.approve("run-1", "r1")
      assert.strictEqual((yield* Agent.resume(agent, "run-1")).output, "refund done")
      assert.deepStrictEqual(refunds, ["A-1"])
      yield* Agent.run(agent, "next", { session: "s" })
      assert.deepStrictEqual(linesOf((yield* requests)[2]), [
        "user: refund A-1",
        "assistant:  [r1 refund]",
        "tool r1: \"refunded\"",
        "assistant: refund done",
        "user: next"
      ])
    }).pipe(Effect.provide(Layer.merge(
      Journal.layerMemory,
      LanguageModel.layerScripted([
        { toolCalls: [{ id: "r1", name: "refund", arguments: "{\"orderId\":\"A-1\"}" }] },
        { text: "refund done" },
        { text: "next done" }
      ])
    ))))
})

describe("Sessions of a host's runs (a platform task)", () => {
  it.effect("a task that names a session reads the session's turns and, once it ends (by its host), is its next turn", () =>
    Effect.gen(function*() {
      const journal = yield* Journal.Journal
      const agent = Agent.make({ tools: [] })
      const task = (taskId: string, prompt: string) =>
        Effect.gen(function*() {
          // The host writes the task first, runs it, and ends it in the journal itself.
          yield* journal.started({ runId: taskId, kind: "task", agentId: "support", processId: "p1", prompt, tools: [] })
          const result = yield* Agent.runWithEvents(agent, prompt, () => {}, { runId: taskId, rerunUnfinished: true, session: "s-task" })
          yield* journal.ended(taskId, { final: "{}" }, 0)
          return result.output
        })
      assert.deepStrictEqual([yield* task("task-1", "first"), yield* task("task-2", "second")], ["answer 1", "answer 2"])
      assert.deepStrictEqual(linesOf((yield* requests)[1]), ["user: first", "assistant: answer 1", "user: second"])
    }).pipe(Effect.provide(Layer.merge(Journal.layerMemory, LanguageModel.layerScripted(answers(2))))))
})

describe("Sessions on a SQLite file", () => {
  it.effect("a session survives a process restart: the journal reopened on the file, the next run reads its turns", () =>
    Effect.acquireUseRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-sessions-"))),
      (dir) =>
        Effect.gen(function*() {
          const file = join(dir, "journal.sqlite")
          const agent = Agent.make({ tools: [] })
          // Each process: its own journal on the file, its own model.
          const process = <A, E>(turns: ReadonlyArray<LanguageModel.ScriptedTurn>, run: Effect.Effect<A, E, LanguageModel.LanguageModel | Journal.Journal>) =>
            Effect.provide(
              Effect.zip(run, requests),
              Layer.merge(Journal.layerSql({ filename: file }), LanguageModel.layerScripted(turns))
            )
          yield* process([{ text: "first answer" }], Agent.run(agent, "first", { session: "s-file" }))
          const [, seen] = yield* process([{ text: "second answer" }], Agent.run(agent, "second", { session: "s-file" }))
          assert.deepStrictEqual(linesOf(seen[0]), ["user: first", "assistant: first answer", "user: second"])
        }),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    ))

  it.effect("the documented example: each run of the session reads the turns before it", () =>
    Effect.acquireUseRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-sessions-"))),
      (dir) =>
        Effect.map(SessionsExample.main(join(dir, "journal.sqlite")), (outputs) =>
          // The second run reads the first's four messages and its prompt; the third, both runs' six and its own.
          assert.deepStrictEqual(outputs, ["read 3 messages", "read 5 messages", "read 7 messages"])),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    ))
})
