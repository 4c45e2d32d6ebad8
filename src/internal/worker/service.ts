/**
 * The service the pipeline asks to run a body on a worker thread (design: Worker threads), apart
 * from the pools themselves (`WorkerPool.ts`), so that running a call loads nothing of
 * `@effect/platform` until a tool made with `worker` is first called or prepared.
 */
import { Context, Effect } from "effect"
import type { ToolWorkersService } from "./types.js"

/**
 * The worker pools of tools made with `worker: import.meta.url`, one pool per module: the pipeline
 * runs such a tool's body here instead of on the event loop. The default is the process's pools,
 * each started when first prepared or called, with threads that do not keep the process alive;
 * `WorkerPool.layerTools` gives pools of a layer's lifetime, started when it is built.
 */
export class ToolWorkers extends Context.Reference<ToolWorkers>()("agent-tools/WorkerPool/ToolWorkers", {
  defaultValue: (): ToolWorkersService => ({
    run: (tool, input, info) => Effect.flatMap(processWide, (workers) => workers.run(tool, input, info)),
    // `prepareWorkers` asks only for lists with worker tools: the pools are loaded then.
    prepare: (tools) => Effect.flatMap(processWide, (workers) => workers.prepare(tools))
  })
}) {}

// Loaded on first use only.
const processWide = Effect.promise(() => import("./pools.js")).pipe(Effect.map((module) => module.processWorkers()))

