/**
 * Delivery dedupe (design: Delivery dedupe): a served call delivered more than once, keyed by (task id, tool call
 * id), runs once. (Per-run reuse, within one agent run, is the agent loop's own cache; the tasks a serving
 * process holds are `internal/serve/heldTasks.ts`'s, kept in the same store.)
 */
import * as SqlClient from "@effect/sql/SqlClient"
import {
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberId,
  Layer,
  Schedule,
  Schema
} from "effect"
import * as Ids from "./Ids.js"
import { type ClaimOptions, type Deliveries, type DeliveryKey, sameDelivery } from "./internal/call/reuse.js"
import * as Claims from "./internal/sql/claims.js"
import * as SqlStore from "./internal/sql/store.js"
import { OutcomeUnknown, ToolResult, ToolResultFromJson } from "./ToolResult.js"
import { Signal } from "./internal/util/signal.js"
import { Timing } from "./Timing.js"
import * as Metrics from "./internal/util/metrics.js"

// ---------------------------------------------------------------------------------------------
// Delivery dedupe.

/** A delivered call's key, and what the store needs to know of its tool (design: Delivery dedupe). */
export type { ClaimOptions, DeliveryKey } from "./internal/call/reuse.js"

/**
 * The delivery-dedupe store (design: Delivery dedupe). The tasks a serving process holds are a
 * service of their own (`Serve.HeldTasks`), which may share the store's database.
 */
export class Idempotency extends Context.Tag("agent-tools/Idempotency")<Idempotency, {
  /** Whether claims outlive the process (SQL: yes; memory: no). */
  readonly durable: boolean
  /**
   * The outcome of the delivered call `key`: the first delivery's if there was one within the
   * tool's timeout (joining it while it still runs), else `run`'s. `reused` says which.
   */
  readonly once: Deliveries["once"]
  /** Entries held now (in flight or completed, not yet evicted). */
  readonly size: Effect.Effect<number>
}>() {}

/** The text of an idempotent call whose earlier attempt was interrupted after its handler started. */
export const interruptedUnknown = (toolName: string): string =>
  new OutcomeUnknown({ toolName, earlierAttempt: "interrupted" }).text

/** What an interrupted first delivery leaves behind (design: Interruption and shutdown): a released claim, or the "unknown" outcome. */
const afterInterrupt = (claim: ClaimOptions): ToolResult | undefined =>
  claim.idempotent && (claim.started?.() ?? true)
    ? ToolResult.failure(new OutcomeUnknown({ toolName: claim.toolName, earlierAttempt: "interrupted" }))
    : undefined

interface Entry {
  readonly expiresAt: number
  readonly done: Signal<ToolResult>
}


/**
 * The store in memory: a `Map` of entries, single flight through a `Signal` per entry, each entry
 * evicted once its tool's timeout has passed (a sweep on `Timing`'s `dedupeSweep` schedule),
 * so memory stays bounded. Lost when the process ends: `layerSql` keeps claims across restarts.
 * A plain `Map` read and written inside one `Effect.sync` at a time (no fiber can interleave within
 * one), not a `Ref` of a `HashMap`: a call's claim is then one lookup, not a copy of a path of the trie.
 */
export const layerMemory: Layer.Layer<Idempotency> = Layer.scoped(
  Idempotency,
  Effect.gen(function*() {
    const entries = new Map<string, Entry>()
    const policy = yield* Timing
    const sweep = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        for (const [id, entry] of entries) if (entry.expiresAt <= now) entries.delete(id)
      }))
    yield* Effect.forkScoped(Effect.schedule(sweep, policy.dedupeSweep))
    const claim = (id: string, now: number, timeout: Duration.DurationInput) =>
      Effect.sync((): readonly [Entry, boolean] => {
        const found = entries.get(id)
        if (found !== undefined && found.expiresAt > now) return [found, true]
        const entry: Entry = { expiresAt: now + Duration.toMillis(timeout), done: new Signal<ToolResult>() }
        entries.set(id, entry)
        return [entry, false]
      })
    return Idempotency.of({
      once: (key, options, run) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const id = sameDelivery(key)
          return Effect.flatMap(
            claim(id, now, options.timeout),
            ([entry, reused]): Effect.Effect<{ readonly result: ToolResult; readonly reused: boolean }> =>
              reused
                ? Effect.map(entry.done.await, (result) => ({ result, reused }))
                : run.pipe(
                  Effect.tap((result) => Effect.sync(() => entry.done.succeed(result))),
                  // Interrupted (design: Interruption and shutdown): an idempotent call whose handler started keeps its entry, with
                  // the "outcome unknown" result; otherwise no claim is left and the next delivery runs.
                  Effect.onInterrupt(() => {
                    const unknown = afterInterrupt(options)
                    if (unknown !== undefined) return Effect.sync(() => entry.done.succeed(unknown))
                    return Effect.sync(() => {
                      if (entries.get(id) === entry) entries.delete(id)
                      entry.done.complete(Exit.interrupt(FiberId.none))
                    })
                  }),
                  Effect.map((result) => ({ result, reused }))
                )
          )
        }),
      size: Effect.sync(() => entries.size),
      durable: false
    })
  })
)

// ---------------------------------------------------------------------------------------------
// Durable claims in SQL.

/** The store's database could not be opened, prepared or written. */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>("agent-tools/StoreUnavailable")(
  "StoreUnavailable",
  {
    /** The SQLite file, or the client's database as well as the client names it. */
    path: Schema.String,
    reason: Schema.String
  }
) {
  override get message(): string {
    return `the idempotency store ${this.path} cannot be used: ${this.reason}`
  }
}

/** Options of `layerSqlClient`. */
export interface SqlClientOptions {
  /** How long a claim holds without renewal: a crashed owner's claim is taken over after it. Default 10 s. */
  readonly lease?: Duration.DurationInput | undefined
  /** How often a delivery waiting on another owner's claim looks again. Default 50 ms. */
  readonly poll?: Duration.DurationInput | undefined
}

/** Options of `layerSql`. */
export interface SqlOptions extends SqlClientOptions {
  /** The SQLite file (created if missing; WAL mode). */
  readonly filename: string
}

/** A claim's outcome as stored: the `ToolResult`'s JSON, `{ value }` or `{ error }`, as rows have always held it. */
const OutcomeJson = Schema.parseJson(ToolResultFromJson)

/**
 * Claims in the database of the `SqlClient` in context (design: Delivery dedupe), surviving restarts: a
 * claim is written before the handler runs (with a lease, renewed while it runs) and completed with
 * the outcome after. A later delivery gets the stored outcome; waits while another owner's lease is
 * live; and when that lease has expired (its process died) re-runs a tool that is not `idempotent`, or
 * answers `outcome unknown` for one that is. Rows are deleted once the tool's timeout has passed.
 * Fails with `StoreUnavailable`, naming the database, if its tables cannot be made or a claim written.
 */
export const layerSqlClient = (
  options: SqlClientOptions = {}
): Layer.Layer<Idempotency, StoreUnavailable, SqlClient.SqlClient> =>
  Layer.scoped(
    Idempotency,
    Effect.gen(function*() {
      // Rows are read by their column names: a client's name transforms (to camelCase, say) must not apply.
      const sql = (yield* SqlClient.SqlClient).withoutTransforms()
      const unavailable = (reason: string) => new StoreUnavailable({ path: SqlStore.databaseName(sql), reason })
      yield* SqlStore.migrate({ migrations: Claims.migrations, table: Claims.migrationsTable, unavailable })
      // Opening and migrating only read a database already set up: a read-only file, or one whose
      // table was dropped, would pass them and fail every call at its first claim. Written once, now.
      const now = yield* Clock.currentTimeMillis
      const owner = yield* Ids.make("process")
      const written = yield* Claims.probe(sql, owner, now).pipe(
        SqlStore.orUnavailable((reason) => unavailable(`a claim cannot be written: ${reason}`))
      )
      if (!written) return yield* unavailable("a claim written was not read back")
      return yield* makeSqlStore(sql, options)
    })
  )

/**
 * Claims in a SQLite file: `layerSqlClient` on a client of its own for `filename`. A file that cannot
 * be opened fails with `StoreUnavailable` naming it.
 */
export const layerSql = (options: SqlOptions): Layer.Layer<Idempotency, StoreUnavailable> =>
  Layer.provide(
    layerSqlClient(options),
    SqlStore.layerSqlite(options.filename, (reason) => new StoreUnavailable({ path: options.filename, reason }))
  )

/**
 * `run` while the claim's lease is renewed (every third of it); once the store has failed to renew it
 * past its end (stalled, failing, or the claim taken over), `run` is interrupted and the result is
 * `stopped`: another delivery may take the claim over now, and the call must not run twice.
 */
const whileLeased = (
  sql: SqlClient.SqlClient,
  key: DeliveryKey,
  owner: string,
  claim: ClaimOptions,
  leaseMillis: number,
  run: Effect.Effect<ToolResult>,
  stopped: ToolResult
): Effect.Effect<ToolResult> =>
  Effect.gen(function*() {
    const lost = yield* Deferred.make<void>()
    let leaseUntil = (yield* Clock.currentTimeMillis) + leaseMillis
    const lapsed = (now: number) => now >= leaseUntil ? Deferred.succeed(lost, undefined) : Effect.void
    const renewOnce = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Claims.renew(sql, key, owner, now + leaseMillis).pipe(
        // Renewed: the lease runs on. Not renewed (an error, or the claim is no longer ours): lapsed once past it.
        Effect.flatMap((renewed) => renewed ? Effect.sync(() => void (leaseUntil = now + leaseMillis)) : lapsed(now)),
        Effect.catchAll((error) =>
          Effect.zipRight(
            Effect.logWarning(
              `the claim of ${claim.toolName} (${key.taskId}/${key.toolCallId}) was not renewed: ${SqlStore.describe(error)}`
            ),
            lapsed(now)
          )
        )
      ))
    const renewing = yield* Effect.fork(Effect.schedule(
      renewOnce,
      Schedule.spaced(Duration.millis(Math.max(1, Math.floor(leaseMillis / 3))))
    ))
    return yield* Effect.raceFirst(run, Effect.as(Deferred.await(lost), stopped)).pipe(
      Effect.ensuring(Fiber.interrupt(renewing))
    )
  })

const makeSqlStore = (sql: SqlClient.SqlClient, options: SqlClientOptions) =>
  Effect.gen(function*() {
    const policy = yield* Timing
    const leaseMillis = Duration.toMillis(Duration.decode(options.lease ?? "10 seconds"))
    const poll = Duration.decode(options.poll ?? "50 millis")
    const instance = yield* Ids.make("process")
    let claims = 0
    // A store error is a defect here: the call cannot be deduplicated, so it must not run.
    // Tried again while another process holds the file (SQLite), the loop free meanwhile; else a defect.
    const orDie = <A, E>(effect: Effect.Effect<A, E>) => Effect.orDie(SqlStore.whileBusy(effect))
    const complete = (key: DeliveryKey, owner: string, result: ToolResult) =>
      Effect.flatMap(Schema.encode(OutcomeJson)(result), (outcome) => Claims.complete(sql, key, owner, outcome))

    yield* Effect.forkScoped(Effect.schedule(
      Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.ignoreLogged(Claims.sweep(sql, now))),
      policy.dedupeSweep
    ))

    /**
     * Runs the call as the claim's owner: lease renewed meanwhile, outcome written after. A lease that
     * lapses because the store could not renew it (stalled, failing, or the claim taken over) stops the
     * call: another delivery may take the claim over now, and the call must not run twice.
     */
    const runAsOwner = (key: DeliveryKey, owner: string, claim: ClaimOptions, run: Effect.Effect<ToolResult>) =>
      Effect.gen(function*() {
        const stopped = ToolResult.failure(new OutcomeUnknown({ toolName: claim.toolName, earlierAttempt: "stopped" }))
        const result = yield* whileLeased(sql, key, owner, claim, leaseMillis, run, stopped).pipe(
          // Interrupted (design: Interruption and shutdown): an idempotent call whose handler started is completed "outcome
          // unknown" (if that write fails the claim stays pending, and reads so once its lease ends);
          // any other is released, so that the next delivery runs it.
          Effect.onInterrupt(() => {
            const unknown = afterInterrupt(claim)
            return Effect.ignoreLogged(
              unknown === undefined
                ? Claims.release(sql, key, owner)
                : complete(key, owner, unknown)
            )
          })
        )
        // Stopped: the store is failing, and the claim may be another's now; its outcome is written if it still can be.
        if (result === stopped) yield* Effect.ignoreLogged(complete(key, owner, result))
        else yield* orDie(complete(key, owner, result))
        return { result, reused: false }
      })

    return Idempotency.of({
      once: (key, claim, run) =>
        Effect.gen(function*() {
          const owner = `${instance}/${++claims}`
          while (true) {
            const now = yield* Clock.currentTimeMillis
            yield* orDie(Claims.insert(sql, key, {
              toolName: claim.toolName,
              owner,
              leaseUntil: now + leaseMillis,
              expiresAt: now + Duration.toMillis(claim.timeout)
            }))
            const row = yield* orDie(Claims.find(sql, key))
            if (row === undefined) continue // swept between the two statements: claim again
            if (row.owner === owner) return yield* runAsOwner(key, owner, claim, run)
            if (row.state === "completed" && row.outcome !== null) {
              return { result: yield* orDie(Schema.decode(OutcomeJson)(row.outcome)), reused: true }
            }
            if (Number(row.lease_expires_at) > now) {
              yield* Effect.sleep(poll)
              continue
            }
            // The owner's lease expired: its process died mid-call.
            yield* orDie(Claims.takeOver(sql, key, row.owner, owner, now + leaseMillis))
            const taken = yield* orDie(Claims.find(sql, key))
            if (taken?.owner !== owner) continue // someone else took it over first
            if (yield* Metrics.Exporting) Metrics.claimsTakenOver.unsafeUpdate(1, [])
            if (!claim.idempotent) return yield* runAsOwner(key, owner, claim, run)
            const unknown = ToolResult.failure(new OutcomeUnknown({ toolName: claim.toolName, earlierAttempt: "unfinished" }))
            yield* orDie(complete(key, owner, unknown))
            return { result: unknown, reused: false }
          }
        }),
      size: orDie(Claims.count(sql)),
      durable: true
    })
  })
