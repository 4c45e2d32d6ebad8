/**
 * Sessions on a real PostgreSQL (started by test/support/postgres.ts): the journal's `layerSqlClient` on an
 * `@effect/sql-pg` client keeps a session's turns, and two processes' runs of one session never interleave.
 */
import { assert, layer } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Layer, Option, Schema } from "effect"
import { Agent, Journal, LanguageModel, Session, Tool } from "../src/index.js"
import * as Pg from "./support/postgres.js"
import { linesOf, threeRuns, threeRunsScript } from "./support/sessions.js"

/** A journal on the server's database: each build is another process's. */
const openJournal = Effect.map(Layer.build(Journal.layerSqlClient), Context.get(Journal.Journal))

layer(Pg.layer(), { timeout: "60 seconds", excludeTestServices: true })("sessions on PostgreSQL", (it) => {
  it.scoped("three runs of one session: the third model request holds the first two runs' turns", () =>
    Effect.gen(function*() {
      const journal = yield* openJournal
      yield* threeRuns("pg-s-42").pipe(
        Effect.provideService(Journal.Journal, journal),
        Effect.provide(LanguageModel.layerScripted(threeRunsScript))
      )
    }), 30_000)

  it.scoped("a run of a session held by another process's run is refused; once that one ends, the next reads its turn", () =>
    Effect.gen(function*() {
      const [a, b] = yield* Effect.all([openJournal, openJournal])
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const wait = Tool.make("wait", { description: "Waits.", input: {}, output: Schema.String, timeout: "1 minute" }, () =>
        Effect.zipRight(Deferred.succeed(entered, undefined), Effect.as(Deferred.await(release), "waited")))
      const agent = Agent.make({ tools: [wait] })
      const first = yield* Agent.run(agent, "first", { session: "pg-busy", runId: "pg-run-first" }).pipe(
        Effect.provideService(Journal.Journal, a),
        Effect.provide(LanguageModel.layerScripted([{ toolCalls: [{ id: "w1", name: "wait", arguments: "{}" }] }, { text: "done" }])),
        Effect.fork
      )
      yield* Deferred.await(entered)
      const other = LanguageModel.layerScripted([{ text: "second" }])
      const exit = yield* Effect.exit(Agent.run(agent, "second", { session: "pg-busy" }).pipe(
        Effect.provideService(Journal.Journal, b),
        Effect.provide(other)
      ))
      const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
      assert.isTrue(Option.isSome(failure) && failure.value instanceof Session.SessionBusy)
      assert.strictEqual((failure as Option.Some<Session.SessionBusy>).value.runId, "pg-run-first")
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(first)).output, "done")
      const [, seen] = yield* Effect.zip(
        Agent.run(agent, "third", { session: "pg-busy" }),
        Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      ).pipe(Effect.provideService(Journal.Journal, b), Effect.provide(LanguageModel.layerScripted([{ text: "third" }])))
      assert.deepStrictEqual(linesOf(seen[0]), ["user: first", "assistant:  [w1 wait]", "tool w1: \"waited\"", "assistant: done", "user: third"])
    }), 30_000)
})
