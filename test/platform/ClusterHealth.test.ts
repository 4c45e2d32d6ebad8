/**
 * Readiness of a cluster's runners (docs: operations), slow project: two runner processes on the project's
 * PostgreSQL. A runner that has just joined is not ready until the cluster gives it shards, and says so; one that has
 * lost its database is not ready (`/healthz` stays live), and is again once the database is back. Tasks run through
 * both: their Prometheus texts (`--metrics`) parse, and their task counters add up to the tasks run.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted, Schedule, Schema } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Timing, Tool, Toolkit } from "../../src/index.js"
import { Serve } from "../../src/exports/serve.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { type Child, startChild } from "../support/childProcess.js"
import { clientLayer } from "../support/platform.js"
import * as Pg from "../support/postgres.js"

const policy = Timing.layer({ reconnect: Schedule.spaced("200 millis").pipe(Schedule.intersect(Schedule.recurs(600))) })

const step = Tool.make("step", {
  description: "Does a step of a task.",
  input: { n: Schema.Number, step: Schema.Number },
  output: Schema.String,
  timeout: "30 seconds"
}, ({ n, step }) => Effect.succeed(`did ${n}.${step}`))

const wsOf = (http: string) => `${http.replace(/^http:/, "ws:")}/rpc`

/**
 * The sum of the samples named `name` with `labels` in a Prometheus text (0.0.4), every line of it read: `# HELP` and
 * `# TYPE` comments, or `name{label="value",...} number`; a line of neither form fails the test.
 */
const counter = (text: string, name: string, labels: Readonly<Record<string, string>>): number => {
  let sum = 0
  for (const line of text.split("\n").filter((l) => l !== "")) {
    if (/^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$/.test(line)) continue
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\})? (\S+)$/.exec(line)
    assert.isNotNull(sample, `not a Prometheus line: ${line}`)
    const found = Object.fromEntries([...(sample![2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]))
    if (sample![1] === name && Object.entries(labels).every(([k, v]) => found[k] === v)) sum += Number(sample![3])
  }
  return sum
}

/** A probe's answer: its status (0: no answer), and the checks it names. */
interface Probe {
  readonly status: number
  readonly checks: Record<string, { readonly ok: boolean; readonly detail: string }>
}

const probe = async (http: string, path: string): Promise<Probe> => {
  try {
    const response = await fetch(`${http}${path}`, { signal: AbortSignal.timeout(5_000) })
    const body = await response.json() as { readonly checks?: Probe["checks"] }
    return { status: response.status, checks: body.checks ?? {} }
  } catch {
    return { status: 0, checks: {} }
  }
}

/** Probes `/readyz` every 100 ms until `done` says so (or 90 s pass); every answer, in order. */
const probeUntil = (http: string, done: (probe: Probe) => boolean) =>
  Effect.promise(async () => {
    const seen: Array<Probe> = []
    const until = Date.now() + 90_000
    while (Date.now() < until) {
      const answer = await probe(http, "/readyz")
      seen.push(answer)
      if (done(answer)) break
      await new Promise((r) => setTimeout(r, 100))
    }
    return seen
  })

it.live("a runner is not ready until it holds shards, nor while its database is away; ready otherwise; the runners' Prometheus counters add up to the tasks run", () =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-cluster-health-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const asksFile = join(dir, "asks.txt")
    writeFileSync(asksFile, "")
    const server = yield* Pg.postgres()
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))

    const start = (name: string) =>
      Effect.gen(function*() {
        const child: Child = startChild("test/support/clusterRunnerChild.ts", {
          DATABASE_URL: server.url,
          RUNNER_PORT: String(yield* Effect.promise(() => Pg.freePort())),
          RUNNER: name,
          ASKS_FILE: asksFile,
          TURNS: "1",
          METRICS: "1"
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
        const line = yield* Effect.promise(() => child.waitFor("listening:", 60_000))
        assert.isDefined(line, `runner ${name} did not start: ${child.lines.join("\n")}`)
        return line!.slice("listening:".length).replace(/^ws:/, "http:").replace(/\/rpc$/, "")
      })

    // The first runner: ready once the cluster gave it its shards.
    const first = yield* start("r0")
    const firstSeen = yield* probeUntil(first, (p) => p.status === 200)
    assert.strictEqual(firstSeen.at(-1)?.status, 200, JSON.stringify(firstSeen.at(-1)))
    assert.isTrue(firstSeen.at(-1)!.checks.shards!.ok && firstSeen.at(-1)!.checks.database!.ok)

    // A second runner joins: the shards it is to hold are the first's until they move; until then it is not ready.
    const second = yield* start("r1")
    const secondSeen = yield* probeUntil(second, (p) => p.status === 200)
    assert.strictEqual(secondSeen[0]?.status, 503, JSON.stringify(secondSeen[0]))
    assert.isFalse(secondSeen[0]!.checks.shards!.ok)
    assert.match(secondSeen[0]!.checks.shards!.detail, /^none of 30 held yet$/)
    assert.isTrue(secondSeen[0]!.checks.database!.ok)
    assert.strictEqual(secondSeen.at(-1)?.status, 200, JSON.stringify(secondSeen.at(-1)))
    assert.isTrue(secondSeen.at(-1)!.checks.shards!.ok)

    // Tasks through both runners: the Prometheus text of each parses, and their counters add up to the tasks run.
    const tasks = 10
    yield* Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(step))
      yield* Effect.forEach(Array.from({ length: tasks }, (_, i) => i), (i) => served.runTask(`task ${i}`), { concurrency: 5 })
    }).pipe(Effect.provide(clientLayer({ url: [first, second].map(wsOf).join(",") }, policy)), Effect.scoped)
    const scraped = yield* Effect.promise(() =>
      Promise.all([first, second].map((http) => fetch(`${http}/metrics`).then((r) => r.text())))
    )
    const counted = (name: string, labels: Readonly<Record<string, string>> = {}) =>
      scraped.map((text) => counter(text, name, labels)).reduce((a, b) => a + b, 0)
    const agent = { agent_tools_agent: "agent-1" }
    assert.strictEqual(counted("agent_tools_platform_tasks_submitted", agent), tasks)
    assert.strictEqual(counted("agent_tools_platform_tasks_ended", { ...agent, agent_tools_outcome: "completed" }), tasks)
    assert.isAtLeast(counted("agent_tools_platform_tasks_started", agent), tasks)
    assert.strictEqual(counted("agent_tools_platform_tasks_open", agent), 0)

    // The database goes away: neither is ready (the database named), both still live; then back, both ready again.
    yield* Effect.promise(() => server.crash())
    for (const runner of [first, second]) {
      const seen = yield* probeUntil(runner, (p) => p.status === 503 && p.checks.database?.ok === false)
      assert.strictEqual(seen.at(-1)?.status, 503, JSON.stringify(seen.at(-1)))
      assert.isFalse(seen.at(-1)!.checks.database!.ok)
      assert.strictEqual((yield* Effect.promise(() => probe(runner, "/healthz"))).status, 200)
    }
    yield* Effect.promise(() => server.restart())
    for (const runner of [first, second]) {
      const seen = yield* probeUntil(runner, (p) => p.status === 200)
      assert.strictEqual(seen.at(-1)?.status, 200, JSON.stringify(seen.at(-1)))
    }
  }).pipe(Effect.scoped), 300_000)
