/**
 * MCP tasks that need the client (revision 2025-11-25), with the official SDK's client over Streamable HTTP: a call
 * that needs approval (`needsApproval`, `Hooks.approval`) made as a task waits in `input_required`, its question
 * sent as `elicitation/create` naming the task; a yes runs it to `completed`, a no ends it `failed` with the words a
 * call without a task gets; a client that cannot be asked gets the call refused, as without tasks. Each status change
 * reaches the client as `notifications/tasks/status`. A server started again on the same file asks the question of
 * a task it took back when the principal's client comes back. A task's call that samples reaches the client's model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  type ElicitResult,
  RELATED_TASK_META_KEY,
  TaskStatusNotificationSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Exit, Layer, Option, Ref, Schema, Scope } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Mcp } from "../src/exports/mcp.js"
import { Hooks, Sampling, Tool, Toolkit } from "../src/index.js"
import { mcpServer } from "./support/mcpHttp.js"

/** `refund` needs approval; `wait` runs until cancelled. `effects` counts the refunds made. */
const fixture = Effect.gen(function*() {
  const effects = yield* Ref.make(0)
  const refund = Tool.make("refund", {
    description: "Refund an order.",
    input: { order: Schema.String },
    output: Schema.String,
    timeout: "30 seconds",
    idempotent: true,
    needsApproval: true
  }, ({ order }) => Effect.as(Ref.update(effects, (n) => n + 1), `refunded ${order}`))
  const wait = Tool.make("wait", { description: "Waits.", input: {}, output: Schema.String, timeout: "30 seconds" }, () => Effect.never)
  const summarize = Tool.make("summarize", {
    description: "Has the client's model summarize a text.",
    input: { text: Schema.String },
    output: Schema.String,
    timeout: "30 seconds"
  }, ({ text }) =>
    Effect.flatMap(Effect.serviceOption(Sampling.Sampling), (model) =>
      Option.isNone(model) ? Effect.succeed("no model to ask") : model.value.ask(`Summarize: ${text}`, { maxTokens: 50 })))
  return { toolkit: yield* Toolkit.make(refund, wait, summarize), effects }
})

const tokens = new Map([["tok-a", "alice"]])

/** The server, approvals asked by `Hooks.approval`, tasks in `store`; in `scope` (closing it stops the server). */
const serverOn = (toolkit: Toolkit.Toolkit<any>, store: Layer.Layer<Mcp.Tasks.McpTaskStore>, scope: Scope.Scope) =>
  mcpServer(toolkit, Layer.merge(store, Hooks.layer({ tool: [Hooks.approval] })), { tokens }).pipe(Scope.extend(scope))

/** An official client of alice, with elicitation answered by `answer` when given; the statuses it is told. */
const connect = (port: number, answer?: (message: string, taskId: unknown) => Promise<ElicitResult>) =>
  Effect.gen(function*() {
    const client = new Client({ name: "test", version: "1.0.0" }, answer === undefined ? {} : { capabilities: { elicitation: {} } })
    if (answer !== undefined) {
      client.setRequestHandler(ElicitRequestSchema, (request) =>
        answer(request.params.message, request.params._meta?.[RELATED_TASK_META_KEY]))
    }
    const told: Array<[string, string]> = []
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => void told.push([n.params.taskId, n.params.status]))
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
      requestInit: { headers: { authorization: "Bearer tok-a" } }
    })
    yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
    return { client, told }
  })

const callAsTask = (client: Client, name: string, args: Record<string, unknown>) =>
  Effect.promise(() =>
    client.request({ method: "tools/call", params: { name, arguments: args, task: { ttl: 60_000 } } }, CreateTaskResultSchema)
  ).pipe(Effect.map((created) => created.task.taskId))

/** `tasks/get` until the task has ended (each poll a real round trip). */
const settled = (client: Client, taskId: string) =>
  Effect.promise(() => client.experimental.tasks.getTask(taskId)).pipe(
    Effect.tap((task) => task.status === "working" || task.status === "input_required" ? Effect.sleep("50 millis") : Effect.void),
    Effect.repeat({ until: (task) => task.status !== "working" && task.status !== "input_required" })
  )

/** Until `told` holds `entry` (notifications come on the GET stream, after the state they tell of is stored). */
const toldOf = (told: Array<[string, string]>, entry: [string, string]) =>
  Effect.sleep("20 millis").pipe(Effect.repeat({ until: () => told.some(([id, s]) => id === entry[0] && s === entry[1]) }))

const textOf = (result: { readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }> }) =>
  result.content.map((c) => c.text ?? "").join("")

describe("Mcp tasks asking the client", () => {
  it.scopedLive("a task that needs approval waits in input_required, its question naming it; a yes completes it, each status told", () =>
    Effect.gen(function*() {
      const { effects, toolkit } = yield* fixture
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, yield* Effect.scope)
      const asked: Array<{ message: string; related: unknown; status: string }> = []
      let client: Client | undefined
      const alice = yield* connect(port, async (message, related) => {
        // While the question is open, the task says it waits for input.
        const taskId = (related as { taskId: string }).taskId
        asked.push({ message, related, status: (await client!.experimental.tasks.getTask(taskId)).status })
        return { action: "accept", content: { answer: "yes" } }
      })
      client = alice.client
      const taskId = yield* callAsTask(alice.client, "refund", { order: "A-1" })
      const done = yield* settled(alice.client, taskId)
      assert.strictEqual(done.status, "completed")
      assert.deepStrictEqual(asked, [{ message: `Allow refund {"order":"A-1"}? [y/N]`, related: { taskId }, status: "input_required" }])
      const result = yield* Effect.promise(() => alice.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))
      assert.deepStrictEqual(result.structuredContent, { result: "refunded A-1" })
      assert.strictEqual(yield* Ref.get(effects), 1)
      yield* toldOf(alice.told, [taskId, "completed"])
      assert.deepStrictEqual(alice.told.map(([, s]) => s), ["input_required", "working", "completed"])
    }), 30_000)

  it.scopedLive("a no ends the task failed with the words a call without a task gets; nothing ran", () =>
    Effect.gen(function*() {
      const { effects, toolkit } = yield* fixture
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, yield* Effect.scope)
      const alice = yield* connect(port, () => Promise.resolve({ action: "accept", content: { answer: "no" } }))
      const taskId = yield* callAsTask(alice.client, "refund", { order: "B-2" })
      const done = yield* settled(alice.client, taskId)
      assert.strictEqual(done.status, "failed")
      const plain = yield* Effect.promise(() => alice.client.callTool({ name: "refund", arguments: { order: "B-2" } }))
      const plainText = textOf(plain as { content: Array<{ type: string; text?: string }> })
      assert.include(plainText, "the user did not approve this call; it did not run")
      assert.strictEqual(done.statusMessage, plainText)
      const result = yield* Effect.promise(() => alice.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))
      assert.isTrue(result.isError)
      assert.strictEqual(textOf(result), plainText)
      assert.strictEqual(yield* Ref.get(effects), 0)
      yield* toldOf(alice.told, [taskId, "failed"])
    }), 30_000)

  it.scopedLive("a client that cannot be asked: refused as without tasks; a cancelled task is told as cancelled", () =>
    Effect.gen(function*() {
      const { effects, toolkit } = yield* fixture
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, yield* Effect.scope)
      const alice = yield* connect(port)
      const taskId = yield* callAsTask(alice.client, "refund", { order: "C-3" })
      const done = yield* settled(alice.client, taskId)
      assert.strictEqual(done.status, "failed")
      assert.include(done.statusMessage ?? "", "needs approval, and no user is available to give it")
      assert.strictEqual(yield* Ref.get(effects), 0)
      const waiting = yield* callAsTask(alice.client, "wait", {})
      yield* Effect.promise(() => alice.client.experimental.tasks.cancelTask(waiting))
      yield* toldOf(alice.told, [waiting, "cancelled"])
    }), 30_000)

  it.scopedLive("a task's call that samples reaches the client's model, the request naming the task, the task input_required meanwhile", () =>
    Effect.gen(function*() {
      const { toolkit } = yield* fixture
      const port = yield* serverOn(toolkit, Mcp.Tasks.layerMemory, yield* Effect.scope)
      const client = new Client({ name: "test", version: "1.0.0" }, { capabilities: { sampling: {} } })
      const requests: Array<{ prompt: string; related: unknown }> = []
      client.setRequestHandler(CreateMessageRequestSchema, (request) => {
        const content = request.params.messages[0]?.content
        const prompt = content !== undefined && !Array.isArray(content) && content.type === "text" ? content.text : ""
        requests.push({ prompt, related: request.params._meta?.[RELATED_TASK_META_KEY] })
        return { role: "assistant", model: "client-model", content: { type: "text", text: "short" } }
      })
      const told: Array<[string, string, string | undefined]> = []
      client.setNotificationHandler(TaskStatusNotificationSchema, (n) => void told.push([n.params.taskId, n.params.status, n.params.statusMessage]))
      const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), {
        requestInit: { headers: { authorization: "Bearer tok-a" } }
      })
      yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
      const taskId = yield* callAsTask(client, "summarize", { text: "a long story" })
      assert.strictEqual((yield* settled(client, taskId)).status, "completed")
      const result = yield* Effect.promise(() => client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))
      assert.deepStrictEqual(result.structuredContent, { result: "short" })
      assert.deepStrictEqual(requests, [{ prompt: "Summarize: a long story", related: { taskId } }])
      yield* Effect.sleep("20 millis").pipe(Effect.repeat({ until: () => told.some(([, s]) => s === "completed") }))
      assert.deepStrictEqual(told, [
        [taskId, "input_required", "waiting for the client's model"],
        [taskId, "working", undefined],
        [taskId, "completed", undefined]
      ])
    }), 30_000)

  it.scopedLive("a server started again on the same file asks the question of the task it took back when the client comes back", () =>
    Effect.gen(function*() {
      const filename = join(mkdtempSync(join(tmpdir(), "mcp-tasks-ask-")), "tasks.sqlite")
      const store = () => Mcp.Tasks.layerSql({ filename }).pipe(Layer.orDie)
      const first = yield* fixture
      const firstScope = yield* Scope.make()
      const port1 = yield* serverOn(first.toolkit, store(), firstScope)
      let asked: () => void = () => undefined
      const wasAsked = new Promise<void>((resolve) => asked = resolve)
      // The first client is asked and never answers; then the server stops.
      const client1 = yield* connect(port1, () => {
        asked()
        return new Promise<never>(() => undefined)
      }).pipe(Scope.extend(firstScope))
      const taskId = yield* callAsTask(client1.client, "refund", { order: "D-4" })
      yield* Effect.promise(() => wasAsked)
      assert.strictEqual((yield* Effect.promise(() => client1.client.experimental.tasks.getTask(taskId))).status, "input_required")
      yield* Scope.close(firstScope, Exit.void)
      const second = yield* fixture
      const port2 = yield* serverOn(second.toolkit, store(), yield* Effect.scope)
      const questions: Array<unknown> = []
      const alice = yield* connect(port2, (_message, related) => {
        questions.push(related)
        return Promise.resolve({ action: "accept", content: { answer: "y" } })
      })
      assert.strictEqual((yield* settled(alice.client, taskId)).status, "completed")
      assert.deepStrictEqual(questions, [{ taskId }])
      assert.strictEqual(yield* Ref.get(first.effects), 0)
      assert.strictEqual(yield* Ref.get(second.effects), 1)
    }), 30_000)
})
