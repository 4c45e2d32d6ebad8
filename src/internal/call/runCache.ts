/**
 * The agent loop's per-run cache (design: Per-run reuse): within one run, an `idempotent` tool's first outcome for an
 * input is reused for the rest of the run.
 */
import { Effect, Exit, FiberId } from "effect"
import { ToolResult } from "../../ToolResult.js"
import type { Started } from "./pipeline.js"
import { Signal } from "../util/signal.js"

/**
 * The per-run cache: key -> the first outcome, or the call still computing it (single
 * flight: a duplicate emitted while the first runs waits for it). Made per run, used only by that
 * run; plain state is enough, since JavaScript runs the lookups and inserts without interleaving.
 */
export class RunCache {
  private readonly entries = new Map<string, Started>()

  /** The outcome for `key`: reused (`cached: true`) if known or in flight, else from `start()`. */
  use(key: string, start: () => Started): { readonly started: Started; readonly cached: boolean } {
    const known = this.entries.get(key)
    if (known !== undefined) return { started: known, cached: true }
    const started = start()
    if (started instanceof ToolResult) {
      this.entries.set(key, started)
      return { started, cached: false }
    }
    const done = new Signal<ToolResult>()
    this.entries.set(key, done.await)
    return {
      started: started.pipe(
        Effect.tap((result) =>
          Effect.sync(() => {
            this.entries.set(key, result)
            done.succeed(result)
          })
        ),
        // The first call was interrupted (its run is ending): so are the duplicates waiting on it.
        Effect.onInterrupt(() => Effect.sync(() => done.complete(Exit.interrupt(FiberId.none))))
      ),
      cached: false
    }
  }

  /** The outcome for `key`, known or in flight, if any. */
  peek(key: string): Started | undefined {
    return this.entries.get(key)
  }

  /** How many distinct keys the run has seen. */
  get size(): number {
    return this.entries.size
  }
}
