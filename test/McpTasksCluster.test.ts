/**
 * Two MCP servers keeping their tasks in one PostgreSQL database (the tests' own), with the official client: each
 * answers for every task in it; a task runs on the server that created it, which holds it by a lease, so a server
 * started beside it does not take it; `tasks/cancel` through the other server interrupts its handler where it
 * runs; a server stopped gracefully leaves its running tasks to the other, which runs an idempotent one again.
 * Leases of 900 ms (renewed every 300 ms): the waits are for that machinery, real time being the point.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect, Exit, Layer, Ref, Schema, Scope } from "effect"
import { Mcp } from "../src/exports/mcp.js"
import { Tool, Toolkit, ToolContext } from "../src/index.js"
import { mcpServer, mcpSessionWith } from "./support/mcpHttp.js"
import { postgres } from "./support/postgres.js"

/** One server's `slow` tool: each start counted, held until `release`; its effect (the call id) kept once done. */
const fixture = Effect.gen(function*() {
  const release = yield* Deferred.make<void>()
  const finalized = yield* Deferred.make<void>()
  const starts = yield* Ref.make(0)
  const effects = yield* Ref.make<Array<string>>([])
  const slow = Tool.make("slow", {
    description: "Slow and idempotent.",
    input: { text: Schema.String },
    output: Schema.String,
    timeout: "30 seconds",
    idempotent: true
  }, ({ text }) =>
    Effect.gen(function*() {
      yield* Ref.update(starts, (n) => n + 1)
      yield* Deferred.await(release)
      const context = yield* ToolContext.current
      yield* Ref.update(effects, (all) => [...all, context._tag === "Some" ? context.value.toolCallId : "none"])
      return `slow ${text}`
    }).pipe(Effect.onInterrupt(() => Deferred.succeed(finalized, undefined))))
  return { toolkit: yield* Toolkit.make(slow), release, finalized, starts, effects }
})

const tokens = new Map([["tok-a", "alice"]])
const as = { authorization: "Bearer tok-a" }

const serverOn = (toolkit: Toolkit.Toolkit<any>, url: string, scope: Scope.Scope) =>
  mcpServer(toolkit, Mcp.Tasks.layerPostgres(url).pipe(Layer.orDie), { tokens, tasks: { lease: "900 millis" } }).pipe(
    Scope.extend(scope)
  )

const callAsTask = (client: Client, text: string) =>
  Effect.promise(() =>
    client.request({ method: "tools/call", params: { name: "slow", arguments: { text }, task: {} } }, CreateTaskResultSchema)
  ).pipe(Effect.map((created) => created.task.taskId))

const statusOf = (client: Client, taskId: string) =>
  Effect.map(Effect.promise(() => client.experimental.tasks.getTask(taskId)), (task) => task.status)

/** Until `done` holds (each check a real round trip or a look at the tools' state). */
const until = (done: Effect.Effect<boolean>) => Effect.repeat(Effect.zipLeft(done, Effect.sleep("50 millis")), { until: (ok) => ok })

describe("Mcp tasks on one PostgreSQL, two servers", () => {
  it.scopedLive("each answers for every task; the one running a task keeps it; a cancel through the other interrupts it; a graceful stop leaves it to the other", () =>
    Effect.gen(function*() {
      const { url } = yield* postgres()
      const a = yield* fixture
      const b = yield* fixture
      const scopeA = yield* Scope.make()
      const portA = yield* serverOn(a.toolkit, url, scopeA)
      const clientA = yield* mcpSessionWith(portA, as).pipe(Scope.extend(scopeA))
      const first = yield* callAsTask(clientA, "one")
      yield* until(Effect.map(Ref.get(a.starts), (n) => n === 1))
      // B starts beside A while A holds the task, and runs through several of its lease periods.
      const portB = yield* serverOn(b.toolkit, url, yield* Effect.scope)
      const clientB = yield* mcpSessionWith(portB, as)
      yield* Effect.sleep("2 seconds")
      assert.strictEqual(yield* Ref.get(b.starts), 0, "B took no task A holds")
      assert.strictEqual(yield* statusOf(clientB, first), "working")
      // Cancelled through B: A's handler is interrupted where it runs.
      yield* Effect.promise(() => clientB.experimental.tasks.cancelTask(first))
      yield* Deferred.await(a.finalized)
      assert.strictEqual(yield* statusOf(clientA, first), "cancelled")
      // A second task on A; A stops gracefully with it running: B takes it back, runs it again, completes it.
      const second = yield* callAsTask(clientA, "two")
      yield* until(Effect.map(Ref.get(a.starts), (n) => n === 2))
      yield* Scope.close(scopeA, Exit.void)
      yield* Deferred.succeed(b.release, undefined)
      yield* until(Effect.map(statusOf(clientB, second), (status) => status === "completed"))
      const result = yield* Effect.promise(() => clientB.experimental.tasks.getTaskResult(second, CallToolResultSchema))
      assert.deepStrictEqual(result.structuredContent, { result: "slow two" })
      assert.deepStrictEqual(yield* Ref.get(a.effects), [])
      assert.deepStrictEqual(yield* Ref.get(b.effects), [second])
      assert.strictEqual(yield* Ref.get(b.starts), 1)
    }), 120_000)
})
