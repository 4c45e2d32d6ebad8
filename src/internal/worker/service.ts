/**
 * The service the pipeline asks to run a body on a worker thread (design: Worker threads), apart
 * from the pools themselves (`WorkerPool.ts`), so that running a call loads nothing of
 * `@effect/platform` until a tool made with `worker` is first called or prepared.
 */
import { Context, Effect } from "effect"
import type { ToolWorkersService } from "./types.js"

/** Loaded on first use only. */
export const loadPools = Effect.promise(() => import("./pools.js"))

/**
 * `ToolWorkers` when nothing provides it: no pools kept, nothing kept for the process. A call runs
 * on a worker of its own, started for it and stopped when it ends; a face's door makes pools of its
 * own scope instead (its `prepare`), so that its calls do not pay for a worker's start.
 */
export const unprovided: ToolWorkersService = {
  run: (tool, input, info) => Effect.flatMap(loadPools, (pools) => pools.runOnOwnWorker(tool, input, info)),
  // Nothing would keep what it started: the door makes pools in its scope instead (`prepare.ts`).
  prepare: () => Effect.void,
  threads: () => 0
}

/**
 * The worker pools of tools made with `worker: import.meta.url`, one pool per module: the pipeline
 * runs such a tool's body here instead of on the event loop. `WorkerPool.layerTools` gives pools of
 * a layer's lifetime, started when it is built. Not provided: a face's calls run on pools of the
 * face's scope (an agent run's, a `Serve`'s, an MCP server's), started before its first call; a
 * call outside any face (`Invocation.run`) on a worker of its own.
 */
export class ToolWorkers extends Context.Reference<ToolWorkers>()("agent-tools/WorkerPool/ToolWorkers", {
  defaultValue: (): ToolWorkersService => unprovided
}) {}
