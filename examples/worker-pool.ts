/** A CPU-heavy body on worker threads: the pool runs a function of `digest.worker.ts` by name. */
import { Effect, Schema } from "effect"
import { Invocation, Tool, WorkerPool } from "../src/index.js"

/** Starts a pool, digests `text` through the whole pipeline, and stops the pool. */
export const main = (text: string) =>
  Effect.scoped(Effect.gen(function*() {
    // #region tool
    // In the process that runs the toolkit: the pool lives as long as this scope.
    const pool = yield* WorkerPool.make({ module: new URL("./digest.worker.ts", import.meta.url), size: 2 })
    const digest = Tool.make("digest", {
      description: "Digest a report.",
      input: { text: Schema.String },
      timeout: "30 seconds"
    }, (input) => pool.run<string>("digest", input))
    // #endregion
    return yield* Invocation.run(digest, { text })
  }))
