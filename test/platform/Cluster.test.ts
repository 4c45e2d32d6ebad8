/**
 * Cluster mode on a real PostgreSQL (started by test/support/postgres.ts): three runners in this
 * process, each with its own database client, cluster socket and WebSocket server, as three
 * platform processes would be; serving processes connect to different runners.
 */
import { assert, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Chunk, Context, Deferred, Effect, Exit, Fiber, Layer, Logger, LogLevel, Option, Redacted, Schedule, Schema, Stream } from "effect"
import { Idempotency, LanguageModel, Telemetry, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Cluster from "../../src/platform/Cluster.js"
import * as Journal from "../../src/Journal.js"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardId from "@effect/cluster/ShardId"
import { clientLayer, resultsText } from "../support/platform.js"
import { startReceiver } from "../support/otlpReceiver.js"
import { spawn } from "node:child_process"
import * as Pg from "../support/postgres.js"

const tokens = new Map([["tok-1", "agent-1"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("1 second"),
  reconnect: Schedule.spaced("100 millis").pipe(Schedule.intersect(Schedule.recurs(300)))
})

const quiet = Logger.minimumLogLevel(LogLevel.Warning)

/** The first user message of a request: the task's prompt. */
const promptOf = (request: LanguageModel.ModelRequest) => {
  const first = request.messages.find((m) => m._tag === "UserMessage")
  return first?._tag === "UserMessage" ? first.text : ""
}

/**
 * Turn 1: the task's own tool (the first offered: the submitting process's) on the prompt's number;
 * turn 2: the results as text. Answered by conversation step, so a task taken up anywhere is
 * answered where it stands.
 */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  (request) => ({
    toolCalls: [{
      id: "c1",
      name: request.tools[0]!.name,
      arguments: JSON.stringify({ n: Number(promptOf(request).split(" ")[1]) })
    }]
  }),
  (request) => ({ text: resultsText(request) })
]

/** A runner on `url`: the cluster's handlers, served on a WebSocket of its own; its context (`PlatformServer.url`, `PlatformState`). */
const runnerContext = (
  url: string,
  models: Context.Context<LanguageModel.LanguageModel>,
  { runner, ...options }: {
    readonly lifecycleBudget?: number
    readonly maxTasksPerAgent?: number
    readonly runner?: Cluster.RunnerOptions
  } = {},
  telemetry: Layer.Layer<never> = Layer.empty,
  timing: Layer.Layer<never> = policy
) =>
  Effect.gen(function*() {
    const port = yield* Effect.promise(() => Pg.freePort())
    return yield* Layer.build(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provideMerge(Cluster.layer({ tokens, runner: { port, shardsPerGroup: 30, ...runner }, ...options })),
        Layer.provide(Layer.succeedContext(models)),
        Layer.provide(PgClient.layer({ url: Redacted.make(url) })),
        Layer.provide(timing),
        Layer.provide(quiet),
        Layer.provide(telemetry)
      )
    )
  })

/** A runner on `url` (`runnerContext`); its URL. */
const startRunner = (...args: Parameters<typeof runnerContext>) =>
  Effect.flatMap(runnerContext(...args), (context) => Effect.provide(PlatformServer.url, context))

/** A tool that records each run of an input (its side effect). */
const recordingTool = (name: string, effects: Map<string, number>) =>
  Tool.make(name, {
    description: `Works on n (${name}).`,
    input: { n: Schema.Number },
    output: Schema.String,
    timeout: "20 seconds"
  }, ({ n }) =>
    Effect.sync(() => {
      effects.set(`${name}:${n}`, (effects.get(`${name}:${n}`) ?? 0) + 1)
      return `${name} did ${n}`
    }))

/** A new database on the server, for one test (runners of an earlier test must not linger in its tables). */
let databases = 0
const freshDatabase = Effect.gen(function*() {
  const server = yield* Pg.Postgres
  const sql = yield* SqlClient.SqlClient
  const name = `cluster_${++databases}`
  yield* sql.unsafe(`CREATE DATABASE ${name}`)
  return server.url.replace(/\/[^/]+$/, `/${name}`)
}).pipe(Effect.orDie)

/** `Cluster.migrate` on the database at `url`. */
const migrate = (url: string) => Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))

/** A fresh database, migrated, and the scripted models its runners share (one conversation each). */
const migratedWithModels = Effect.gen(function*() {
  const url = yield* freshDatabase
  yield* migrate(url)
  const models = yield* Layer.build(LanguageModel.layerScripted(script, { perConversation: true }))
  return { models, url }
})

// `pg_stat_statements` loaded: what a task costs the database is counted by PostgreSQL itself.
const server = Pg.layer({ settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "all" } })

/**
 * The statements PostgreSQL ran on the database at `url` since the last reset, by kind, the runners'
 * background ones (their heartbeats, shard locks, the database probe) and the test's own left out.
 */
const statementsOn = (url: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = Context.get(yield* Layer.build(Pg.pgClient(url, { maxConnections: 1 })), PgClient.PgClient)
    const rows = yield* sql<{ readonly query: string; readonly calls: string }>`SELECT query, calls::text AS calls
      FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    const counts = new Map<string, number>()
    const kinds: ReadonlyArray<readonly [string, RegExp]> = [
      ["task written", /^INSERT INTO journal_tasks/],
      ["admitted (open tasks counted)", /^SELECT COUNT\(\*\) AS tasks/],
      ["run read", /^SELECT\s+t\.task_id/],
      ["turn written", /^INSERT INTO journal_turns/],
      ["call started", /^INSERT INTO journal_calls/],
      ["call answered", /^UPDATE journal_calls/],
      ["ended", /^WITH turns AS \(DELETE/],
      ["engine: message stored", /^INSERT INTO "cluster_messages"/],
      ["engine: messages read", /^WITH messages AS/],
      ["engine: reply stored", /^INSERT INTO "cluster_replies"/],
      ["engine: message processed", /^UPDATE "cluster_messages" SET processed/],
      ["transaction", /^(BEGIN|COMMIT)/]
    ]
    // The runners' background statements, and this test's own.
    const background = /cluster_runners|pg_locks|pg_stat_statements|^SELECT \$1$|^SELECT 1$|pg_advisory|cluster_processes|cluster_lifecycle|AS n FROM journal_tasks WHERE ended_at/
    for (const row of rows) {
      const query = row.query.trim()
      if (background.test(query)) continue
      const kind = kinds.find(([, pattern]) => pattern.test(query))?.[0] ?? `other: ${query.slice(0, 80)}`
      counts.set(kind, (counts.get(kind) ?? 0) + Number(row.calls))
    }
    return counts
  })).pipe(Effect.orDie)

layer(server, { timeout: "120 seconds", excludeTestServices: true })("cluster mode", (it) => {
  it.scoped("a runner on a database that was not migrated refuses to start, naming the command; migrate is idempotent", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const models = yield* Layer.build(LanguageModel.layerScripted(script, { perConversation: true }))
      const exit = yield* Effect.exit(Effect.scoped(startRunner(url, models)))
      assert.isTrue(Exit.isFailure(exit))
      const text = Exit.isFailure(exit) ? String(exit.cause) : ""
      assert.include(text, "run `agent-tools platform migrate` once")
      // The command it recommends keeps the password out of `ps`: the URL goes in the environment.
      assert.include(text, "PLATFORM_DATABASE")
      assert.notInclude(text, "migrate --database")
      assert.include(text, "cluster_messages")
      yield* migrate(url)
      yield* migrate(url)
      yield* Effect.provide(Cluster.requireMigrated, PgClient.layer({ url: Redacted.make(url) }))
    }))

  it.scoped("three runners, two serving processes on different runners, 20 tasks: all complete in order, side effects = unique calls", () =>
    Effect.gen(function*() {
      const { models, url } = yield* migratedWithModels
      const urls = yield* Effect.all([0, 1, 2].map(() => startRunner(url, models)), { concurrency: "unbounded" })
      const effects = new Map<string, number>()
      const serving = (runner: string, tool: string) =>
        Effect.gen(function*() {
          const scope = yield* Effect.scope
          const client = Context.get(yield* Layer.buildWithScope(clientLayer({ url: runner }, policy), scope), PlatformClient.PlatformClient)
          const toolkit = yield* Toolkit.make(recordingTool(tool, effects))
          return yield* Serve.makeConfig(toolkit).pipe(
            Effect.provideService(PlatformClient.PlatformClient, client)
          )
        }).pipe(Effect.provide(policy))
      const a = yield* serving(urls[0]!, "alpha")
      const b = yield* serving(urls[1]!, "beta")
      const started = performance.now()
      const runs = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => Stream.runCollect((i % 2 === 0 ? a : b).submitTask(`task ${i}`)).pipe(Effect.map((events) => [...events])),
        { concurrency: "unbounded" }
      ).pipe(Effect.timeout("60 seconds"))
      const millis = performance.now() - started
      for (const [i, events] of runs.entries()) {
        const tool = i % 2 === 0 ? "alpha" : "beta"
        const tags = events.map((e) => e._tag)
        assert.strictEqual(tags[0], "TaskStarted", `task ${i}: ${tags}`)
        const last = events[events.length - 1] as Protocol.TaskEvent
        assert.strictEqual(last._tag, "TaskCompleted", `task ${i}: ${tags}`)
        assert.strictEqual(last._tag === "TaskCompleted" ? last.output : "", `c1:"${tool} did ${i}"`)
        assert.isBelow(tags.indexOf("ToolCallRequested"), tags.indexOf("ToolCallCompleted"), `task ${i}: ${tags}`)
      }
      assert.strictEqual(effects.size, 20)
      assert.deepStrictEqual([...new Set(effects.values())], [1])
      const requests = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests).pipe(Effect.provide(models))
      assert.strictEqual(requests.length, 40)
      console.log(`cluster: 3 runners, 20 tasks in ${millis.toFixed(0)} ms; model turns asked ${requests.length}; side effects ${effects.size}`)
    }), { timeout: 90_000 })

  it.scoped("a task runs on the runner its serving process is connected to; placed by id, tasks spread over the runners", () =>
    Effect.gen(function*() {
      const models = yield* Layer.build(LanguageModel.layerScripted(script, { perConversation: true }))
      /** Two runners of `placement` (their `Sharding` in context too), 24 tasks through the second: how many tasks each held. */
      const heldBy = (placement: Cluster.RunnerOptions["placement"]) =>
        Effect.gen(function*() {
          const url = yield* freshDatabase
          yield* migrate(url)
          const runners = yield* Effect.all([0, 1].map(() =>
            Effect.flatMap(Effect.promise(() => Pg.freePort()), (port) =>
              Layer.build(PlatformServer.layerWebSocket({ port: 0 }).pipe(
                Layer.provideMerge(Cluster.layerHandlers({ tokens, runner: { placement } })),
                Layer.provideMerge(Cluster.layerSharding({ port, shardsPerGroup: 30 })),
                Layer.provide(Journal.layerSqlClient),
                Layer.provide(Layer.succeedContext(models)),
                Layer.provide(PgClient.layer({ url: Redacted.make(url) })),
                Layer.provide(policy),
                Layer.provide(quiet)
              )))
          ), { concurrency: "unbounded" })
          // Once the shards are shared out: a runner that holds none yet has nowhere to place a task.
          const held = (runner: Context.Context<Sharding.Sharding>) =>
            Array.from({ length: 30 }, (_, i) => ShardId.make("default", i + 1))
              .filter((shard) => Context.get(runner, Sharding.Sharding).hasShardId(shard)).length
          yield* Effect.sync(() => runners.map(held)).pipe(
            Effect.repeat({ until: (counts) => counts.every((n) => n >= 13), schedule: Schedule.spaced("100 millis") }),
            Effect.timeout("30 seconds")
          )
          const front = yield* Effect.provide(PlatformServer.url, runners[1]!)
          const client = Context.get(yield* Layer.build(clientLayer({ url: front }, policy)), PlatformClient.PlatformClient)
          const served = yield* Serve.makeConfig(yield* Toolkit.make(recordingTool("alpha", new Map()))).pipe(
            Effect.provideService(PlatformClient.PlatformClient, client)
          )
          const runs = yield* Effect.forEach(
            Array.from({ length: 24 }, (_, i) => i),
            (i) => Stream.runCollect(served.submitTask(`task ${i}`)),
            { concurrency: 4 }
          )
          for (const events of runs) {
            assert.strictEqual(Option.getOrUndefined(Chunk.last(events))?._tag, "TaskCompleted")
            // Every event of the task, its first turn's too (emitted before the submitter's follower attached).
            const tags = Chunk.toReadonlyArray(events).map((event) => event._tag === "TurnStarted" ? `TurnStarted ${event.step}` : event._tag)
            assert.deepStrictEqual(tags.filter((tag) => tag !== "ToolCallCompleted" && tag !== "ModelText"), [
              "TaskStarted",
              "TurnStarted 1",
              "ToolCallRequested",
              "TurnStarted 2",
              "TaskCompleted"
            ])
          }
          return yield* Effect.forEach(runners, (runner) => Context.get(runner, PlatformServer.PlatformState).taskCount)
        }).pipe(Effect.scoped)
      assert.deepStrictEqual(yield* heldBy(undefined), [0, 24])
      const byId = yield* heldBy("id")
      // 24 tasks by a random id's shard, each runner holding 13 of the 30 shards or more: all on one
      // has odds of about 1 in 800,000.
      assert.strictEqual(byId[0]! + byId[1]!, 24)
      assert.isAbove(byId[0]!, 0, `by id: ${byId}`)
      assert.isAbove(byId[1]!, 0, `by id: ${byId}`)
    }), { timeout: 90_000 })

  it.scoped("what a task costs the database on one runner, as PostgreSQL counts it: each write once, the run read once, nothing of the engine's, 8 statements a task of one call", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      yield* migrate(url)
      const admin = Context.get(yield* Layer.build(Pg.pgClient(url, { maxConnections: 1 })), PgClient.PgClient)
      yield* Effect.orDie(admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
      const models = yield* Layer.build(LanguageModel.layerScripted(script, { perConversation: true }))
      const runner = yield* startRunner(url, models)
      const client = Context.get(yield* Layer.build(clientLayer({ url: runner }, policy)), PlatformClient.PlatformClient)
      const served = yield* Serve.makeConfig(yield* Toolkit.make(recordingTool("alpha", new Map()))).pipe(
        Effect.provideService(PlatformClient.PlatformClient, client)
      )
      const submit = (count: number) =>
        Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) => Stream.runDrain(served.submitTask(`task ${i}`)), {
          concurrency: 4
        })
      // Each task's end journaled (its loop ended, after its last event).
      const replied = (count: number) =>
        admin<{ readonly n: string }>`SELECT COUNT(*)::text AS n FROM journal_tasks WHERE ended_at IS NOT NULL`.pipe(
          Effect.repeat({ until: (rows) => Number(rows[0]?.n) >= count, schedule: Schedule.spaced("50 millis") }),
          Effect.timeout("10 seconds"),
          Effect.orDie
        )
      // Not counted: the connections, the agent's entity and the statements' first preparation.
      yield* submit(4)
      yield* replied(4)
      yield* Effect.orDie(admin`SELECT pg_stat_statements_reset()`)
      const tasks = 20
      yield* submit(tasks)
      yield* replied(4 + tasks)
      const counts = yield* statementsOn(url)
      const perTask = (kind: string) => (counts.get(kind) ?? 0) / tasks
      console.log(`a task of one call (two turns) on one runner: ${[...counts].map(([k, n]) => `${k} ${n / tasks}`).join("; ")}`)
      // The journal: the task, its two turns, its call's start and answer (once: the loop does not write
      // the answer its runner journaled), its end; the run read once (by its runner taking it up).
      assert.deepStrictEqual(
        ["task written", "admitted (open tasks counted)", "run read", "turn written", "call started", "call answered", "ended"].map(perTask),
        [1, 1, 1, 2, 1, 1, 1]
      )
      // The engine stores nothing of a task: its `Run` is not a persisted message (the journal makes the task
      // durable; the next owner of its shard takes it up from there), so no message, reply nor transaction.
      assert.deepStrictEqual(["engine: message stored", "engine: reply stored", "engine: message processed"].map(perTask), [0, 0, 0])
      // Read by the engine's poll every 5 s only.
      assert.isAtMost(counts.get("engine: messages read") ?? 0, tasks + 2)
      assert.strictEqual(perTask("transaction"), 0)
      const other = [...counts.keys()].filter((kind) => kind.startsWith("other"))
      assert.deepStrictEqual(other, [], "statements of no known kind")
      const total = [...counts.values()].reduce((a, b) => a + b, 0) / tasks
      assert.isAtMost(total, 9, `statements a task: ${total}`)
    }).pipe(Effect.scoped), { timeout: 90_000 })

  it.scoped("the lifecycle budget is counted per agent across runners: the 31st call is refused whichever runner it reaches", () =>
    Effect.gen(function*() {
      const { models, url } = yield* migratedWithModels
      const urls = yield* Effect.all([0, 1, 2].map(() => startRunner(url, models)), { concurrency: "unbounded" })
      const clients = yield* Effect.forEach(urls, (runner) =>
        Effect.map(Layer.build(clientLayer({ url: runner }, policy)), Context.get(PlatformClient.PlatformClient)))
      const { manifest } = yield* Toolkit.make(recordingTool("alpha", new Map()))
      const outcomes: Array<string> = []
      for (let i = 0; i < 31; i++) {
        const client = clients[i % 3]!
        const exit = yield* Effect.exit(client.register({ agentId: "agent-1", processId: `p-${i % 3}`, manifest, manifestHash: "h" }))
        outcomes.push(Exit.isSuccess(exit) ? "ok" : String(Exit.causeOption(exit)))
      }
      assert.deepStrictEqual(outcomes.slice(0, 30), Array(30).fill("ok"))
      assert.include(outcomes[30], "LifecycleBudgetExceeded")
      // And through each other runner too.
      for (const client of clients) {
        const exit = yield* Effect.exit(client.heartbeat({ agentId: "agent-1", processId: "p-0", manifestHash: "h" }))
        assert.isTrue(Exit.isFailure(exit))
      }
    }))

  it.scoped("an agent's open tasks are counted over the whole cluster: past maxTasksPerAgent a submit is refused on any runner", () =>
    Effect.gen(function*() {
      const { models, url } = yield* migratedWithModels
      const urls = yield* Effect.all([0, 1, 2].map(() => startRunner(url, models, { maxTasksPerAgent: 2 })), {
        concurrency: "unbounded"
      })
      const release = yield* Deferred.make<void>()
      const held = Tool.make("held", {
        description: "Waits until the test lets it go.",
        input: { n: Schema.Number },
        output: Schema.String,
        timeout: "60 seconds"
      }, ({ n }) => Effect.as(Deferred.await(release), `held ${n}`))
      const serving = (runner: string) =>
        Effect.gen(function*() {
          const client = Context.get(yield* Layer.build(clientLayer({ url: runner }, policy)), PlatformClient.PlatformClient)
          return yield* Serve.makeConfig(yield* Toolkit.make(held)).pipe(Effect.provideService(PlatformClient.PlatformClient, client))
        })
      const [a, b, c] = yield* Effect.all(urls.map(serving))
      // Two tasks open, held on runners 0 and 1 (each waits in its call).
      const first = yield* Effect.fork(Stream.runCollect(a!.submitTask("task 1")))
      const second = yield* Effect.fork(Stream.runCollect(b!.submitTask("task 2")))
      yield* Effect.sleep("1500 millis")
      const refused = yield* Effect.flip(Stream.runCollect(c!.submitTask("task 3")))
      console.log(`cluster, maxTasksPerAgent 2, the third submit on another runner: ${String(refused)}`)
      assert.include(String(refused), "maxTasksPerAgent")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      // Ended: the agent may submit again.
      const again = [...yield* Stream.runCollect(c!.submitTask("task 4"))]
      assert.strictEqual(again[again.length - 1]?._tag, "TaskCompleted")
    }), { timeout: 90_000 })

  it.scoped("a task journaled whose Run was never sent (its runner died in between) is taken up by a sweep", () =>
    Effect.gen(function*() {
      const { models, url } = yield* migratedWithModels
      const asked = Effect.map(Effect.flatMap(LanguageModel.Scripted, (s) => s.requests), (requests) => requests.map(promptOf)).pipe(
        Effect.provide(models)
      )
      // The ghost: journaled as a submit journals it, and nothing more.
      const [entry] = (yield* Toolkit.make(recordingTool("alpha", new Map()))).manifest
      yield* Effect.flatMap(Journal.Journal, (journal) =>
        journal.started({
          runId: "task-ghost-1",
          kind: "task",
          agentId: "agent-1",
          processId: "p-gone",
          prompt: "task 7",
          tools: [{ entry: entry!, own: true }]
        })).pipe(Effect.provide(Journal.layerSqlClient.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(url) })))))
      yield* startRunner(url, models, {}, Layer.empty, Layer.merge(policy, Timing.layer({ platformSweep: Schedule.spaced("500 millis") })))
      let taken = yield* asked
      for (let tries = 0; tries < 200 && !taken.includes("task 7"); tries++) {
        yield* Effect.sleep("100 millis")
        taken = yield* asked
      }
      assert.include(taken, "task 7", "the ghost's loop asked the model: it was taken up")
    }), { timeout: 90_000 })

  it.scoped("a submit retried with its key (its answer lost) gets the task the first made, through another runner too", () =>
    Effect.gen(function*() {
      const { models, url } = yield* migratedWithModels
      const urls = yield* Effect.all([startRunner(url, models), startRunner(url, models)], { concurrency: "unbounded" })
      const clients = yield* Effect.forEach(urls, (runner) =>
        Effect.map(Layer.build(clientLayer({ url: runner }, policy)), (context) => Context.get(context, PlatformClient.PlatformClient)))
      const toolkit = yield* Toolkit.make(recordingTool("alpha", new Map()))
      const [served] = yield* Effect.forEach(clients, (client) =>
        Serve.makeConfig(toolkit).pipe(Effect.provideService(PlatformClient.PlatformClient, client)))
      const submit = (client: PlatformClient.PlatformClient["Type"], submitKey: string, resubmit: boolean) =>
        Effect.flatMap(
          client.submitTask({ agentId: "agent-1", processId: served!.processId, prompt: "task 3", events: "calls", submitKey, resubmit }),
          (mailbox) => Effect.map(mailbox.take, (event) => event.taskId)
        )
      const key = "7d1c9a52-8f0e-4a1b-b6a3-2c5e9d0f4e11"
      const first = yield* submit(clients[0]!, key, false)
      const again = yield* submit(clients[1]!, key, true)
      const other = yield* submit(clients[0]!, "another-key-5678", true)
      assert.strictEqual(again, first, "the retry, through the other runner, got the first task")
      assert.notStrictEqual(other, first)
    }).pipe(Effect.scoped), { timeout: 90_000 })

  it.scoped("one trace across two runners: the submit, the run on the task's owner, its call, the serving process's call", () =>
    Effect.gen(function*() {
      const r = yield* Effect.acquireRelease(Effect.promise(startReceiver), (r) => Effect.promise(r.close))
      const exported = (serviceName: string) => Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName })
      let submitted = 0
      yield* Effect.gen(function*() {
        const url = yield* freshDatabase
        yield* migrate(url)
        const models = yield* Layer.build(LanguageModel.layerScripted(script, { perConversation: true }))
        const runners = yield* Effect.all(
          // Placed by id: the tasks spread over both runners whatever runner they are submitted through.
          ["runner-a", "runner-b"].map((name) => runnerContext(url, models, { runner: { placement: "id" } }, exported(name))),
          { concurrency: "unbounded" }
        )
        const effects = new Map<string, number>()
        const front = yield* Effect.provide(PlatformServer.url, runners[0]!)
        const client = Context.get(yield* Layer.build(clientLayer({ url: front }, policy)), PlatformClient.PlatformClient)
        const held = Effect.forEach(runners, (runner) => Context.get(runner, PlatformServer.PlatformState).taskCount)
        const events = yield* Effect.gen(function*() {
          const served = yield* Serve.makeConfig(yield* Toolkit.make(recordingTool("alpha", effects)))
          // Tasks by their ids' shards until both runners ran some: the first runner holds every shard until they
          // are shared out (seconds after both start), so a task a quarter second, for 30 s at most.
          const done: Array<Chunk.Chunk<Protocol.TaskEvent>> = []
          const until = Date.now() + 30_000
          while (Date.now() < until && (done.length < 4 || (yield* held).some((n) => n === 0))) {
            const i = done.length + 1
            done.push(yield* Stream.runCollect(served.submitTask(`task ${i}`)).pipe(Effect.withSpan(`submit ${i}`)))
            yield* Effect.sleep("250 millis")
          }
          return done
        }).pipe(Effect.provideService(PlatformClient.PlatformClient, client), Effect.provide(exported("serving")))
        submitted = events.length
        for (const run of events) assert.strictEqual(Chunk.last(run).pipe(Option.map((e) => e._tag), Option.getOrUndefined), "TaskCompleted")
      }).pipe(Effect.scoped)
      // The exporters flush as their runners stop; under load the receiver may hold the last batch a moment later.
      const runSpans = () => r.spans.filter((s) => s.name === "invoke_agent agent-1")
      const flushedBy = Date.now() + 10_000
      while (runSpans().length < submitted && Date.now() < flushedBy) yield* Effect.sleep("100 millis")
      const runs = runSpans()
      const owners = new Set(runs.map((s) => s.service))
      console.log(`cluster trace: ${runs.length} runs on ${[...owners].join(", ")}; ${r.spans.length} spans received`)
      assert.strictEqual(runs.length, submitted)
      // The runs were on both runners: some went on away from the runner they were submitted through.
      assert.deepStrictEqual([...owners].sort(), ["runner-a", "runner-b"])
      for (let i = 1; i <= submitted; i++) {
        const submit = r.spans.find((s) => s.name === `submit ${i}`)!
        const run = runs.find((s) => s.traceId === submit.traceId)
        assert.isDefined(run, `task ${i}: no run in the submit's trace`)
        const platformCall = r.spans.find((s) => s.parentSpanId === run!.spanId && s.name === "execute_tool alpha")
        assert.isDefined(platformCall, `task ${i}: no call under its run on ${run!.service}`)
        const servedCall = r.spans.find((s) => s.service === "serving" && s.parentSpanId === platformCall!.spanId)
        assert.strictEqual(servedCall?.name, "execute_tool alpha", `task ${i}`)
      }
    }), { timeout: 90_000 })

  it.scoped("the CLI: platform migrate, then a runner that serves; the database's password in no line either prints", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const password = new URL(url).password
      const env = { PLATFORM_DATABASE: url, PLATFORM_TOKENS: "tok-1:agent-1", LOG_LEVEL: "debug" }
      const run = (args: ReadonlyArray<string>, extra: Record<string, string> = {}) =>
        Effect.promise(() =>
          new Promise<{ code: number | null; output: string }>((resolve) => {
            const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
              env: { ...process.env, ...env, ...extra },
              stdio: ["ignore", "pipe", "pipe"]
            })
            let output = ""
            let stopping = false
            child.stdout.on("data", (chunk) => (output += String(chunk)))
            child.stderr.on("data", (chunk) => {
              output += String(chunk)
              // A runner serves until stopped: once it says where it listens, stop it (once: a second
              // SIGTERM during its shutdown would end it by the signal).
              if (!stopping && output.includes("a runner of the cluster")) {
                stopping = true
                setTimeout(() => child.kill("SIGTERM"), 1_500)
              }
            })
            child.on("close", (code) => resolve({ code, output }))
          })
        )
      const migrated = yield* run(["platform", "migrate"])
      assert.strictEqual(migrated.code, 0, migrated.output)
      assert.include(migrated.output, "the cluster's schema is ready")
      const runnerPort = yield* Effect.promise(() => Pg.freePort())
      const port = yield* Effect.promise(() => Pg.freePort())
      const served = yield* run(["platform", "--port", String(port), "--runner-port", String(runnerPort)])
      assert.include(served.output, "a runner of the cluster on postgres://***:***@127.0.0.1")
      assert.strictEqual(served.code, 0, served.output)
      // A database that refuses the connection (a wrong password) stops it at once, saying why and where
      // (one that cannot be reached is waited for, up to 2 minutes).
      const refused = yield* run(["platform", "migrate"], { PLATFORM_DATABASE: url.replace(`:${password}@`, ":wrong-4711@") })
      assert.strictEqual(refused.code, 1)
      assert.match(refused.output, /refused the connection: password authentication failed/)
      assert.include(refused.output, "postgres://***:***@127.0.0.1:")
      assert.notInclude(refused.output, "wrong-4711")
      for (const output of [migrated.output, served.output, refused.output]) assert.notInclude(output, password)
    }), { timeout: 90_000 })

  it.scoped("claims on PostgreSQL: two replicas of one agent on different runners, the same call delivered to both (a takeover mid-call): one side effect", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      yield* migrate(url)
      const once: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [{ id: "c1", name: "refund", arguments: JSON.stringify({ n: 7 }) }] },
        (request) => ({ text: resultsText(request) })
      ]
      const models = yield* Layer.build(LanguageModel.layerScripted(once, { perConversation: true }))
      const urls = yield* Effect.all([0, 1].map(() => startRunner(url, models)), { concurrency: "unbounded" })
      let started = 0
      let effects = 0
      // The call goes on until the second replica has taken the task over (however long its attach takes to
      // reach the task's owner), so that the call is pending when the task is delivered to the second.
      const takenOver = yield* Deferred.make<void>()
      const refund = Tool.make("refund", {
        description: "Refunds n, once.",
        input: { n: Schema.Number },
        output: Schema.String,
        timeout: "20 seconds"
      }, ({ n }) =>
        Effect.gen(function*() {
          started++
          yield* Deferred.await(takenOver)
          effects++
          return `refunded ${n}`
        }))
      // Each replica has its own client and its own claims store, on the same database.
      const replica = (runner: string) =>
        Effect.gen(function*() {
          const scope = yield* Effect.scope
          const context = yield* Layer.buildWithScope(
            Layer.merge(
              clientLayer({ url: runner }, policy),
              Idempotency.layerSqlClient({ lease: "2 seconds", poll: "50 millis" }).pipe(
                Layer.provide(PgClient.layer({ url: Redacted.make(url) }))
              )
            ),
            scope
          )
          const toolkit = yield* Toolkit.make(refund)
          return yield* Serve.makeConfig(toolkit).pipe(Effect.provide(context))
        }).pipe(Effect.provide(policy))
      const first = yield* replica(urls[0]!)
      const second = yield* replica(urls[1]!)
      const seen: Array<Protocol.TaskEvent> = []
      const firstRun = yield* Stream.runForEach(first.submitTask("refund 7"), (event) =>
        Effect.zipRight(
          Effect.sync(() => seen.push(event)),
          event._tag === "TaskTakenOver" ? Deferred.succeed(takenOver, undefined) : Effect.void
        )).pipe(
        Effect.fork
      )
      // Once the first replica runs the call, the second takes the task over: the call is delivered to it too.
      yield* Effect.promise(async () => {
        while (started === 0) await new Promise((r) => setTimeout(r, 10))
      })
      const taskId = seen.find((e) => e._tag === "TaskStarted")!.taskId
      const events = yield* Stream.runCollect(second.attachTask(taskId)).pipe(Effect.map((c) => [...c]), Effect.timeout("30 seconds"))
      yield* Fiber.join(firstRun)
      const last = events[events.length - 1]!
      assert.strictEqual(last._tag, "TaskCompleted", events.map((e) => e._tag).join(" "))
      assert.strictEqual(last._tag === "TaskCompleted" ? last.output : "", `c1:"refunded 7"`)
      assert.include(seen.map((e) => e._tag), "TaskTakenOver")
      assert.isTrue(events.some((e) => e._tag === "ToolCallRequested"), "the call was delivered to the second replica")
      assert.deepStrictEqual({ started, effects }, { started: 1, effects: 1 })
    }), { timeout: 90_000 })
})
