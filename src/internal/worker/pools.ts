/**
 * The pools of tools made with `worker: import.meta.url` (design: Worker threads): one pool per
 * module, each worker loading the tool worker entry (`toolWorker.ts`) with that module. Loaded on
 * first use by `ToolWorkers`'s default, and by `WorkerPool.layerTools`.
 */
import { Effect, Scope } from "effect"
import { availableParallelism } from "node:os"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import { type JobError, make, type ModuleNotFound, type Options, WorkerCrashed, type WorkerPool } from "./pool.js"
import { modulesOf, type ToolWorkersService } from "./types.js"

/** Each pool's bounds (`WorkerPool.layerTools`'s options): `size`, and `make`'s `resourceLimits` and `maxOutputBytes`. */
export type PoolBounds = Pick<Options, "size" | "resourceLimits" | "maxOutputBytes">

/** A pool per module, each started once (on first use, or by `layerTools`) in `scope`. */
export const makeToolWorkers = (scope: Scope.Scope, bounds: PoolBounds, unref: boolean) => {
  const pools = new Map<string, Effect.Effect<WorkerPool, ModuleNotFound>>()
  const pool = (module: URL): Effect.Effect<WorkerPool, ModuleNotFound> => {
    let started = pools.get(module.href)
    if (started === undefined) {
      started = Effect.runSync(Effect.cached(make({
        module: toolWorkerEntry,
        size: bounds.size ?? Math.max(2, availableParallelism() - 1),
        resourceLimits: bounds.resourceLimits,
        maxOutputBytes: bounds.maxOutputBytes,
        workerData: { module: module.href },
        unref
      }).pipe(Scope.extend(scope))))
      pools.set(module.href, started)
    }
    return started
  }
  // Threads that do not keep the process alive: a job waiting for one (its start, its answer) does.
  let waiting = 0
  let keepAlive: ReturnType<typeof setInterval> | undefined
  const held = <A, E>(job: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    !unref ? job : Effect.acquireUseRelease(
      Effect.sync(() => {
        if (waiting++ === 0) keepAlive = setInterval(() => {}, 2 ** 30)
      }),
      () => job,
      () =>
        Effect.sync(() => {
          if (--waiting === 0) clearInterval(keepAlive)
        })
    )
  const run = (tool: Tool.Any, input: unknown, info: ToolCallInfo): Effect.Effect<unknown, JobError | WorkerCrashed> =>
    held(Effect.flatMap(
      Effect.mapError(pool(tool.worker!), (missing) => new WorkerCrashed({ message: missing.message })),
      (pool) => pool.run(tool.name, { input, info: plainInfo(info) })
    ))
  const prepare = (tools: Iterable<Tool.Any>): Effect.Effect<void, ModuleNotFound | JobError | WorkerCrashed> => {
    const modules = modulesOf(tools)
    if (modules.length === 0) return Effect.void
    // Each pool waits for its workers once; a later prepare of the same module is at once.
    return held(Effect.forEach(modules, (module) => Effect.flatMap(pool(module), (pool) => pool.ready), {
      concurrency: "unbounded",
      discard: true
    }))
  }
  return { pool, run, prepare }
}

// The call's context as data that crosses threads.
const plainInfo = (info: ToolCallInfo): ToolCallInfo => ({
  taskId: info.taskId,
  toolCallId: info.toolCallId,
  attempt: info.attempt,
  deadlineAt: info.deadlineAt,
  expiringThresholdMillis: info.expiringThresholdMillis
})

let processWide: ToolWorkersService | undefined
/** The default pools (`ToolWorkers`'s): one scope for the process, never closed; their threads do not keep it alive. */
export const processWorkers = (): ToolWorkersService => {
  if (processWide === undefined) {
    processWide = makeToolWorkers(Effect.runSync(Scope.make()), {}, true)
  }
  return processWide
}

/** The workers' entry module: loads a tools module and runs its tools' bodies. */
const toolWorkerEntry = new URL(import.meta.url.endsWith(".ts") ? "./toolWorker.ts" : "./toolWorker.js", import.meta.url)
