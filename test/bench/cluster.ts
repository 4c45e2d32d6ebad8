/**
 * Cluster mode's cost (design: Cluster mode), in one run on this machine: the same tasks (2 tool
 * calls each, then a text) through the embedded platform (memory), a one-runner and a three-runner
 * cluster on a PostgreSQL started here, first with the tests' settings (fsync and synchronous commit
 * off), then with a durable one (both on, as PostgreSQL ships). Each platform process (the embedded
 * one, each runner) is a process of its own (test/bench/clusterPlatform.ts), as deployed; this
 * process is the serving process. For each: one call's round trip (p50, tasks one at a time: from
 * the tool's answer to the next call's delivery, through the journal), calls/s with 8 and with 64
 * tasks at a time, what each task costs the database (transactions and rows written, from
 * PostgreSQL's own statistics) and the CPU a call (the platform's processes, this one, the database
 * server). The serving process follows every event of each task as a Stream (`submitTask`, drained);
 * the embedded platform's CPU a call is measured again with tasks run for their output alone
 * (`runTask`): the platform path without a Stream of events, whose draining is Effect's own Stream
 * runner at work. Run with `npm run bench` or `tsx test/bench/cluster.ts [--tasks=N] [--warmup=N]
 * [--modes=journaled,one,three,spread] [--durable=off|on] [--profile=DIR] [--platform-script=FILE]`
 * (a part of it, while working on one of them; `--modes=none`
 * measures the embedded platform alone, no PostgreSQL started).
 *
 * `npm run bench` runs it with V8's young generation as the deploy examples give it (`NODE_OPTIONS` of
 * examples/deploy/agent-tools-platform.service), which each platform process inherits; then the embedded platform
 * is also measured with Node's default beside.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Logger, LogLevel, Option, Redacted, Schema, type Scope, Stream } from "effect"
import { spawn } from "node:child_process"
import { WebSocket } from "ws"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Tool, ToolContext, Toolkit } from "../../src/index.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { clientLayer } from "../support/platform.js"
import * as Pg from "../support/postgres.js"
import { callsPerTask } from "../support/benchTask.js"
import { report } from "./report.js"
import { rpcEcho } from "./rpcEcho.js"

const flag = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const measuredTasks = Number(flag("tasks") ?? 200)
/**
 * The embedded platform's windows: five times as many tasks (1,000 at 8 at a time, about a second), as its CPU a call
 * read over 200 moved by a quarter from run to run (a major collection in the window or not); a runner's 200 take as long.
 */
const embeddedTasks = measuredTasks * 5
/**
 * Tasks run before anything is measured (connections, shards and entities in place, the code compiled by V8's
 * optimizing tiers, the heaps grown to their working size). 1,500: after 300, the CPU a call of the next 200-task
 * windows still fell, window after window, for another 1,000 tasks or so (embedded platform 0.98 -> 0.85 -> 0.65
 * ms, its serving process 1.17 -> 0.86 ms; one runner 2.97 -> 2.1-2.2 ms), so 300 measured the process's warm-up.
 */
const warmup = Number(flag("warmup") ?? 1500)
/** `--modes=journaled,one` measures only those (of journaled, one, three, spread) beside the embedded platform. */
const modes = new Set((flag("modes") ?? "journaled,one,three,spread").split(","))
/** `--durable=off` (the tests' settings only) or `on` (the durable PostgreSQL only); both by default. */
const durables = flag("durable") === "off" ? [false] : flag("durable") === "on" ? [true] : [false, true]
/** `--profile=DIR`: each platform process writes its CPU profile (node --cpu-prof) to DIR. */
const profile = flag("profile")
/** `--platform-script=FILE`: the platform processes run FILE (clusterPlatform.ts built to JavaScript) with node, not tsx: profiles with its lines. */
const platformScript = flag("platform-script")

/**
 * The frames this (serving) process's WebSockets send and receive while `on`, and their bytes: what the calls carry
 * on the wire (the other end of each is a platform process). Counted at `ws`'s `send` and `message`.
 */
const wire = { on: false, frames: 0, bytes: 0 }
const bytesOf = (data: unknown): number =>
  typeof data === "string"
    ? Buffer.byteLength(data)
    : Array.isArray(data)
    ? data.reduce((total: number, part: Buffer) => total + part.length, 0)
    : (data as { byteLength: number }).byteLength
const count = (data: unknown) => {
  if (!wire.on) return
  wire.frames++
  wire.bytes += bytesOf(data)
}
const send = WebSocket.prototype.send as (this: WebSocket, data: unknown, ...rest: Array<unknown>) => void
WebSocket.prototype.send = function(this: WebSocket, data: unknown, ...rest: Array<unknown>) {
  count(data)
  return send.call(this, data, ...rest)
} as typeof WebSocket.prototype.send
const emit = WebSocket.prototype.emit
WebSocket.prototype.emit = function(this: WebSocket, event: string | symbol, ...args: Array<any>) {
  if (event === "message") count(args[0])
  return emit.call(this, event, ...args)
}

/** When each task's calls reached the tool, by task id. */
const delivered = new Map<string, Array<number>>()

const echo = Tool.make("echo", {
  description: "Echoes n.",
  input: { n: Schema.Number },
  output: Schema.Number,
  timeout: "30 seconds"
}, ({ n }) =>
  Effect.map(ToolContext.current, (context) => {
    if (Option.isSome(context)) {
      const times = delivered.get(context.value.taskId) ?? []
      delivered.set(context.value.taskId, times)
      times.push(performance.now())
    }
    return n
  }))

/** A platform process (test/bench/clusterPlatform.ts with `args`): its URL and process id; stopped with the scope. */
const platformProcess = (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv = process.env
): Effect.Effect<{ url: string; pid: number }, never, Scope.Scope> =>
  Effect.flatMap(
    Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [
          ...(profile === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profile}`]),
          ...(platformScript === undefined ? ["--import", "tsx", "test/bench/clusterPlatform.ts"] : [platformScript]),
          ...args
        ], {
          cwd: fileURLToPath(new URL("../..", import.meta.url)),
          env,
          stdio: ["pipe", "pipe", "inherit"]
        })
      ),
      // Waited for: a runner still stopping would take the next figures' CPU.
      (child) =>
        Effect.async<void>((resume) => {
          const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
          child.once("exit", () => {
            clearTimeout(timer)
            resume(Effect.void)
          })
          child.stdin!.end()
        })
    ),
    (child) =>
      Effect.async<{ url: string; pid: number }>((resume) => {
        let out = ""
        child.stdout!.on("data", (data) => {
          out += String(data)
          if (out.includes("\n")) resume(Effect.succeed({ url: out.trim(), pid: child.pid! }))
        })
      })
  )

/** CPU seconds `pid` has used (Linux, /proc; 0 where it cannot tell). */
const cpuSecondsOf = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "").split(" ").map(Number)
    return (fields[11]! + fields[12]!) / 100
  } catch {
    return 0
  }
}

interface Figures {
  /** p50 of one call's round trip, tasks one at a time (ms). */
  readonly roundTrip: number
  /** calls/s, 8 and 64 tasks at a time. */
  readonly at8: number
  readonly at64: number
  /** CPU ms per call at 8 at a time: the platform's processes', this (serving) process's, the database server's. */
  readonly cpu: { readonly platform: number; readonly own: number; readonly database: number | undefined }
  /** Per task at 8 at a time: statements run (BEGIN and COMMIT among them) and rows written, PostgreSQL's count. */
  readonly writes: { readonly statements: number; readonly rows: number } | undefined
  /** Per call at 8 at a time: the frames the serving process sent and received, and their bytes. */
  readonly wire: { readonly frames: number; readonly bytes: number }
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

/**
 * The statements the database has run so far (`pg_stat_statements`: counted as each ends, where the database's
 * own statistics reach its views up to seconds late) and the rows they wrote. Less the query's own.
 */
const databaseWrites = (url: string) =>
  Effect.scoped(Effect.gen(function*() {
    const sql = Context.get(yield* Layer.build(Pg.pgClient(url, { maxConnections: 1 })), PgClient.PgClient)
    const [row] = yield* Effect.orDie(sql<{ readonly statements: string; readonly rows: string }>`SELECT
      COALESCE(SUM(calls), 0) AS statements,
      COALESCE(SUM(rows) FILTER (WHERE query ~* '^\\s*(INSERT|UPDATE|DELETE)'), 0) AS rows
      FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
    return { statements: Number(row!.statements), rows: Number(row!.rows) }
  }))

/**
 * How the serving process submits each task: `events` follows every event of it as a Stream (`submitTask`, drained),
 * `output` waits for its output alone (`runTask`).
 */
type Submitter = "events" | "output"

const submitWith = (submitter: Submitter) => (served: Serve.Serve["Type"]): Effect.Effect<unknown, unknown> =>
  submitter === "events" ? Stream.runDrain(served.submitTask("go")) : served.runTask("go")

/** The figures of the platform at `url`, through one serving process, over `tasks` tasks (4 times as many at 64). */
const drive = (
  { pids, urls }: { readonly urls: ReadonlyArray<string>; readonly pids: ReadonlyArray<number> },
  database: { readonly url: string; readonly server: Pg.PostgresServer } | undefined,
  tasks = measuredTasks,
  submitter: Submitter = "events"
) =>
  Effect.gen(function*() {
    // A serving connection to each URL, the tasks submitted through each in turn.
    const serving = yield* Effect.forEach(urls, (url) =>
      Effect.gen(function*() {
        const client = Context.get(yield* Layer.build(clientLayer({ url }, Layer.empty)), PlatformClient.PlatformClient)
        return yield* Serve.makeConfig(yield* Toolkit.make(echo)).pipe(Effect.provideService(PlatformClient.PlatformClient, client))
      }))
    const run = (count: number, concurrency: number) =>
      Effect.gen(function*() {
        const started = performance.now()
        yield* Effect.forEach(
          Array.from({ length: count }, (_, i) => serving[i % serving.length]!),
          submitWith(submitter),
          { concurrency }
        )
        return performance.now() - started
      })
    // Not counted: connections, shards and entities in place.
    yield* run(warmup, 8)
    delivered.clear()
    yield* run(tasks, 1)
    const gaps = [...delivered.values()].flatMap((times) => times.slice(1).map((t, i) => t - times[i]!))
    const writesBefore = database === undefined ? undefined : yield* databaseWrites(database.url)
    const platformCpu = () => pids.reduce((total, pid) => total + cpuSecondsOf(pid), 0)
    const cpuBefore = { platform: platformCpu(), own: process.cpuUsage(), database: database?.server.cpuSeconds() }
    Object.assign(wire, { on: true, frames: 0, bytes: 0 })
    const at8 = yield* run(tasks, 8)
    wire.on = false
    const platform = platformCpu() - cpuBefore.platform
    const own = process.cpuUsage(cpuBefore.own)
    const databaseCpu = database?.server.cpuSeconds()
    const writesAfter = database === undefined ? undefined : yield* databaseWrites(database.url)
    const at64 = yield* run(tasks * 4, 64)
    const calls = tasks * callsPerTask
    return {
      roundTrip: median(gaps),
      at8: calls / (at8 / 1000),
      at64: (calls * 4) / (at64 / 1000),
      cpu: {
        platform: (platform * 1000) / calls,
        own: (own.user + own.system) / 1000 / calls,
        database: databaseCpu === undefined || cpuBefore.database === undefined
          ? undefined
          : ((databaseCpu - cpuBefore.database) * 1000) / calls
      },
      wire: { frames: wire.frames / calls, bytes: wire.bytes / calls },
      writes: writesBefore === undefined || writesAfter === undefined ? undefined : {
        // Less the first reading's own statement.
        statements: (writesAfter.statements - writesBefore.statements - 1) / tasks,
        rows: (writesAfter.rows - writesBefore.rows) / tasks
      }
    } satisfies Figures
  }).pipe(Effect.scoped)

/** The embedded platform in memory; with `env` (Node's defaults: no `NODE_OPTIONS`) rather than this process's. */
const embedded = (env: NodeJS.ProcessEnv = process.env, submitter: Submitter = "events") =>
  Effect.gen(function*() {
    const platform = yield* platformProcess([], env)
    return yield* drive({ urls: [platform.url], pids: [platform.pid] }, undefined, embeddedTasks, submitter)
  }).pipe(Effect.scoped)

/** The embedded platform journaling to `url` (a task's every step written as a runner writes it): the floor under a runner's figures. */
const embeddedJournaled = (server: Pg.PostgresServer, url: string) =>
  Effect.gen(function*() {
    const platform = yield* platformProcess([`--journal=${url}`])
    return yield* drive({ urls: [platform.url], pids: [platform.pid] }, { url, server })
  }).pipe(Effect.scoped)

/** How long runners started together are given to share the shards out before anything is measured. */
const settle = "10 seconds"

/** `runners` runners on `url`; the serving process connected to the first, or to each (`spread`). */
const cluster = (server: Pg.PostgresServer, url: string, runners: number, spread = false) =>
  Effect.gen(function*() {
    const started: Array<{ url: string; pid: number }> = []
    for (let i = 0; i < runners; i++) {
      const port = yield* Effect.promise(() => Pg.freePort())
      started.push(yield* platformProcess([`--database=${url}`, `--port=${port}`]))
    }
    // Runners that start together share the shards out over the first seconds (each takes its part as
    // the others' locks are let go): tasks measured meanwhile would move between runners mid-run.
    if (runners > 1) yield* Effect.sleep(settle)
    const urls = spread ? started.map((p) => p.url) : [started[0]!.url]
    return yield* drive({ urls, pids: started.map((p) => p.pid) }, { url, server })
  }).pipe(Effect.scoped)

/** A database of its own on `server`, migrated; its URL. */
const database = (server: Pg.PostgresServer, name: string) =>
  Effect.gen(function*() {
    yield* Effect.scoped(Effect.flatMap(
      Layer.build(Pg.pgClient(server.url, { maxConnections: 1 })),
      (ctx) => Effect.orDie(Context.get(ctx, PgClient.PgClient).unsafe(`CREATE DATABASE ${name}`))
    ))
    const url = server.url.replace(/\/[^/]+$/, `/${name}`)
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))
    yield* Effect.scoped(Effect.flatMap(
      Layer.build(Pg.pgClient(url, { maxConnections: 1 })),
      (ctx) => Effect.orDie(Context.get(ctx, PgClient.PgClient).unsafe("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
    ))
    return url
  })

const fixed = (n: number, digits = 1) => n.toFixed(digits)

const rows = (
  label: string,
  figures: Figures,
  base: Figures,
  one: Figures | undefined,
  targets: boolean,
  floor?: Figures
) => {
  const shape = `${measuredTasks} tasks x ${callsPerTask} calls`
  report({
    bench: "cluster",
    measure: `${label}: a call's round trip p50, tasks one at a time`,
    value: `${fixed(figures.roundTrip, 2)} ms`,
    baseline: `${fixed(base.roundTrip, 2)} ms (embedded)`,
    ratio: `+${fixed(figures.roundTrip - base.roundTrip, 2)} ms a call`,
    ...(targets && one === undefined ? { target: "<= +5 ms" } : {})
  })
  report({
    bench: "cluster",
    measure: `${label}: ${shape}, 8 at a time`,
    value: `${fixed(figures.at8, 0)} calls/s`,
    baseline: `${fixed(base.at8, 0)} calls/s (embedded)`,
    ratio: `${fixed(figures.at8 / base.at8, 2)}x`,
    ...(targets && one === undefined ? { target: ">= 0.5x" } : {})
  })
  report({
    bench: "cluster",
    measure: `${label}: ${measuredTasks * 4} tasks x ${callsPerTask} calls, 64 at a time`,
    value: `${fixed(figures.at64, 0)} calls/s`,
    baseline: `${fixed(figures.at8, 0)} calls/s (8 at a time)`,
    ratio: `${fixed(figures.at64 / figures.at8, 2)}x`,
    ...(targets ? { target: "> 1x" } : {})
  })
  if (floor !== undefined) {
    report({
      bench: "cluster",
      measure: `${label}: beside the embedded platform journaling to the same PostgreSQL, 8 and 64 at a time`,
      value: `${fixed(figures.at8, 0)} / ${fixed(figures.at64, 0)} calls/s`,
      baseline: `${fixed(floor.at8, 0)} / ${fixed(floor.at64, 0)} calls/s (embedded, journaled)`,
      ratio: `${fixed(figures.at8 / floor.at8, 2)}x / ${fixed(figures.at64 / floor.at64, 2)}x`
    })
  }
  if (one !== undefined) {
    report({
      bench: "cluster",
      measure: `${label}: beside one runner, 8 and 64 at a time`,
      value: `${fixed(figures.at8, 0)} / ${fixed(figures.at64, 0)} calls/s`,
      baseline: `${fixed(one.at8, 0)} / ${fixed(one.at64, 0)} calls/s (one runner)`,
      ratio: `${fixed(figures.at8 / one.at8, 2)}x / ${fixed(figures.at64 / one.at64, 2)}x`,
      ...(targets ? { target: ">= 1x" } : {})
    })
  }
  report({
    bench: "cluster",
    measure: `${label}: CPU a call (the platform's processes; the serving process; the database server), 8 at a time`,
    value: `${fixed(figures.cpu.platform, 2)}; ${fixed(figures.cpu.own, 2)}; ${
      figures.cpu.database === undefined ? "-" : fixed(figures.cpu.database, 2)
    } ms`,
    baseline: `${fixed(base.cpu.platform, 2)}; ${fixed(base.cpu.own, 2)} ms (embedded)`
  })
  if (figures.writes !== undefined) {
    report({
      bench: "cluster",
      measure: `${label}: the database's work a task (statements run, BEGIN and COMMIT among them; rows written), 8 at a time`,
      value: `${fixed(figures.writes.statements)}; ${fixed(figures.writes.rows)}`
    })
  }
}

/**
 * An `@effect/rpc` echo's round trip (`rpcEcho`: both ends in this process, their CPU together, 8 in flight), its two
 * frames padded to `frameBytes` on average: what a frame of that size costs the stack the wire is built on. With the
 * average frame it measured.
 */
const echoOfFrames = (frameBytes: number) =>
  Effect.gen(function*() {
    // A request frame is about 160 bytes and the argument's text, its answer about 40.
    const argumentsText = JSON.stringify({ pad: "x".repeat(Math.max(0, Math.round(2 * frameBytes - 200))) })
    Object.assign(wire, { on: true, frames: 0, bytes: 0 })
    const echo = yield* rpcEcho(8, argumentsText)
    wire.on = false
    return { ...echo, frameBytes: wire.bytes / wire.frames }
  })

/**
 * The embedded platform's CPU a call, each beside what its frames cost on `@effect/rpc`: with every event of each task
 * followed as a Stream (`base`), and with tasks run for their output, measured here.
 */
const embeddedCpu = (base: Figures) =>
  Effect.gen(function*() {
    // The wire's floor on the stack it is built on: an `@effect/rpc` round trip's CPU, frames the size of the platform's.
    const floorOf = (figures: Figures) =>
      Effect.map(
        echoOfFrames(figures.wire.bytes / figures.wire.frames),
        (echo) => ({ echo, floor: (figures.wire.frames / 2) * (echo.wideCpu / 1000) })
      )
    const cpuOf = (figures: Figures) => figures.cpu.platform + figures.cpu.own
    const framesOf = (figures: Figures) =>
      `${fixed(figures.wire.frames, 1)} frames, ${fixed(figures.wire.bytes, 0)} bytes a call`
    const followed = yield* floorOf(base)
    report({
      bench: "cluster",
      measure: "embedded platform (memory), every event of each task followed as a Stream (`submitTask`, drained): CPU a call " +
        "(the platform's process; the serving process), 8 at a time",
      value: `${fixed(base.cpu.platform, 2)}; ${fixed(base.cpu.own, 2)} ms (${framesOf(base)})`,
      baseline: `${fixed(followed.floor, 2)} ms (${fixed(base.wire.frames / 2, 2)} rpc echo round trips, frames of ${
        fixed(followed.echo.frameBytes, 0)
      } bytes)`,
      ratio: `${fixed(cpuOf(base) / followed.floor, 2)}x`
    })
    // The platform path itself: the serving process submits each task and runs its calls, and waits for its output.
    const output = yield* embedded(process.env, "output")
    const { echo, floor } = yield* floorOf(output)
    report({
      bench: "cluster",
      measure: "embedded platform (memory), tasks run for their output (`runTask`): CPU a call (the platform's process; " +
        "the serving process), 8 at a time",
      value: `${fixed(output.cpu.platform, 2)}; ${fixed(output.cpu.own, 2)} ms`,
      baseline: `${fixed(cpuOf(base), 2)} ms (every event followed as a Stream); ${
        fixed(echo.wideCpu / 1000, 2)
      } ms (an rpc echo's round trip, both ends, 8 in flight)`,
      ratio: `${fixed(cpuOf(output) / (echo.wideCpu / 1000), 1)}x one round trip`,
      target: "<= 0.5 ms together"
    })
    report({
      bench: "cluster",
      measure: "embedded platform (memory), tasks run for their output: CPU a call beside what its frames cost on " +
        "`@effect/rpc`, 8 at a time",
      value: `${fixed(cpuOf(output), 2)} ms (${framesOf(output)})`,
      baseline: `${fixed(floor, 2)} ms (${fixed(output.wire.frames / 2, 2)} rpc echo round trips, frames of ${
        fixed(echo.frameBytes, 0)
      } bytes)`,
      ratio: `${fixed(cpuOf(output) / floor, 2)}x`,
      target: "<= 1.5x"
    })
  })

const main = Effect.gen(function*() {
  const base = yield* embedded()
  report({
    bench: "cluster",
    measure: `embedded platform (memory): a call's round trip p50; ${embeddedTasks} tasks x ${callsPerTask} calls 8 and 64 at a time`,
    value: `${fixed(base.roundTrip, 2)} ms; ${fixed(base.at8, 0)} / ${fixed(base.at64, 0)} calls/s`
  })
  yield* embeddedCpu(base)
  // The same platform with Node's default young generation (16 MiB a half), the serving process as it is.
  const { NODE_OPTIONS: _, ...defaults } = process.env
  if (process.env.NODE_OPTIONS !== undefined) {
    const atDefaults = yield* embedded(defaults)
    report({
      bench: "cluster",
      measure: "embedded platform (memory), its process with Node's default young generation: CPU a call, 8 at a time",
      value: `${fixed(atDefaults.cpu.platform, 2)}; ${fixed(atDefaults.cpu.own, 2)} ms`,
      baseline: `${fixed(base.cpu.platform, 2)}; ${fixed(base.cpu.own, 2)} ms (NODE_OPTIONS=${process.env.NODE_OPTIONS})`
    })
  }
  // No PostgreSQL started when no mode needs it (`--modes=none`: the embedded platform alone).
  const needsDatabase = ["journaled", "one", "three", "spread"].some((mode) => modes.has(mode))
  for (const durable of needsDatabase ? durables : []) {
    const label = durable
      ? "durable PostgreSQL (fsync, synchronous_commit on)"
      : "tests' PostgreSQL (fsync, synchronous_commit off)"
    const figures = yield* Effect.scoped(Effect.gen(function*() {
      // pg_stat_statements counts each statement as it ends: the database's work a task.
      const server = yield* Pg.postgres({ durable, settings: { shared_preload_libraries: "pg_stat_statements" } })
      const measured = <A>(mode: string, measure: Effect.Effect<A, unknown, Scope.Scope>) =>
        modes.has(mode) ? Effect.asSome(measure) : Effect.succeedNone
      const floor = yield* measured("journaled", Effect.flatMap(database(server, "bench_journal"), (url) => embeddedJournaled(server, url)))
      const one = yield* measured("one", Effect.flatMap(database(server, "bench_one"), (url) => cluster(server, url, 1)))
      const three = yield* measured("three", Effect.flatMap(database(server, "bench_three"), (url) => cluster(server, url, 3)))
      const spread = yield* measured("spread", Effect.flatMap(database(server, "bench_spread"), (url) => cluster(server, url, 3, true)))
      return { floor: Option.getOrUndefined(floor), one: Option.getOrUndefined(one), three: Option.getOrUndefined(three), spread: Option.getOrUndefined(spread) }
    }))
    const { floor, one, three, spread } = figures
    if (floor) rows(`embedded platform journaling to the ${label}`, floor, base, undefined, false)
    if (one) rows(`one runner, ${label}`, one, base, undefined, !durable, floor)
    if (three) rows(`three runners, one serving connection, ${label}`, three, base, one, !durable)
    if (spread) rows(`three runners, a serving connection to each, ${label}`, spread, base, one, !durable)
  }
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

Effect.runPromise(main).then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
