/**
 * A runner started while its database is away (slow project), on a real PostgreSQL: started while the server
 * is down, it says it waits for it and serves once the server is back, as running runners wait; started with a
 * wrong password, it stops at once saying why and where, without the password.
 */
import { assert, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { spawn } from "node:child_process"
import * as Cluster from "../../src/platform/Cluster.js"
import { startChild } from "../support/childProcess.js"
import { asksFile } from "../support/clusterRunners.js"
import * as Pg from "../support/postgres.js"

it.live("a runner started while PostgreSQL is down waits for it, saying so, and serves once it is back", () =>
  Effect.gen(function*() {
    const asks = yield* asksFile
    // Crash-safe: the schema made before the crash is there after it.
    const server = yield* Pg.postgres({ crashSafe: true })
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(server.url) }))
    yield* Effect.promise(() => server.crash())
    const child = startChild("test/support/clusterRunnerChild.ts", {
      DATABASE_URL: server.url,
      RUNNER_PORT: String(yield* Effect.promise(() => Pg.freePort())),
      RUNNER: "r0",
      ASKS_FILE: asks
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
    const said = yield* Effect.promise(async () => {
      for (let waited = 0; waited < 60_000; waited += 50) {
        const found = child.lines.find((line) => line.includes("cannot be reached"))
        if (found !== undefined) return found
        await new Promise((r) => setTimeout(r, 50))
      }
      return undefined
    })
    assert.isDefined(said, child.lines.join("\n"))
    assert.include(said!, "the runner waits for it")
    assert.notInclude(said!, server.password)
    yield* Effect.promise(() => server.restart())
    const line = yield* Effect.promise(() => child.waitFor("listening:", 90_000))
    assert.isDefined(line, `the runner did not serve once the database was back:\n${child.lines.join("\n")}`)
  }).pipe(Effect.scoped), { timeout: 120_000 })

it.live("a runner started with a wrong password stops, saying why and where, never the password", () =>
  Effect.gen(function*() {
    const asks = yield* asksFile
    const server = yield* Pg.postgres()
    const wrong = "wrong-secret-4711"
    const url = server.url.replace(`:${server.password}@`, `:${wrong}@`)
    assert.notStrictEqual(url, server.url)
    const output = yield* Effect.promise(() =>
      new Promise<{ readonly code: number | null; readonly text: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", "test/support/clusterRunnerChild.ts"], {
          env: { ...process.env, DATABASE_URL: url, RUNNER_PORT: "0", RUNNER: "r0", ASKS_FILE: asks },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let text = ""
        child.stdout.on("data", (chunk) => (text += String(chunk)))
        child.stderr.on("data", (chunk) => (text += String(chunk)))
        child.on("close", (code) => resolve({ code, text }))
      })
    )
    assert.notStrictEqual(output.code, 0)
    assert.include(output.text, "refused the connection: password authentication failed")
    assert.include(output.text, `${server.host}:${server.port}`)
    assert.notInclude(output.text, wrong)
    assert.notInclude(output.text, server.password)
  }).pipe(Effect.scoped), { timeout: 120_000 })
