/**
 * The operator API of a cluster's runners (docs: operations), on a real PostgreSQL: its reads go through the
 * journal, so any runner lists the tasks and approvals of the whole cluster; a decision made on another runner
 * than the task's reaches the task's owner (its author journaled), and so does a cancel; any runner shows every agent's
 * processes, whichever runner they are connected to.
 */
import { assert, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Logger, LogLevel, Redacted, Schedule, Schema, Stream } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import type { Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { clientLayer } from "../support/platform.js"
import * as Pg from "../support/postgres.js"
import { resultsOf } from "../support/refundTools.js"
import { admin, approver, operatorTokens, viewer } from "../support/operators.js"

const tokens = new Map([["tok-1", "agent-1"]])
const policy = Timing.layer({
  redelivery: Schedule.spaced("1 second"),
  reconnect: Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(300)))
})

/** Turn 1: a refund that needs approval; turn 2: what the model read. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [{ id: "r1", name: "refund", arguments: JSON.stringify({ orderId: "A-1", amount: 5 }) }] },
  (request) => ({ text: resultsOf(request).join(" | ") })
]

const refund = Tool.make("refund", {
  description: "Refunds an order.",
  input: { orderId: Schema.String, amount: Schema.Number },
  output: Schema.String,
  timeout: "10 seconds",
  needsApproval: true
}, ({ amount, orderId }) => Effect.succeed(`refunded ${amount} on ${orderId}`))

/** A runner on the database at `url`, with the operator tokens: its WebSocket's URL and its API's base URL. */
const startRunner = (url: string, models: Context.Context<LanguageModel.LanguageModel>) =>
  Effect.gen(function*() {
    const port = yield* Effect.promise(() => Pg.freePort())
    const context = yield* Layer.build(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provideMerge(Cluster.layer({ tokens, operatorTokens, runner: { port, shardsPerGroup: 30 } })),
        Layer.provide(Layer.succeedContext(models)),
        Layer.provide(PgClient.layer({ url: Redacted.make(url) })),
        Layer.provide(policy),
        Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
      )
    )
    const { port: listening } = Context.get(context, PlatformServer.Listening)
    return { ws: yield* Effect.provide(PlatformServer.url, context), api: `http://127.0.0.1:${listening}/api/v1` }
  })

/** A request to a runner's API: its status and JSON body. */
const call = (api: string, path: string, token: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${api}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return { status: response.status, body: await response.json() as any }
  })

layer(Pg.layer(), { timeout: "120 seconds", excludeTestServices: true })("operator API in cluster mode", (it) => {
  it.scoped("another runner lists the task's approval, decides it (the task goes on where it runs) and cancels", () =>
    Effect.gen(function*() {
      const server = yield* Pg.Postgres
      const sql = yield* SqlClient.SqlClient
      yield* Effect.orDie(sql.unsafe("CREATE DATABASE operator_api"))
      const url = server.url.replace(/\/[^/]+$/, "/operator_api")
      yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))
      const models = yield* Layer.build(LanguageModel.layerScripted(script, { perConversation: true }))
      const [a, b] = yield* Effect.all([startRunner(url, models), startRunner(url, models)], { concurrency: "unbounded" })
      const client = Context.get(yield* Layer.build(clientLayer({ url: a!.ws }, policy)), PlatformClient.PlatformClient)
      const served = yield* Serve.makeConfig(yield* Toolkit.make(refund)).pipe(
        Effect.provideService(PlatformClient.PlatformClient, client),
        Effect.provide(policy)
      )
      const seen: Array<unknown> = []
      const run = (decide: (taskId: string) => Effect.Effect<void>) =>
        served.submitTask("refund A-1").pipe(
          Stream.tap((event) => event._tag === "TaskSuspended" ? decide(event.taskId) : Effect.void),
          Stream.runCollect,
          Effect.map((events) => [...events].at(-1) as Protocol.TaskEvent),
          Effect.timeout("60 seconds"),
          Effect.orDie
        )
      // Decided on runner b, whichever runner holds the task (once: a task taken over says TaskSuspended again).
      const decidedTasks = new Set<string>()
      const approved = yield* run((taskId) =>
        Effect.gen(function*() {
          if (decidedTasks.has(taskId)) return
          decidedTasks.add(taskId)
          const listed = yield* call(b!.api, "/approvals", viewer)
          seen.push(listed.body.approvals.map((p: any) => [p.taskId === taskId, p.toolCallId, p.agentId]))
          // A runner that joined a moment ago may be taking the task over right then (its shards move to it): the
          // new owner, still replaying the task up to its suspension, answers 409 until it waits again; the operator
          // tries again, as a person would.
          const decided = yield* call(b!.api, `/approvals/${taskId}/r1`, approver, { decision: "approve" }).pipe(
            Effect.filterOrFail((answer) => answer.status !== 409, () => "taken over right now"),
            Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("10 seconds"))),
            Effect.orDie
          )
          seen.push([decided.status, decided.body.decidedBy])
          const timeline = yield* call(b!.api, `/tasks/${taskId}`, viewer)
          seen.push(timeline.body.approvals.map((p: any) => [p.toolCallId, p.decision, p.decidedBy]))
        }))
      assert.deepStrictEqual(seen, [[[true, "r1", "agent-1"]], [200, "alice"], [["r1", "approved", "alice"]]])
      assert.strictEqual(approved._tag === "TaskCompleted" ? approved.output : approved._tag, "r1=\"refunded 5 on A-1\"")
      // Cancelled on runner b: the stop reaches the task's owner.
      const cancelled = yield* run((taskId) => Effect.asVoid(call(b!.api, `/tasks/${taskId}/cancel`, admin, { reason: "withdrawn" })))
      assert.deepInclude(cancelled, { _tag: "TaskCancelled", by: "operator root", reason: "withdrawn" })
      // Its end is journaled by its owner just after its stream said it: read until it is there.
      const outcomes = yield* call(a!.api, "/tasks?status=ended", viewer).pipe(
        Effect.map((listed): ReadonlyArray<string> => listed.body.tasks.map((t: any) => t.outcome)),
        Effect.filterOrFail((seen) => seen.length === 2, () => "not journaled yet"),
        Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("5 seconds"))),
        Effect.orDie
      )
      assert.deepStrictEqual(outcomes, ["cancelled", "completed"], "newest first, on any runner")
      // Each runner shows the agent's process, connected to runner a, with its tools, whichever holds its shard.
      // (Read until it holds, up to 10 s: the journal's count of open tasks follows a task's end by a moment.)
      const expected = [["refund"], [[served.processId, true, true, ["refund"]]], 0]
      for (const runner of [a!, b!]) {
        const read = Effect.map(call(runner.api, "/agents", viewer), (agents) => {
          const agent = agents.body.agents.find((x: any) => x.agentId === "agent-1")
          return [agent.tools, agent.processes.map((p: any) => [p.processId, p.live, p.watching, p.tools]), agent.tasks.held]
        })
        let shown = yield* read
        for (let tries = 0; tries < 100 && JSON.stringify(shown) !== JSON.stringify(expected); tries++) {
          yield* Effect.sleep("100 millis")
          shown = yield* read
        }
        assert.deepStrictEqual(shown, expected)
      }
    }), { timeout: 60_000 })
})
