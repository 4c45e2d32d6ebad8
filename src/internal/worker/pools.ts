/**
 * The pools of tools made with `worker: import.meta.url` (design: Worker threads): one pool per
 * module, each worker loading the tool worker entry (`toolWorker.ts`) with that module, all in a
 * scope their owner closes: `WorkerPool.layerTools`'s, a face's (its door's `prepare`), or one call's
 * (`ToolWorkers`'s default). Loaded on first use: a process without worker tools never loads it.
 */
import { Effect, Scope } from "effect"
import { availableParallelism } from "node:os"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import { type JobError, make, type ModuleNotFound, type Options, WorkerCrashed, type WorkerPool } from "./pool.js"
import { modulesOf, type ToolWorkersService } from "./types.js"

/** Each pool's bounds (`WorkerPool.layerTools`'s options): `size`, and `make`'s `resourceLimits` and `maxOutputBytes`. */
export type PoolBounds = Pick<Options, "size" | "resourceLimits" | "maxOutputBytes">

/** A pool per module, each started once (on first use, or by `prepare`) in `scope`; closing `scope` stops them. */
export const makeToolWorkers = (scope: Scope.Scope, bounds: PoolBounds): ToolWorkersService => {
  const pools = new Map<string, Effect.Effect<WorkerPool, ModuleNotFound>>()
  const started = new Set<WorkerPool>()
  const pool = (module: URL): Effect.Effect<WorkerPool, ModuleNotFound> => {
    let starting = pools.get(module.href)
    if (starting === undefined) {
      starting = Effect.runSync(Effect.cached(make({
        module: toolWorkerEntry,
        size: bounds.size ?? Math.max(2, availableParallelism() - 1),
        resourceLimits: bounds.resourceLimits,
        maxOutputBytes: bounds.maxOutputBytes,
        workerData: { module: module.href }
      }).pipe(
        Effect.tap((pool) => Effect.sync(() => started.add(pool))),
        Scope.extend(scope)
      )))
      pools.set(module.href, starting)
    }
    return starting
  }
  const run = (tool: Tool.Any, input: unknown, info: ToolCallInfo): Effect.Effect<unknown, JobError | WorkerCrashed> =>
    Effect.flatMap(
      Effect.mapError(pool(tool.worker!), (missing) => new WorkerCrashed({ message: missing.message })),
      (pool) => pool.run(tool.name, { input, info: plainInfo(info) })
    )
  const prepare = (tools: Iterable<Tool.Any>): Effect.Effect<void, ModuleNotFound | JobError | WorkerCrashed> => {
    const modules = modulesOf(tools)
    if (modules.length === 0) return Effect.void
    // Each pool waits for its workers once; a later prepare of the same module is at once.
    return Effect.forEach(modules, (module) => Effect.flatMap(pool(module), (pool) => pool.ready), {
      concurrency: "unbounded",
      discard: true
    })
  }
  const threads = () => {
    let alive = 0
    for (const pool of started) alive += pool.threads()
    return alive
  }
  return { run, prepare, threads }
}

/**
 * A call's own pool (`ToolWorkers`'s default, when nothing provides one): one worker for `tool`'s
 * module, started for the call and stopped when it ends, its deadline included.
 */
export const runOnOwnWorker = (tool: Tool.Any, input: unknown, info: ToolCallInfo): Effect.Effect<unknown, JobError | WorkerCrashed> =>
  Effect.scoped(Effect.flatMap(Effect.scope, (scope) => makeToolWorkers(scope, { size: 1 }).run(tool, input, info)))

// The call's context as data that crosses threads.
const plainInfo = (info: ToolCallInfo): ToolCallInfo => ({
  taskId: info.taskId,
  toolCallId: info.toolCallId,
  attempt: info.attempt,
  deadlineAt: info.deadlineAt,
  expiringThresholdMillis: info.expiringThresholdMillis
})

/** The workers' entry module: loads a tools module and runs its tools' bodies. */
const toolWorkerEntry = new URL(import.meta.url.endsWith(".ts") ? "./toolWorker.ts" : "./toolWorker.js", import.meta.url)
