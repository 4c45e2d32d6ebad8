/**
 * Claims shared on PostgreSQL (design: Delivery dedupe): two `agent-tools serve` processes of one agent, each with
 * `IDEMPOTENCY_DB` set to the same PostgreSQL URL (the project's test PostgreSQL). A call is delivered to the first,
 * whose connection to the platform then goes down mid-call; past the grace the platform delivers it to the second.
 * The first finishes the call (its database connection is its own), the second reads the outcome from the shared
 * claim: the task's answer is the first process's, and the side effect happened once.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Timing } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { type Protocol } from "../src/exports/protocol.js"
import { PlatformClient } from "../src/exports/serve.js"
import { startChild } from "./support/childProcess.js"
import { call, promptOf, resultsOf, stepOf } from "./support/execAgent.js"
import { clientLayer } from "./support/platform.js"
import { pgClient, postgres } from "./support/postgres.js"
import { tcpProxy } from "./support/tcpProxy.js"

const policy = Timing.layer({ redelivery: Schedule.spaced("200 millis") })

/** Every task charges the order its prompt names (call `c1`), then says what it read. */
const script: LanguageModel.ScriptedTurn = (request) =>
  stepOf(request) === 0
    ? { toolCalls: [call("c1", "charge", { order: promptOf(request) })] }
    : { text: resultsOf(request).join(" ") }

/** A `serve` process of agent-1 on `url`, with `env`; SIGKILLed at the end of the scope if still running. */
const serve = (url: string, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      startChild("src/main.ts", { AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-1", PLATFORM_URL: url, ...env }, [
        "serve",
        "--tools",
        "test/support/sharedClaimsTools.ts",
        "--grace",
        "1"
      ])
    ),
    (child) =>
      Effect.promise(() => {
        if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGKILL")
        return child.exited
      })
  )

/** Waits until `until` holds, looking every 50 ms, for at most `seconds`. */
const eventually = (until: Effect.Effect<boolean>, what: string, seconds = 60) =>
  until.pipe(
    Effect.repeat({ until: (holds) => holds, schedule: Schedule.spaced("50 millis") }),
    Effect.timeoutFail({ duration: `${seconds} seconds`, onTimeout: () => new Error(`waited ${seconds} s for ${what}`) }),
    Effect.orDie
  )

describe("serve: IDEMPOTENCY_DB on PostgreSQL, shared by two processes (design: Delivery dedupe)", () => {
  it.live("a call delivered to both processes runs once; the second answers with the first's outcome", () =>
    Effect.gen(function*() {
      const pg = yield* postgres()
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-pgclaims-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const effectFile = join(dir, "effects.txt")
      const release = join(dir, "release")
      writeFileSync(effectFile, "")
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provideMerge(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]), workerGrace: "300 millis" })),
          Layer.provide(LanguageModel.layerScripted([script], { repeat: true })),
          Layer.provide(policy)
        )
      ).pipe(Effect.orDie)
      const url = yield* Effect.provide(PlatformServer.url, context)
      const state = Context.get(context, PlatformServer.PlatformState)
      const watching = (count: number) =>
        eventually(Effect.map(state.watchingProcesses("agent-1"), (ps) => ps.length >= count), `${count} worker(s)`)
      const proxy = yield* tcpProxy({ host: "127.0.0.1", port: Number(new URL(url).port) })
      const common = { IDEMPOTENCY_DB: pg.url, EFFECT_FILE: effectFile }
      // w1 reaches the platform through the proxy and holds its call until `release` exists.
      yield* serve(`ws://127.0.0.1:${proxy.port}${PlatformServer.path}`, { ...common, WORKER: "w1", HOLD_UNTIL: release })
      yield* watching(1)
      const effects = () => readFileSync(effectFile, "utf8").split("\n").filter((line) => line !== "")

      const client = Context.get(yield* Layer.build(clientLayer({ url }, policy)), PlatformClient.PlatformClient)
      const events: Array<Protocol.TaskEvent> = []
      const task = yield* Effect.fork(Effect.scoped(Effect.gen(function*() {
        const mailbox = yield* client.submitTask({ agentId: "agent-1", processId: "submitter", prompt: "B-7" })
        while (true) {
          const [chunk, done] = yield* mailbox.takeAll
          for (const event of chunk) {
            events.push(event)
            if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") return event
          }
          if (done) return yield* Effect.dieMessage("the task's stream ended before the task did")
        }
      })))
      yield* eventually(Effect.sync(() => effects().length === 1), "the call running on w1")
      // The second process comes once the call runs on the first; then the first's host is gone to the platform.
      yield* serve(url, { ...common, WORKER: "w2" })
      yield* watching(2)
      assert.isAbove(proxy.down(), 0)
      // The platform gives the call to w2 past the grace: the task says it waits, as w1 went away with it.
      yield* eventually(Effect.sync(() => events.some((e) => e._tag === "TaskWaiting")), "TaskWaiting")
      // w1 finishes the call and completes its claim on PostgreSQL; its answer cannot reach the platform.
      writeFileSync(release, "")
      const end = yield* task
      // The answer came through w2, and is w1's: w2 read the shared claim and did not charge again.
      assert.strictEqual(end._tag === "TaskCompleted" ? end.output : `${end._tag}`, "c1=\"charged B-7 on w1\"")
      assert.deepStrictEqual(effects(), [`w1 ${end.taskId}/c1`])
      const rows = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ readonly n: string }>`SELECT count(*) AS n FROM tool_claims`)
        .pipe(Effect.provide(pgClient(pg.url)), Effect.orDie)
      assert.isAtLeast(Number(rows[0]?.n), 1, "the claim is a row of PostgreSQL's tool_claims")
    }).pipe(Effect.scoped), 180_000)
})
