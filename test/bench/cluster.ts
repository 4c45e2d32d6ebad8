/**
 * Cluster mode's cost (design: Cluster mode), in one run on this machine: the same tasks (2 tool
 * calls each, then a text) through the embedded platform (memory), a one-runner cluster and a
 * three-runner cluster on a PostgreSQL started here; tasks/s and calls/s of each, and what the
 * durable path adds to a call. On two cores the cluster is not faster: the point is the cost,
 * measured. Run with `npm run bench` or `tsx test/bench/cluster.ts [--tasks=N]`.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Logger, LogLevel, Redacted, Schema, Stream } from "effect"
import { LanguageModel, PlatformClient, PlatformServer, Serve, Tool, Toolkit } from "../../src/index.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { clientLayer } from "../support/platform.js"
import * as Pg from "../support/postgres.js"
import { report } from "./report.js"

const tasks = Number(process.argv.find((a) => a.startsWith("--tasks="))?.slice("--tasks=".length) ?? 40)
const callsPerTask = 2
const concurrency = 8
const tokens = new Map([["tok-1", "agent-1"]])

const step = (request: LanguageModel.ModelRequest) => request.messages.filter((m) => m._tag === "AssistantMessage").length
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = Array.from({ length: callsPerTask + 1 }, () => (request) =>
  step(request) < callsPerTask
    ? { toolCalls: [{ id: `c${step(request)}`, name: "echo", arguments: `{"n":${step(request)}}` }] }
    : { text: "done" })

const echo = Tool.make("echo", {
  description: "Echoes n.",
  input: { n: Schema.Number },
  output: Schema.Number,
  timeout: "30 seconds"
}, ({ n }) => Effect.succeed(n))

const models = LanguageModel.layerScripted(script, { perConversation: true, keepRequests: false })

/** Milliseconds for `tasks` tasks, `concurrency` at a time, through a serving process on `url`. */
const drive = (url: string) =>
  Effect.gen(function*() {
    const client = Context.get(yield* Layer.build(clientLayer({ url }, Layer.empty)), PlatformClient.PlatformClient)
    const served = yield* Serve.make(yield* Toolkit.make(echo)).pipe(Effect.provideService(PlatformClient.PlatformClient, client))
    // One task first, not counted: connections, shards and entities in place.
    yield* Stream.runDrain(served.submitTask("warm-up"))
    const started = performance.now()
    yield* Effect.forEach(Array.from({ length: tasks }), () => Stream.runDrain(served.submitTask("go")), { concurrency })
    return performance.now() - started
  }).pipe(Effect.scoped)

const embedded = Effect.gen(function*() {
  const context = yield* Layer.build(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(Layer.provide(PlatformServer.layerHandlers({ tokens })), Layer.provide(models))
  )
  return yield* drive(yield* Effect.provide(PlatformServer.url, context))
}).pipe(Effect.scoped)

const cluster = (url: string, runners: number) =>
  Effect.gen(function*() {
    const urls: Array<string> = []
    const model = yield* Layer.build(models)
    for (let i = 0; i < runners; i++) {
      const port = yield* Effect.promise(() => Pg.freePort())
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(Cluster.layer({ tokens, runner: { port } })),
          Layer.provide(Layer.succeedContext(model)),
          Layer.provide(PgClient.layer({ url: Redacted.make(url) }))
        )
      )
      urls.push(yield* Effect.provide(PlatformServer.url, context))
    }
    return yield* drive(urls[0]!)
  }).pipe(Effect.scoped)

const main = Effect.gen(function*() {
  const server = yield* Pg.postgres()
  const database = (name: string) =>
    Effect.gen(function*() {
      yield* Effect.scoped(Effect.flatMap(
        Layer.build(PgClient.layer({ url: Redacted.make(server.url) })),
        (ctx) => Context.get(ctx, PgClient.PgClient).unsafe(`CREATE DATABASE ${name}`)
      ))
      const url = server.url.replace(/\/[^/]+$/, `/${name}`)
      yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))
      return url
    })
  const one = yield* database("bench_one")
  const three = yield* database("bench_three")
  const millis = {
    embedded: yield* embedded,
    one: yield* cluster(one, 1),
    three: yield* cluster(three, 3)
  }
  const calls = tasks * callsPerTask
  const rate = (ms: number) => `${(tasks / (ms / 1000)).toFixed(1)} tasks/s, ${(calls / (ms / 1000)).toFixed(0)} calls/s`
  const perCall = (ms: number) => `${((ms - millis.embedded) / calls).toFixed(1)} ms more a call`
  const measure = `${tasks} tasks x ${callsPerTask} calls, ${concurrency} at a time, one serving process`
  report({ bench: "cluster", measure: `embedded platform (memory), ${measure}`, value: rate(millis.embedded) })
  report({
    bench: "cluster",
    measure: `one runner on PostgreSQL, ${measure}`,
    value: rate(millis.one),
    baseline: rate(millis.embedded) + " (embedded)",
    ratio: perCall(millis.one)
  })
  report({
    bench: "cluster",
    measure: `three runners on PostgreSQL, ${measure}`,
    value: rate(millis.three),
    baseline: rate(millis.embedded) + " (embedded)",
    ratio: perCall(millis.three)
  })
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

Effect.runPromise(main).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
