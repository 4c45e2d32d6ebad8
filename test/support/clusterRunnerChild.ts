/**
 * A platform runner for the cluster failover test: `Cluster.layer` on the PostgreSQL at DATABASE_URL,
 * its cluster socket on RUNNER_PORT, its WebSocket on 127.0.0.1 (a port of the OS's). The tasks'
 * model is a script of TURNS calls (each to the task's own tool, on the prompt's number and the
 * step) and then a text; every ask is appended to ASKS_FILE as `<time> <RUNNER> <prompt> <step>`
 * before it is answered. It prints `listening:<url>` once serving.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Logger, LogLevel, Schedule } from "effect"
import { appendFileSync } from "node:fs"
import { LanguageModel, Timing } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import * as Cluster from "../../src/platform/Cluster.js"
import * as ClusterDatabase from "../../src/platform/ClusterDatabase.js"

const turns = Number(process.env.TURNS ?? 4)

const promptOf = (request: LanguageModel.ModelRequest) => {
  const first = request.messages.find((m) => m._tag === "UserMessage")
  return first?._tag === "UserMessage" ? first.text : ""
}

const stepOf = (request: LanguageModel.ModelRequest) => request.messages.filter((m) => m._tag === "AssistantMessage").length

const turn: LanguageModel.ScriptedTurn = (request) => {
  const prompt = promptOf(request)
  const step = stepOf(request)
  appendFileSync(process.env.ASKS_FILE!, `${Date.now()} ${process.env.RUNNER} ${prompt.replace(/ /g, "_")} ${step}\n`)
  if (step >= turns) return { text: `done ${prompt}` }
  return {
    toolCalls: [{
      id: `c${step}`,
      name: request.tools[0]!.name,
      arguments: JSON.stringify({ n: Number(prompt.split(" ")[1]), step })
    }]
  }
}

const program = Effect.gen(function*() {
  const url = yield* PlatformServer.url
  process.stdout.write(`listening:${url}\n`)
  return yield* Effect.never
})

program.pipe(
  Effect.provide(
    // WS_PORT: a fixed port (a runner restarted on the same URL), else one of the OS.
    PlatformServer.layerWebSocket({ port: Number(process.env.WS_PORT ?? 0) }).pipe(
      Layer.provide(Cluster.layer({
        tokens: new Map([["tok-1", "agent-1"]]),
        runner: { port: Number(process.env.RUNNER_PORT), shardsPerGroup: 30 },
        // KEEP_ENDED_TASKS (ms): how long ended tasks are kept (the pruning test's).
        ...(process.env.KEEP_ENDED_TASKS === undefined ? {} : { keepEndedTasks: Number(process.env.KEEP_ENDED_TASKS) })
      })),
      Layer.provide(LanguageModel.layerScripted(Array.from({ length: turns + 1 }, () => turn), { perConversation: true })),
      // As `platform` makes it: waits while the database cannot be reached, fails naming why it refused.
      Layer.provide(ClusterDatabase.layerClient(process.env.DATABASE_URL!)),
      Layer.provide(Timing.layer({
        redelivery: Schedule.spaced("2 seconds"),
        // SWEEP (ms): the retention sweep's interval (the pruning test's).
        ...(process.env.SWEEP === undefined ? {} : { platformSweep: Schedule.spaced(Number(process.env.SWEEP)) })
      })),
      // METRICS=1: the Prometheus text at /metrics (platform --metrics).
      Layer.provide(process.env.METRICS === "1" ? PlatformServer.layerPrometheus : Layer.empty)
    )
  ),
  // LOG_LEVEL (e.g. Debug) shows the engine's own lines when a test is being looked into.
  Logger.withMinimumLogLevel(LogLevel.fromLiteral((process.env.LOG_LEVEL ?? "Warning") as LogLevel.Literal)),
  NodeRuntime.runMain
)
