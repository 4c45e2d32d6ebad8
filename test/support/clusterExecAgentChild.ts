/**
 * A platform runner for the exec_agent cluster test that kills one (test/platform/ClusterExecAgent.test.ts):
 * `Cluster.layer` on the PostgreSQL at DATABASE_URL, agent-a allowed to call agent-b, its cluster
 * socket on RUNNER_PORT, its WebSocket on 127.0.0.1 (a port of the OS's), the model of
 * execAgent.ts. It prints `listening:<url>` once serving.
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Logger, LogLevel, Redacted, Schedule } from "effect"
import { LanguageModel, Timing } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { router } from "./execAgent.js"

const program = Effect.gen(function*() {
  const url = yield* PlatformServer.url
  process.stdout.write(`listening:${url}\n`)
  return yield* Effect.never
})

program.pipe(
  Effect.provide(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provide(Cluster.layer({
        tokens: new Map([["tok-a", "agent-a"], ["tok-b", "agent-b"]]),
        agentCalls: { "agent-a": ["agent-b"] },
        runner: { port: Number(process.env.RUNNER_PORT), shardsPerGroup: 30 }
      })),
      Layer.provide(LanguageModel.layerScripted([router], { repeat: true })),
      Layer.provide(PgClient.layer({ url: Redacted.make(process.env.DATABASE_URL!) })),
      Layer.provide(Timing.layer({ redelivery: Schedule.spaced("1 second") }))
    )
  ),
  Logger.withMinimumLogLevel(LogLevel.fromLiteral((process.env.LOG_LEVEL ?? "Warning") as LogLevel.Literal)),
  NodeRuntime.runMain
)
