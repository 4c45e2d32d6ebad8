/**
 * Attaching to a task held by this process, as a cluster runner's task entity does (Cluster.ts, ClusterTasks.ts): a
 * follower attaches again after its task's shard moved, naming its first attach. A follower that was
 * taken over while its shard moved must not take the task back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Exit, Layer, Logger, type Mailbox, Option, Schema, Scope } from "effect"
import { Journal, LanguageModel, Tool, Toolkit } from "../../src/index.js"
import * as ClusterTasks from "../../src/platform/ClusterTasks.js"
import { makeParts } from "../../src/platform/Parts.js"
import { attachTo } from "../../src/platform/Tasks.js"
import type { TaskEvent } from "../../src/protocol/Protocol.js"

const refund = Tool.make("refund", { description: "Refunds.", input: { n: Schema.Number }, timeout: "60 seconds" }, ({ n }) =>
  Effect.succeed(n))

/** What a mailbox holds now, and whether it ended (without waiting for more). */
const drained = (mailbox: Mailbox.ReadonlyMailbox<TaskEvent, unknown>) =>
  Effect.suspend(() =>
    Option.exists(mailbox.unsafeSize(), (n) => n === 0)
      ? Effect.succeed({ events: [] as Array<string>, done: false })
      : Effect.map(mailbox.takeAll, ([events, done]) => ({ events: Chunk.toArray(events).map((e) => e._tag), done }))
  )

/** The platform's parts and cluster tasks on the journal in context, which holds `taskId` (agent-1's, process p1's, refund 7). */
const journaledTask = (taskId: string) =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const parts = yield* makeParts({ tokens: new Map() }, journal)
    const tasks = yield* ClusterTasks.make(parts.tasks, journal)
    const [entry] = (yield* Toolkit.make(refund)).manifest
    yield* journal.started({
      runId: taskId,
      kind: "task",
      agentId: "agent-1",
      processId: "p1",
      prompt: "refund 7",
      tools: [{ entry: entry!, own: true }]
    })
    return { parts, tasks }
  })

/** What the platform logged, in the test that reads it. */
const logs: Array<string> = []

describe("attaching to a held task (cluster mode's follower)", () => {
  it.scopedLive("a re-attach that finds another attachment ends with TaskTakenOver; the other keeps the task; a fresh attach takes it over", () =>
    Effect.gen(function*() {
      const { tasks } = yield* journaledTask("task-1")
      const attach = (attachmentId: string, reattach: boolean) =>
        tasks.attachHeld({ agentId: "agent-1", taskId: "task-1", events: "calls", follower: { attachmentId, reattach } })
      const a = yield* attach("attachment-a", false)
      // The loop asks the model, which asks for a call: it waits for its answer.
      let first = yield* drained(a)
      while (!first.events.includes("ToolCallRequested")) {
        yield* Effect.sleep("5 millis")
        first = { events: [...first.events, ...(yield* drained(a)).events], done: false }
      }
      assert.deepStrictEqual(first.events, ["TaskStarted", "ToolCallRequested"])

      // B attaches (a fresh attach): it takes the task over from A.
      const b = yield* attach("attachment-b", false)
      assert.deepStrictEqual(yield* drained(a), { events: ["TaskTakenOver"], done: true })
      assert.deepStrictEqual(yield* drained(b), { events: ["TaskStarted", "ToolCallRequested"], done: false })

      // A's follower, its shard moved meanwhile, attaches again: B keeps the task, A is told.
      const again = yield* attach("attachment-a", true)
      assert.deepStrictEqual(yield* drained(again), { events: ["TaskTakenOver"], done: true })
      assert.deepStrictEqual(yield* drained(b), { events: [], done: false }, "B is not taken over")

      // B's own re-attach goes on where B was; a fresh attach by A takes the task over again.
      const bAgain = yield* attach("attachment-b", true)
      assert.deepStrictEqual(yield* drained(bAgain), { events: ["TaskStarted", "ToolCallRequested"], done: false })
      const aFresh = yield* attach("attachment-c", false)
      assert.deepStrictEqual(yield* drained(bAgain), { events: ["TaskTakenOver"], done: true })
      assert.deepStrictEqual((yield* drained(aFresh)).events, ["TaskStarted", "ToolCallRequested"])
    }).pipe(Effect.provide(Layer.merge(
      Journal.layerMemory,
      LanguageModel.layerScripted([{ toolCalls: [{ id: "c1", name: "refund", arguments: "{\"n\":7}" }] }])
    ))), { timeout: 10_000 })

  it.scopedLive("the process holding a task goes away with a call pending: the platform logs it, and the task's stream says TaskWaiting naming it", () =>
    Effect.gen(function*() {
      const { parts, tasks } = yield* journaledTask("task-2")
      const scope = yield* Scope.make()
      const a = yield* tasks.attachHeld({ agentId: "agent-1", taskId: "task-2", events: "all" }).pipe(Scope.extend(scope))
      let seen: Array<TaskEvent> = []
      while (!seen.some((e) => e._tag === "ToolCallRequested")) {
        yield* Effect.sleep("5 millis")
        if (Option.exists(a.unsafeSize(), (n) => n > 0)) seen = [...seen, ...Chunk.toArray((yield* a.takeAll)[0])]
      }
      const last = seen[seen.length - 1]!.offset!
      // The process goes away: its attachment's scope closes, the call still pending; none comes back within 3 s.
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(logs.filter((l) => l.includes("went away")), [], "not before a reconnect could come back")
      yield* Effect.sleep("3200 millis")
      const said = "process p1 of agent agent-1, which held the task, went away (its connection closed) with call c1 pending; " +
        "they wait for a process of agent agent-1 to attach"
      assert.isTrue(logs.some((l) => l === `task task-2: ${said}`), logs.join("\n"))
      // Whoever follows the task again from where it was reads why nothing came.
      const task = yield* parts.tasks.held("agent-1", "task-2")
      const again = yield* attachTo(task, "all", undefined, undefined, last)
      const replayed = Chunk.toArray((yield* again.takeAll)[0])
      assert.deepInclude(replayed.map((e) => e._tag === "TaskWaiting" ? e.reason : e._tag), said)
    }).pipe(Effect.provide(Layer.mergeAll(
      Journal.layerMemory,
      LanguageModel.layerScripted([{ toolCalls: [{ id: "c1", name: "refund", arguments: "{\"n\":7}" }] }]),
      Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logs.push(String(message))))
    ))), { timeout: 15_000 })
})
