/**
 * Hostile clients against a runner of a cluster (design: Hostile clients, Cluster mode): the suite of
 * test/support/hostileWireSuite.ts, each platform a runner on a database of its own (migrated) on one
 * PostgreSQL started for the file, with a runner of the same cluster beside it so that calls cross
 * runners.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Logger, LogLevel, Redacted } from "effect"
import { afterAll } from "vitest"
import { LanguageModel } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { forgedAnswerSuite } from "../support/forgedAnswers.js"
import { hostileWireSuite, type MakePlatform, policy, tokens } from "../support/hostileWireSuite.js"
import * as Pg from "../support/postgres.js"

const server = Pg.startPostgres()
afterAll(async () => (await server).stop())

let databases = 0

const cluster: MakePlatform = (script, listen = {}) =>
  Effect.gen(function*() {
    const { url: serverUrl } = yield* Effect.promise(() => server)
    const name = `hostile_${++databases}`
    yield* Effect.scoped(Effect.flatMap(
      Layer.build(PgClient.layer({ url: Redacted.make(serverUrl) })),
      (context) => Context.get(context, PgClient.PgClient).unsafe(`CREATE DATABASE ${name}`)
    ))
    const url = serverUrl.replace(/\/[^/]+$/, `/${name}`)
    yield* Effect.provide(Cluster.migrate, PgClient.layer({ url: Redacted.make(url) }))
    const model = yield* Layer.build(LanguageModel.layerScripted(script))
    const runner = (listenOn: Partial<PlatformServer.ListenOptions>) =>
      Effect.gen(function*() {
        const port = yield* Effect.promise(() => Pg.freePort())
        const context = yield* Layer.build(
          PlatformServer.layerWebSocket({ port: 0, ...listenOn }).pipe(
            Layer.provide(Cluster.layer({ tokens, runner: { port, shardsPerGroup: 30 } })),
            Layer.provide(Layer.succeedContext(model)),
            Layer.provide(PgClient.layer({ url: Redacted.make(url) })),
            Layer.provide(policy),
            // The engine's own lines (runners starting, runners of the test before gone) are not the test's.
            Layer.provide(Logger.minimumLogLevel(LogLevel.Error))
          )
        )
        return yield* Effect.provide(PlatformServer.url, context)
      })
    const attacked = yield* runner(listen)
    yield* runner({})
    return attacked
  }).pipe(Effect.orDie)

hostileWireSuite("a cluster's runner", cluster)
forgedAnswerSuite("a cluster's runner", cluster)
