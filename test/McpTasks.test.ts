/**
 * MCP tasks (revision 2025-11-25) with the official SDK's client over Streamable HTTP: a task-augmented call
 * answers a task at once, `tasks/get` follows it to its end, `tasks/result` gives the result, `tasks/list` shows
 * it, `tasks/cancel` interrupts the handler (its finalizer has run when the answer comes); another token's client
 * sees none of it; a server started again on the same SQLite file answers for the tasks of the one before and
 * takes back those it left running.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Exit, Layer, Ref, Schema, Scope } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Mcp } from "../src/exports/mcp.js"
import { Invocation, Tool, Toolkit, ToolContext } from "../src/index.js"
import { mcpServer, mcpSessionWith } from "./support/mcpHttp.js"

/** The tools, their handlers held by `release` until the test lets them go; `effects` counts finished side effects. */
const fixture = Effect.gen(function*() {
  const release = yield* Deferred.make<void>()
  const started = yield* Deferred.make<void>()
  const finalized = yield* Deferred.make<void>()
  const effects = yield* Ref.make<Array<string>>([])
  const body = (name: string) => ({ text }: { readonly text: string }) =>
    Effect.gen(function*() {
      yield* Deferred.succeed(started, undefined)
      yield* Deferred.await(release)
      const context = yield* ToolContext.current
      const key = context._tag === "Some" ? context.value.toolCallId : "none"
      yield* Ref.update(effects, (all) => [...all, `${name}:${key}`])
      return `${name} ${text}`
    }).pipe(Effect.onInterrupt(() => Deferred.succeed(finalized, undefined)))
  const input = { text: Schema.String }
  const slow = Tool.make("slow", { description: "Slow and idempotent.", input, output: Schema.String, timeout: "30 seconds", idempotent: true }, body("slow"))
  const once = Tool.make("once", { description: "Slow, not idempotent.", input, output: Schema.String, timeout: "30 seconds" }, body("once"))
  const quick = Tool.make("quick", { description: "Quick.", input, output: Schema.String, timeout: "1 second" }, ({ text }) => Effect.succeed(text))
  const toolkit = yield* Toolkit.make(slow, once, quick)
  return { toolkit, release, started, finalized, effects }
})

const tokens = new Map([["tok-a", "alice"], ["tok-b", "bob"]])
const as = (token: string) => ({ authorization: `Bearer ${token}` })

/** A server on the task store `store`, in a scope of its own (closing it is the server stopping); its port. */
const serverOn = (toolkit: Toolkit.Toolkit<any>, store: Layer.Layer<Mcp.Tasks.McpTaskStore>, scope: Scope.Scope) =>
  mcpServer(toolkit, store, { tokens, tasks: { tools: { once: "required" } } }).pipe(Scope.extend(scope))

const callAsTask = (client: Client, name: string, text: string) =>
  Effect.promise(() => client.request({ method: "tools/call", params: { name, arguments: { text }, task: { ttl: 60_000 } } }, CreateTaskResultSchema))

/** Polls `tasks/get` until the task leaves `working` (each poll a real round trip; the server's state is the point). */
const pollUntilDone = (client: Client, taskId: string) =>
  Effect.promise(() => client.experimental.tasks.getTask(taskId)).pipe(
    Effect.tap((task) => task.status === "working" ? Effect.sleep("50 millis") : Effect.void),
    Effect.repeat({ until: (task) => task.status !== "working" })
  )

/** The message a request failed with. */
const errorOf = (request: () => Promise<unknown>) =>
  Effect.promise(() => request().then(() => "no error", (error: unknown) => error instanceof Error ? error.message : String(error)))

describe("Mcp tasks", () => {
  it.scopedLive("lists taskSupport, runs a task to its result, lists it; another principal sees nothing of it", () =>
    Effect.gen(function*() {
      const { effects, release, toolkit } = yield* fixture
      const scope = yield* Effect.scope
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, scope)
      const alice = yield* mcpSessionWith(port, as("tok-a"))
      const bob = yield* mcpSessionWith(port, as("tok-b"))
      const listed = yield* Effect.promise(() => alice.listTools())
      const support = Object.fromEntries(listed.tools.map((t) => [t.name, t.execution?.taskSupport]))
      assert.deepStrictEqual(support, { slow: "optional", once: "required", quick: "forbidden" })
      const created = yield* callAsTask(alice, "slow", "hi")
      assert.strictEqual(created.task.status, "working")
      const taskId = created.task.taskId
      // Bob's client: not found, not listed, not cancelled.
      const bobGet = yield* Effect.exit(Effect.tryPromise(() => bob.experimental.tasks.getTask(taskId)))
      assert.isTrue(Exit.isFailure(bobGet))
      const bobCancel = yield* Effect.exit(Effect.tryPromise(() => bob.experimental.tasks.cancelTask(taskId)))
      assert.isTrue(Exit.isFailure(bobCancel))
      const bobResult = yield* Effect.exit(Effect.tryPromise(() => bob.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)))
      assert.isTrue(Exit.isFailure(bobResult))
      assert.deepStrictEqual((yield* Effect.promise(() => bob.experimental.tasks.listTasks())).tasks, [])
      yield* Deferred.succeed(release, undefined)
      const done = yield* pollUntilDone(alice, taskId)
      assert.strictEqual(done.status, "completed")
      const result = yield* Effect.promise(() => alice.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))
      assert.deepStrictEqual(result.structuredContent, { result: "slow hi" })
      const listedTasks = yield* Effect.promise(() => alice.experimental.tasks.listTasks())
      assert.deepStrictEqual(listedTasks.tasks.map((t) => [t.taskId, t.status]), [[taskId, "completed"]])
      assert.deepStrictEqual(yield* Ref.get(effects), [`slow:${taskId}`])
      // A forbidden tool as a task, a required one without: refused, naming the tool.
      const forbidden = yield* errorOf(() =>
        alice.request({ method: "tools/call", params: { name: "quick", arguments: { text: "x" }, task: {} } }, CreateTaskResultSchema)
      )
      assert.include(forbidden, "quick cannot be called as a task")
      // The SDK's callTool refuses it itself; the server does too, for a client that sends it anyway.
      assert.include(yield* errorOf(() => alice.callTool({ name: "once", arguments: { text: "x" } })), "requires task-based execution")
      const required = yield* errorOf(() =>
        alice.request({ method: "tools/call", params: { name: "once", arguments: { text: "x" } } }, CallToolResultSchema)
      )
      assert.include(required, "once must be called as a task")
    }), 30_000)

  it.scopedLive("tasks/cancel interrupts the handler: its finalizer has run when the answer comes", () =>
    Effect.gen(function*() {
      const { effects, finalized, started, toolkit } = yield* fixture
      const scope = yield* Effect.scope
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, scope)
      const alice = yield* mcpSessionWith(port, as("tok-a"))
      const created = yield* callAsTask(alice, "slow", "long")
      yield* Deferred.await(started)
      const cancelled = yield* Effect.promise(() => alice.experimental.tasks.cancelTask(created.task.taskId))
      assert.strictEqual(cancelled.status, "cancelled")
      assert.isTrue(yield* Deferred.isDone(finalized))
      assert.strictEqual((yield* Effect.promise(() => alice.experimental.tasks.getTask(created.task.taskId))).status, "cancelled")
      assert.deepStrictEqual(yield* Ref.get(effects), [])
    }), 30_000)

  it.scopedLive("a server started again on the same file: the idempotent task runs again and completes, the other fails, outcome unknown", () =>
    Effect.gen(function*() {
      const filename = join(mkdtempSync(join(tmpdir(), "mcp-tasks-")), "tasks.sqlite")
      const first = yield* fixture
      const firstScope = yield* Scope.make()
      const port1 = yield* serverOn(first.toolkit, Mcp.Tasks.layerSql({ filename }).pipe(Layer.orDie), firstScope)
      const client1 = yield* mcpSessionWith(port1, as("tok-a")).pipe(Scope.extend(firstScope))
      const slowTask = (yield* callAsTask(client1, "slow", "again")).task.taskId
      const onceTask = (yield* callAsTask(client1, "once", "never")).task.taskId
      yield* Deferred.await(first.started)
      // The server stops with both running: they stay working in the file.
      yield* Scope.close(firstScope, Exit.void)
      const second = yield* fixture
      yield* Deferred.succeed(second.release, undefined)
      const scope = yield* Effect.scope
      const port2 = yield* serverOn(second.toolkit, Mcp.Tasks.layerSql({ filename }).pipe(Layer.orDie), scope)
      const client2 = yield* mcpSessionWith(port2, as("tok-a"))
      assert.strictEqual((yield* pollUntilDone(client2, slowTask)).status, "completed")
      const slowResult = yield* Effect.promise(() => client2.experimental.tasks.getTaskResult(slowTask, CallToolResultSchema))
      assert.deepStrictEqual(slowResult.structuredContent, { result: "slow again" })
      const once = yield* pollUntilDone(client2, onceTask)
      assert.strictEqual(once.status, "failed")
      assert.include(once.statusMessage ?? "", "its outcome is unknown")
      const onceResult = yield* Effect.promise(() => client2.experimental.tasks.getTaskResult(onceTask, CallToolResultSchema))
      assert.isTrue(onceResult.isError)
      // The side effect once, under the task's id as its key; the first process's run never got to it.
      assert.deepStrictEqual(yield* Ref.get(first.effects), [])
      assert.deepStrictEqual(yield* Ref.get(second.effects), [`slow:${slowTask}`])
      // Bob, on the second server too, sees nothing.
      const bob = yield* mcpSessionWith(port2, as("tok-b"))
      assert.deepStrictEqual((yield* Effect.promise(() => bob.experimental.tasks.listTasks())).tasks, [])
    }), 30_000)

  it.scopedLive("Mcp.toolkit calls a remote tool that supports tasks as a task; past its deadline, the task is cancelled", () =>
    Effect.gen(function*() {
      const { finalized, release, toolkit } = yield* fixture
      const scope = yield* Effect.scope
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, scope)
      const alice = yield* mcpSessionWith(port, as("tok-a"))
      const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp`, headers: as("tok-a"), tools: { slow: { timeout: "300 millis" } } })
      const tools = yield* remote.tools
      const slow = tools.find((t) => t.name === "slow")!
      // Past its deadline: the caller gets the timeout, and the server's task is cancelled, its handler interrupted.
      const timedOut = yield* Invocation.run(slow, { text: "late" })
      assert.include(timedOut.error ?? "", "timed out")
      yield* Deferred.await(finalized)
      const first = (yield* Effect.promise(() => alice.experimental.tasks.listTasks())).tasks
      assert.deepStrictEqual(first.map((t) => t.status), ["cancelled"])
      // Within its deadline: a task again, its result the caller's.
      yield* Deferred.succeed(release, undefined)
      const done = yield* Invocation.run(tools.find((t) => t.name === "once")!, { text: "via task" })
      assert.deepStrictEqual(done.value, { result: "once via task" })
      const all = (yield* Effect.promise(() => alice.experimental.tasks.listTasks())).tasks
      assert.deepStrictEqual(all.map((t) => t.status), ["cancelled", "completed"])
    }), 30_000)
})
