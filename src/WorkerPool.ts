/**
 * CPU-bound work on worker threads (design: Worker threads), so the event loop is never blocked.
 * A tool's own body moves off the loop with one line, `Tool.make(..., { worker: import.meta.url })`:
 * its pool (`ToolWorkers`) is started before the first call (`layerTools`, or by the face that runs
 * the tools, in the face's scope); outside both, a call runs on a worker of its own. For other work,
 * a module the workers load declares functions (`WorkerPool.serve({ digest })`) and a handler asks a
 * pool to run one by name (`(input) => pool.run("digest", input)`).
 * At the deadline or on interruption the job's worker is terminated (a synchronous function cannot
 * yield) and the pool starts another; a worker that crashes is the call's failure, and is replaced.
 */
import { Effect, Layer } from "effect"
import type * as Tool from "./Tool.js"
import type { JobError, ModuleNotFound, WorkerCrashed } from "./internal/worker/pool.js"
import { makeToolWorkers } from "./internal/worker/pools.js"
import { ToolWorkers } from "./internal/worker/service.js"

export {
  defaultMaxOutputBytes,
  defaultResourceLimits,
  invalidOutput,
  JobError,
  JobFailed,
  make,
  ModuleNotFound,
  type Options,
  RunJob,
  serve,
  serveJobs,
  WorkerCrashed,
  type WorkerPool
} from "./internal/worker/pool.js"
export { ToolWorkers } from "./internal/worker/service.js"
export type { ToolWorkersService } from "./internal/worker/types.js"

/** Options of `layerTools`. */
export interface ToolWorkersOptions {
  /** Workers per module. Default: the CPUs less one, at least two (a replaced worker does not stop every call). */
  readonly size?: number | undefined
  /** Each worker's heap bounds (Node's `resourceLimits`). Default `defaultResourceLimits` (1 GiB old generation). */
  readonly resourceLimits?: import("node:worker_threads").ResourceLimits | undefined
  /** The largest output a body may give, in bytes, checked in the worker. Default 16 MiB. */
  readonly maxOutputBytes?: number | undefined
}

/**
 * Starts the worker threads of `tools` (those made with `worker: import.meta.url`; others are
 * ignored) and waits until each has loaded its module; closing the layer stops them. Build it with
 * the layer that runs the tools (`Serve.layer`, `Mcp`'s servers do so for their toolkit): no call
 * pays for a worker's start, and a call's deadline is the body's time alone.
 */
export const layerTools = (
  tools: Iterable<Tool.Any>,
  options?: ToolWorkersOptions
): Layer.Layer<ToolWorkers, ModuleNotFound | JobError | WorkerCrashed> =>
  Layer.scoped(
    ToolWorkers,
    Effect.gen(function*() {
      const workers = makeToolWorkers(yield* Effect.scope, options ?? {})
      yield* workers.prepare(tools)
      return workers
    })
  )

