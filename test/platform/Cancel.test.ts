/**
 * Cancelling a task (design: Cancelling a task): a task whose call sleeps 30 s, cancelled through the operator API
 * or by a client of its agent, has that call interrupted in the serving process (its handler's finalizer runs at
 * once), its stream ends with `TaskCancelled` naming who, and a platform restarted on the same journal file does not
 * run it again; cancelling a parent cancels the task its `exec_agent` call started. Real WebSocket servers on
 * 127.0.0.1, the scripted model, a journal in SQLite.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Exit, Fiber, Layer, Redacted, Schedule, Schema, Scope, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { call, promptOf, stepOf } from "../support/execAgent.js"
import { clientLayer } from "../support/platform.js"

const tokens = new Map([["tok-a", "agent-a"], ["tok-b", "agent-b"]])
const admin = "admin-token-0123456789"

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

/** A task with this prompt calls `slow`; one with `delegate` asks agent-b to (exec_agent). */
const sleepPrompt = "Sleep on it."
const delegatePrompt = "Ask agent-b to sleep on it."

const model: LanguageModel.ScriptedTurn = (request) => {
  if (stepOf(request) > 0) return { text: "done" }
  return promptOf(request) === delegatePrompt
    ? { toolCalls: [call("e1", "exec_agent", { agent: "agent-b", prompt: sleepPrompt })] }
    : { toolCalls: [call("s1", "slow")] }
}

/** `slow`: sleeps 30 s in a scope whose finalizer records its release; `started` once it sleeps. */
const slowTool = () =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const released = yield* Deferred.make<number>()
    let runs = 0
    const tool = Tool.make("slow", {
      description: "Sleeps for half a minute.",
      input: {},
      output: Schema.String,
      timeout: "60 seconds"
    }, () =>
      Effect.scoped(Effect.gen(function*() {
        yield* Effect.acquireRelease(
          Effect.sync(() => void runs++),
          () => Deferred.succeed(released, Date.now())
        )
        yield* Deferred.succeed(started, undefined)
        yield* Effect.sleep("30 seconds")
        return "slept"
      })))
    return { tool, started, released, runs: () => runs }
  })

/** The embedded platform on a loopback port with the journal `file`, an admin operator token; its URLs and model. */
const platform = (file: string) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      PlatformServer.layerHandlers({
        tokens,
        journal: file,
        agentCalls: { "agent-a": ["agent-b"] },
        operatorTokens: [{ token: Redacted.make(admin), role: "admin", name: "root" }]
      }).pipe(
        (handlers) => PlatformServer.layerWebSocket({ port: 0 }).pipe(Layer.provideMerge(handlers)),
        Layer.provideMerge(LanguageModel.layerScripted([model], { repeat: true })),
        Layer.provide(policy)
      )
    )
    const url = yield* Effect.provide(PlatformServer.url, context)
    const { port } = Context.get(context, PlatformServer.Listening)
    return {
      url,
      api: `http://127.0.0.1:${port}/api/v1`,
      state: Context.get(context, PlatformServer.PlatformState),
      requests: Effect.flatMap(LanguageModel.Scripted, (s) => s.requests).pipe(Effect.provide(context))
    }
  }).pipe(Effect.orDie)

/** A serving process of `agentId` serving `tool`, for the scope; with its client. */
const servingProcess = (url: string, agentId: string, token: string, tool: Tool.Any) =>
  Effect.gen(function*() {
    const client = yield* Layer.build(clientLayer({ url, agentId, token }, policy))
    const served = yield* Serve.makeConfig(yield* Toolkit.make(tool), { shutdownGrace: "100 millis" }).pipe(Effect.provide(client))
    return Object.assign(served, { client: Context.get(client, PlatformClient.PlatformClient) })
  }).pipe(Effect.orDie)

const tempFile = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-cancel-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => join(dir, "journal.sqlite")
)

/** Submits `prompt`: the task's id once it started, and the fiber collecting its events to the end. */
const submit = (served: Serve.Serve["Type"], prompt: string) =>
  Effect.gen(function*() {
    const id = yield* Deferred.make<string>()
    const events = yield* served.submitTask(prompt).pipe(
      Stream.tap((event) => event._tag === "TaskStarted" ? Deferred.succeed(id, event.taskId) : Effect.void),
      Stream.runCollect,
      Effect.map(Chunk.toReadonlyArray),
      Effect.fork
    )
    return { taskId: yield* Deferred.await(id), events }
  })

const lastOf = (events: ReadonlyArray<Protocol.TaskEvent>) => events[events.length - 1]!

/** The task's last event, as a client of `agentId` attaching to it reads it. */
const endOf = (client: PlatformClient.PlatformClient["Type"], agentId: string, taskId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const mailbox = yield* client.attachTask({ agentId, processId: "reader", taskId, events: "calls" })
    const events = yield* Effect.orDie(Effect.timeout(mailbox.takeAll, "5 seconds"))
    return Chunk.toReadonlyArray(events[0]).at(-1)
  }))

describe("cancelling a task", { timeout: 20_000 }, () => {
  it.scopedLive("an operator cancels a task: its 30 s call is interrupted at once, its stream ends TaskCancelled; a restart does not run it again", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const scope = yield* Scope.make()
      const first = yield* Scope.extend(platform(file), scope)
      const slow = yield* slowTool()
      const a = yield* Scope.extend(servingProcess(first.url, "agent-a", "tok-a", slow.tool), scope)
      const { events, taskId } = yield* submit(a, sleepPrompt)
      yield* Deferred.await(slow.started)

      const before = Date.now()
      const response = yield* Effect.promise(() =>
        fetch(`${first.api}/tasks/${taskId}/cancel`, {
          method: "POST",
          headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
          body: JSON.stringify({ reason: "customer withdrew" })
        })
      )
      assert.strictEqual(response.status, 202)
      const releasedAt = yield* Effect.timeout(Deferred.await(slow.released), "2 seconds")
      assert.isBelow(releasedAt - before, 1000)

      const end = lastOf(yield* Fiber.join(events))
      assert.deepInclude(end, { _tag: "TaskCancelled", taskId, by: "operator root", reason: "customer withdrew" })
      assert.strictEqual((yield* first.requests).length, 1)
      assert.strictEqual(slow.runs(), 1)
      yield* Scope.close(scope, Exit.void)

      // Restarted on the same journal, with a process of agent-a serving the tool again: the task stays cancelled.
      const second = yield* platform(file)
      const b = yield* servingProcess(second.url, "agent-a", "tok-a", slow.tool)
      yield* Effect.sleep("300 millis")
      assert.deepStrictEqual(yield* second.requests, [])
      assert.strictEqual(slow.runs(), 1)
      assert.deepInclude(yield* endOf(b.client, "agent-a", taskId), { _tag: "TaskCancelled", by: "operator root" })
    }))

  it.scopedLive("a client of the task's agent cancels it: the call is interrupted, the stream ends TaskCancelled by the agent", () =>
    Effect.gen(function*() {
      const { url } = yield* platform(yield* tempFile)
      const slow = yield* slowTool()
      const a = yield* servingProcess(url, "agent-a", "tok-a", slow.tool)
      const { events, taskId } = yield* submit(a, sleepPrompt)
      yield* Deferred.await(slow.started)

      const before = Date.now()
      assert.deepStrictEqual(yield* a.client.cancel(taskId, "changed my mind"), { cancelled: true })
      assert.isBelow((yield* Effect.timeout(Deferred.await(slow.released), "2 seconds")) - before, 1000)
      const end = lastOf(yield* Fiber.join(events))
      assert.deepInclude(end, { _tag: "TaskCancelled", by: "agent agent-a", reason: "changed my mind" })
      // The stream told the process its call was cancelled before the end.
      assert.isTrue((yield* Fiber.join(events)).some((e) => e._tag === "ToolCallCancelled" && e.toolCallId === "s1"))
      // Ended: cancelling again does nothing.
      assert.deepStrictEqual(yield* a.client.cancel(taskId), { cancelled: false })
    }))

  it.scopedLive("a call routed to a worker (the task's holder does not serve its tool) is interrupted in the worker", () =>
    Effect.gen(function*() {
      const { url } = yield* platform(yield* tempFile)
      const slow = yield* slowTool()
      yield* servingProcess(url, "agent-a", "tok-a", slow.tool)
      const note = Tool.make("note", { description: "Notes.", input: {}, output: Schema.String, timeout: "5 seconds" }, () =>
        Effect.succeed("noted"))
      const submitter = yield* servingProcess(url, "agent-a", "tok-a", note)
      const { events, taskId } = yield* submit(submitter, sleepPrompt)
      yield* Deferred.await(slow.started)

      const before = Date.now()
      assert.deepStrictEqual(yield* submitter.client.cancel(taskId), { cancelled: true })
      assert.isBelow((yield* Effect.timeout(Deferred.await(slow.released), "2 seconds")) - before, 1000)
      assert.deepInclude(lastOf(yield* Fiber.join(events)), { _tag: "TaskCancelled", by: "agent agent-a", reason: "" })
    }))

  it.scopedLive("cancelling a parent cancels the task its exec_agent call started, and interrupts that task's call", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform(yield* tempFile)
      const slow = yield* slowTool()
      const b = yield* servingProcess(url, "agent-b", "tok-b", slow.tool)
      yield* state.watchingProcesses("agent-b").pipe(
        Effect.repeat({ until: (p) => p.length > 0, schedule: Schedule.spaced("10 millis") })
      )
      const unused = yield* slowTool()
      const a = yield* servingProcess(url, "agent-a", "tok-a", unused.tool)
      const { events, taskId } = yield* submit(a, delegatePrompt)
      yield* Deferred.await(slow.started)

      const before = Date.now()
      assert.deepStrictEqual(yield* a.client.cancel(taskId, "not needed"), { cancelled: true })
      assert.isBelow((yield* Effect.timeout(Deferred.await(slow.released), "2 seconds")) - before, 1000)
      assert.deepInclude(lastOf(yield* Fiber.join(events)), { _tag: "TaskCancelled", by: "agent agent-a" })
      assert.deepInclude(yield* endOf(b.client, "agent-b", `${taskId}/e1`), {
        _tag: "TaskCancelled",
        by: "agent agent-a",
        reason: `its parent task ${taskId} was cancelled`
      })
    }))
})
