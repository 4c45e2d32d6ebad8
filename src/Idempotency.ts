/**
 * Reusing outcomes instead of running again. S9: within one agent run, an `idempotent` tool's
 * first outcome for an input is reused for the rest of the run (`RunCache`). S10, delivery dedupe
 * for served calls, lands here with the serving side.
 */
import { Deferred, Effect, Exit, FiberId } from "effect"
import * as Invocation from "./Invocation.js"

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
