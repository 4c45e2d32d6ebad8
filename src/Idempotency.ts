/**
 * Reusing outcomes instead of running again. S9: within one agent run, an `idempotent` tool's
 * first outcome for an input is reused for the rest of the run (`RunCache`). S10: a served call
 * delivered more than once, keyed by (task id, tool call id), runs once (`Idempotency`).
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, FiberId, HashMap, Layer, Ref } from "effect"
import * as Invocation from "./Invocation.js"
import { RetryPolicy } from "./RetryPolicy.js"

/**
 * The per-run cache of S9: key -> the first outcome, or the call still computing it (single
 * flight: a duplicate emitted while the first runs waits for it). Made per run, used only by that
 * run; plain state is enough, since JavaScript runs the lookups and inserts without interleaving.
 */
export class RunCache {
  private readonly entries = new Map<string, Invocation.Started>()

  /** The outcome for `key`: reused (`cached: true`) if known or in flight, else from `start()`. */
  use(key: string, start: () => Invocation.Started): { readonly started: Invocation.Started; readonly cached: boolean } {
    const known = this.entries.get(key)
    if (known !== undefined) return { started: known, cached: true }
    const started = start()
    if (started instanceof Invocation.ToolResult) {
      this.entries.set(key, started)
      return { started, cached: false }
    }
    const done = Deferred.unsafeMake<Invocation.ToolResult>(FiberId.none)
    this.entries.set(key, Deferred.await(done))
    return {
      started: started.pipe(
        Effect.tap((result) => {
          this.entries.set(key, result)
          return Deferred.done(done, Exit.succeed(result))
        }),
        // The first call was interrupted (its run is ending): so are the duplicates waiting on it.
        Effect.onInterrupt(() => Deferred.interrupt(done))
      ),
      cached: false
    }
  }

  /** How many distinct keys the run has seen. */
  get size(): number {
    return this.entries.size
  }
}

// ---------------------------------------------------------------------------------------------
// S10: delivery dedupe.

/** A delivered call: the pair is the key, never either half. */
export interface DeliveryKey {
  readonly taskId: string
  readonly toolCallId: string
}

/** The delivery-dedupe store. */
export class Idempotency extends Context.Tag("agent-tools/Idempotency")<Idempotency, {
  /**
   * The outcome of the delivered call `key`: the first delivery's if there was one within `ttl`
   * (joining it while it still runs), else `run`'s. `reused` says which.
   */
  readonly once: (
    key: DeliveryKey,
    ttl: Duration.Duration,
    run: Effect.Effect<Invocation.ToolResult>
  ) => Effect.Effect<{ readonly result: Invocation.ToolResult; readonly reused: boolean }>
  /** Entries held now (in flight or completed, not yet evicted). */
  readonly size: Effect.Effect<number>
}>() {}

interface Entry {
  readonly expiresAt: number
  readonly done: Deferred.Deferred<Invocation.ToolResult>
}

const keyOf = (key: DeliveryKey): string => `${key.taskId}\u0000${key.toolCallId}`

/**
 * The store in memory: a `Ref` of entries, single flight through a `Deferred` per entry, each entry
 * evicted once its tool's timeout has passed (a sweep on `RetryPolicy`'s `dedupeSweep` schedule),
 * so memory stays bounded. Lost when the process ends: `layerSql` keeps claims across restarts.
 */
export const layerMemory: Layer.Layer<Idempotency> = Layer.scoped(
  Idempotency,
  Effect.gen(function*() {
    const entries = yield* Ref.make(HashMap.empty<string, Entry>())
    const policy = yield* RetryPolicy
    const sweep = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Ref.update(entries, HashMap.filter((entry) => entry.expiresAt > now)))
    yield* Effect.forkScoped(Effect.schedule(sweep, policy.dedupeSweep))
    return Idempotency.of({
      once: (key, ttl, run) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const id = keyOf(key)
          return Effect.flatMap(
            Ref.modify(entries, (map): [readonly [Entry, boolean], HashMap.HashMap<string, Entry>] => {
              const found = HashMap.get(map, id)
              if (found._tag === "Some" && found.value.expiresAt > now) return [[found.value, true], map]
              const entry: Entry = { expiresAt: now + Duration.toMillis(ttl), done: Deferred.unsafeMake(FiberId.none) }
              return [[entry, false], HashMap.set(map, id, entry)]
            }),
            ([entry, reused]): Effect.Effect<{ readonly result: Invocation.ToolResult; readonly reused: boolean }> =>
              reused
                ? Effect.map(Deferred.await(entry.done), (result) => ({ result, reused }))
                : run.pipe(
                  Effect.tap((result) => Deferred.succeed(entry.done, result)),
                  // An interrupted first delivery leaves no claim: the next one runs.
                  Effect.onInterrupt(() =>
                    Effect.zipRight(Ref.update(entries, HashMap.remove(id)), Deferred.interrupt(entry.done))
                  ),
                  Effect.map((result) => ({ result, reused }))
                )
          )
        }),
      size: Effect.map(Ref.get(entries), HashMap.size)
    })
  })
)
