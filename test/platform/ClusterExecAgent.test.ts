/**
 * Agents that call agents in cluster mode (design: Agents that call agents): not built there yet, and
 * said so: a task of an agent allowed to call another is offered `exec_agent`, which answers that it
 * is not supported in cluster mode and starts no task. A runner on a real PostgreSQL
 * (test/support/postgres.ts), serving processes over WebSocket.
 */
import { assert, layer } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Logger, LogLevel, Redacted, Schedule, Schema } from "effect"
import { LanguageModel, PlatformServer, Serve, Timing, Tool, Toolkit } from "../../src/index.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { clientLayer } from "../support/platform.js"
import * as Pg from "../support/postgres.js"

const tokens = new Map([["tok-a", "agent-a"], ["tok-b", "agent-b"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("1 second"),
  reconnect: Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(300)))
})

/** The tool results the model read, as `id=content` (errors `id!content`). */
const resultsOf = (request: LanguageModel.ModelRequest) =>
  request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}${m.isError ? "!" : "="}${m.content}`] : [])

/** Turn 1: `list_agents`; turn 2: `exec_agent` on agent-b; turn 3: what the model read. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [{ id: "a1", name: "list_agents", arguments: "{}" }] },
  { toolCalls: [{ id: "a2", name: "exec_agent", arguments: JSON.stringify({ agent: "agent-b", prompt: "Say hello." }) }] },
  (request) => ({ text: resultsOf(request).join(" | ") })
]

/** A serving process of `agentId` with one tool, `name`, that counts its runs in `runs`. */
const servingProcess = (url: string, agentId: string, token: string, name: string, runs: Array<string>) =>
  Effect.gen(function*() {
    const client = yield* Layer.build(clientLayer({ url, agentId, token }, policy))
    const tool = Tool.make(name, { description: `Does ${name}.`, input: {}, output: Schema.String, timeout: "10 seconds" }, () =>
      Effect.sync(() => (runs.push(name), name)))
    return yield* Serve.make(yield* Toolkit.make(tool), { shutdownGrace: "100 millis" }).pipe(Effect.provide(client))
  })

layer(Pg.layer(), { timeout: "120 seconds", excludeTestServices: true })("exec_agent in cluster mode", (it) => {
  it.scoped("exec_agent says it is not supported in cluster mode and starts no task of the other agent", () =>
    Effect.gen(function*() {
      const url = (yield* Pg.Postgres).url
      yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))
      const port = yield* Effect.promise(() => Pg.freePort())
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provideMerge(
            Cluster.layer({ tokens, agentCalls: { "agent-a": ["agent-b"] }, runner: { port, shardsPerGroup: 30 } })
          ),
          Layer.provideMerge(LanguageModel.layerScripted(script)),
          Layer.provide(PgClient.layer({ url: Redacted.make(url) })),
          Layer.provide(policy),
          Layer.provide(Logger.minimumLogLevel(LogLevel.Warning))
        )
      )
      const platformUrl = yield* Effect.provide(PlatformServer.url, context)
      const bRuns: Array<string> = []
      yield* servingProcess(platformUrl, "agent-b", "tok-b", "greet", bRuns)
      const a = yield* servingProcess(platformUrl, "agent-a", "tok-a", "note", [])
      const output = yield* a.runTask("Ask agent-b to say hello.")
      assert.include(output, "not supported in cluster mode yet")
      assert.include(
        output,
        "a2!AgentCallFailed: exec_agent agent-b: exec_agent is not supported in cluster mode yet; no task was started"
      )
      assert.deepStrictEqual(bRuns, [])
      const requests = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests).pipe(Effect.provide(context))
      assert.strictEqual(requests.length, 3)
      assert.deepStrictEqual(requests[0]!.tools.map((t) => t.name).sort(), ["exec_agent", "list_agents", "note"])
      const state = Context.get(context, PlatformServer.PlatformState)
      assert.strictEqual((yield* state.agentUsage("agent-b")).tasks, 0)
    }).pipe(Effect.provide(policy)), { timeout: 90_000 })
})
