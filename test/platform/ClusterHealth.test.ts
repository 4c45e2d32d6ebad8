/**
 * Readiness of a cluster's runners (docs: operations), slow project: two runner processes on the project's
 * PostgreSQL. A runner that has just joined is not ready until the cluster gives it shards, and says so; one that has
 * lost its database is not ready (`/healthz` stays live), and is again once the database is back.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Cluster from "../../src/platform/Cluster.js"
import { type Child, startChild } from "../support/childProcess.js"
import * as Pg from "../support/postgres.js"

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

it.live("a runner is not ready until it holds shards, nor while its database is away; ready otherwise", () =>
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
          ASKS_FILE: asksFile
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
