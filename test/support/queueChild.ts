/**
 * The processes of the job-queue tests (test/platform/JobQueue.test.ts, ClusterJobQueue.test.ts) but their workers
 * (the CLI's `serve`: test/support/queue.ts, `cliWorker`), one script, its part set by MODE:
 *
 * - `platform`: the embedded platform on a free loopback port, `agent-1` with token `tok-1`, the scripted model
 *   (each task charges the order its prompt names, call `c1`, then says what it read); prints `url <url>`.
 * - `submit`: a client that serves nothing submits TASKS tasks (prompts `O-1` ...) at once and prints each event
 *   as `event <json>`, then `done`.
 * - `runner`: the same platform as a cluster runner on the PostgreSQL at DATABASE_URL, its cluster socket on
 *   RUNNER_PORT (test/platform/ClusterJobQueue.test.ts); prints `url <url>`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { PgClient } from "@effect/sql-pg"
import { Console, Effect, Layer, Logger, LogLevel, Redacted, Schedule } from "effect"
import { LanguageModel, Timing } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { PlatformClient } from "../../src/exports/serve.js"
import { call, promptOf, resultsOf, stepOf } from "./execAgent.js"

const env = (name: string): string => process.env[name] ?? ""

/** Redelivery often, reconnects quick: the test's minute is short. */
const policy = Timing.layer({
  redelivery: Schedule.spaced("1 second"),
  reconnect: Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(50)))
})

const script: LanguageModel.ScriptedTurn = (request) =>
  stepOf(request) === 0
    ? { toolCalls: [call("c1", "charge", { order: promptOf(request) })] }
    : { text: resultsOf(request).join(" ") }

const tokens = new Map([["tok-1", "agent-1"]])
const model = LanguageModel.layerScripted([script], { repeat: true, keepRequests: false })

const platformHandlers = PlatformServer.layerHandlers({ tokens, lifecycleBudget: 1000 })

/** The platform as a cluster runner (`runner`). */
const runnerHandlers = Cluster.layer({ tokens, lifecycleBudget: 1000, runner: { port: Number(env("RUNNER_PORT")), shardsPerGroup: 30 } }).pipe(
  Layer.provide(PgClient.layer({ url: Redacted.make(env("DATABASE_URL")) }))
)

/** Serves `handlers` (with the scripted model) on a free loopback port and prints its URL. */
const listening = (handlers: typeof platformHandlers | typeof runnerHandlers) =>
  Effect.gen(function*() {
    yield* Console.log(`url ${yield* PlatformServer.url}`)
    return yield* Effect.never
  }).pipe(
    Effect.provide(PlatformServer.layerWebSocket({ port: 0 }).pipe(Layer.provide(handlers), Layer.provide(model), Layer.provide(policy))),
    Logger.withMinimumLogLevel(LogLevel.Warning)
  )

const platform = listening(platformHandlers)
const runner = listening(runnerHandlers)

const submit = Effect.gen(function*() {
  const client = yield* PlatformClient.PlatformClient
  const prompts = Array.from({ length: Number(env("TASKS")) }, (_, i) => `O-${i + 1}`)
  yield* Effect.forEach(prompts, (prompt) =>
    Effect.scoped(Effect.gen(function*() {
      const events = yield* client.submitTask({ agentId: "agent-1", processId: `submitter-${process.pid}`, prompt })
      while (true) {
        const [chunk, done] = yield* events.takeAll
        for (const event of chunk) yield* Console.log(`event ${JSON.stringify(event)}`)
        if (done) return
      }
    })), { concurrency: "unbounded", discard: true })
  yield* Console.log("done")
}).pipe(Effect.provide(Layer.merge(PlatformClient.layer, policy)))

const modes: Record<string, Effect.Effect<unknown, unknown>> = { platform, runner, submit }

NodeRuntime.runMain(
  (modes[env("MODE")] ?? Effect.dieMessage(`MODE must be one of ${Object.keys(modes).join(", ")}`)).pipe(
    Effect.catchAllCause((cause) => Console.log(`error ${cause.toString()}`))
  )
)
