/**
 * A platform of the cluster benchmark (test/bench/cluster.ts) in a process of its own, as platforms
 * run: the embedded platform (memory, or journaling to PostgreSQL with `--journal=<url>`), or one cluster
 * runner (`--database=<url> --port=<runner port>`).
 * Its model asks for `callsPerTask` calls of `echo`, one a turn, then answers. Prints its URL, then
 * serves until stdin closes.
 */
import * as Postgres from "../../src/internal/sql/postgres.js"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { LanguageModel } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import * as Journal from "../../src/Journal.js"
import * as Cluster from "../../src/platform/Cluster.js"
import { script } from "../support/benchTask.js"

const tokens = new Map([["tok-1", "agent-1"]])
const option = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)

/**
 * The embedded platform (in memory, or journaling to the PostgreSQL database `journal`), or a runner on `database`;
 * PostgreSQL opened as the CLI opens it (internal/sql/postgres.ts).
 */
const handlersOf = (database: string | undefined, journal: string | undefined) =>
  database !== undefined
    ? Cluster.layer({ tokens, runner: { port: Number(option("port")) } }).pipe(
      Layer.provide(Postgres.layer(database))
    )
    : journal !== undefined
    ? PlatformServer.layerHandlers({ tokens }).pipe(
      Layer.provide(Journal.layerSqlClient),
      Layer.provide(Postgres.layer(journal))
    )
    : PlatformServer.layerHandlers({ tokens })

const main = Effect.gen(function*() {
  const context = yield* Layer.build(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provide(handlersOf(option("database"), option("journal"))),
      Layer.provide(LanguageModel.layerScripted(script, { perConversation: true, keepRequests: false }))
    )
  )
  process.stdout.write(`${yield* Effect.provide(PlatformServer.url, context)}\n`)
  yield* Effect.async<void>((resume) => {
    process.stdin.on("end", () => resume(Effect.void))
    process.stdin.resume()
  })
}).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning))

if (/clusterPlatform\.(ts|m?js)$/.test(process.argv[1] ?? "")) {
  Effect.runPromise(main).then(() => process.exit(0), (error) => {
    console.error(error)
    process.exit(1)
  })
}
