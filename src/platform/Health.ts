/**
 * Liveness and readiness (docs: operations), on the platform's own port, unauthenticated and cheap:
 * `GET /healthz` answers 200 while the process serves; `GET /readyz` answers 200 when every check of the
 * platform passes (embedded: its journal answers; a cluster's runner: it holds shards of the cluster and its
 * database answers) and the process is not draining, else 503, each check said in the JSON body.
 */
import type * as Sharding from "@effect/cluster/Sharding"
import type * as ShardId from "@effect/cluster/ShardId"
import { Cause, Context, Duration, Effect, Layer, Ref } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import type * as Journal from "../Journal.js"

/** The liveness path. */
export const livePath = "/healthz"
/** The readiness path. */
export const readyPath = "/readyz"

/** The shape of `Draining`. */
export interface DrainingService {
  readonly set: (draining: boolean) => Effect.Effect<void>
  readonly get: Effect.Effect<boolean>
}

/**
 * Whether this process drains (it stops taking work before it exits): readiness is false while it does. One per
 * process unless a layer provides another (`layerDraining`): a SIGTERM drains the process, not one layer of it.
 */
export class Draining extends Context.Reference<Draining>()("agent-tools/platform/Draining", {
  defaultValue: () => makeDraining()
}) {}

/** A `Draining` of its own, false until set. */
export const makeDraining = (): DrainingService => {
  const ref = Ref.unsafeMake(false)
  return { set: (draining: boolean) => Ref.set(ref, draining), get: Ref.get(ref) }
}

/** A `Draining` of its own for what it is provided to (a test's platform), false until set. */
export const layerDraining: Layer.Layer<Draining> = Layer.sync(Draining, makeDraining)

/** One readiness check's outcome: `ok`, or why not. */
export interface Check {
  readonly name: string
  readonly ok: boolean
  readonly detail: string
}

/** What the platform's handlers say about being ready (beside draining, which `Draining` says). */
export class Readiness extends Context.Tag("agent-tools/platform/Readiness")<Readiness, {
  readonly checks: Effect.Effect<ReadonlyArray<Check>>
}>() {}

/** A check takes at most this long: a database that does not answer within it is not ready. */
export const checkTimeout = Duration.seconds(2)

/** `check` as a named outcome, bounded by `checkTimeout`, never failing. */
const bounded = (name: string, check: Effect.Effect<string, unknown>): Effect.Effect<Check> =>
  check.pipe(
    Effect.map((detail): Check => ({ name, ok: true, detail })),
    Effect.timeoutTo({
      duration: checkTimeout,
      onTimeout: (): Check => ({ name, ok: false, detail: `no answer within ${Duration.format(checkTimeout)}` }),
      onSuccess: (check) => check
    }),
    Effect.catchAllCause((cause) => {
      // The reason, not the error's whole message: the probe is unauthenticated, the database's host stays out of it.
      const error = Cause.squash(cause) as { readonly reason?: unknown; readonly _tag?: unknown }
      const why = typeof error?.reason === "string" ? error.reason : typeof error?._tag === "string" ? error._tag : "it failed"
      return Effect.succeed<Check>({ name, ok: false, detail: why.slice(0, 300) })
    })
  )

/** The journal answers a cheap read (a lookup by primary key). */
const journalCheck = (journal: Journal.Journal["Type"]) =>
  bounded("database", Effect.as(journal.run("readiness-probe"), "answers"))

/** Embedded: ready when its journal, if any, answers. */
export const embedded = (journal: Journal.Journal["Type"] | undefined): Readiness["Type"] => ({
  checks: journal === undefined
    ? Effect.succeed([{ name: "database", ok: true, detail: "none: tasks in memory" }])
    : Effect.map(journalCheck(journal), (check) => [check])
})

/** A cluster's runner: ready when it holds shards (of `shardsPerGroup`), is not shutting down and its database answers. */
export const cluster = (
  sharding: Sharding.Sharding["Type"],
  shards: ReadonlyArray<ShardId.ShardId>,
  journal: Journal.Journal["Type"]
): Readiness["Type"] => ({
  checks: Effect.all([
    Effect.map(sharding.isShutdown, (down): Check => {
      if (down) return { name: "shards", ok: false, detail: "the runner's sharding is shutting down" }
      const held = shards.filter((shard) => sharding.hasShardId(shard)).length
      return held > 0
        ? { name: "shards", ok: true, detail: `${held} of ${shards.length} held` }
        : { name: "shards", ok: false, detail: `none of ${shards.length} held yet` }
    }),
    journalCheck(journal)
  ])
})

/** Whether `url` is one of the health paths. */
export const isHealthPath = (url: string | undefined): boolean => {
  const path = (url ?? "").split("?")[0]
  return path === livePath || path === readyPath
}

/**
 * The health paths' request listener: `run` runs an effect for it (the server's runtime). Only GET (and HEAD);
 * the answer is never cached.
 */
export const listener = (
  run: (effect: Effect.Effect<void>) => void,
  readiness: Readiness["Type"] | undefined
) =>
(request: IncomingMessage, response: ServerResponse): void => {
  const answer = (status: number, body: unknown) => {
    response.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" })
    response.end(request.method === "HEAD" ? undefined : `${JSON.stringify(body)}\n`)
  }
  if (request.method !== "GET" && request.method !== "HEAD") return answer(405, { error: "GET only" })
  if ((request.url ?? "").split("?")[0] === livePath) return answer(200, { live: true })
  run(Effect.gen(function*() {
    const draining = yield* (yield* Draining).get
    const checks = readiness === undefined ? [] : yield* readiness.checks
    const all: ReadonlyArray<Check> = [
      ...checks,
      { name: "draining", ok: !draining, detail: draining ? "the process drains: it takes no new work" : "no" }
    ]
    const ready = all.every((check) => check.ok)
    answer(ready ? 200 : 503, { ready, checks: Object.fromEntries(all.map((c) => [c.name, { ok: c.ok, detail: c.detail }])) })
  }))
}
