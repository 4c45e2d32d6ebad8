/** What the pools of tools made with `worker` offer, and which modules a list of tools needs (design: Worker threads). */
import type { Effect } from "effect"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import type { JobError, ModuleNotFound, WorkerCrashed } from "./pool.js"

/** What `ToolWorkers` does: runs a tool's body in its module's pool. */
export interface ToolWorkersService {
  readonly run: (tool: Tool.Any, input: unknown, info: ToolCallInfo) => Effect.Effect<unknown, JobError | WorkerCrashed>
  /**
   * Starts the pools of `tools` (those made with `worker`) that are not started yet and waits until
   * their workers have loaded their modules: what the faces do before their first call (an agent
   * run when it opens, `Serve` before it registers, `Mcp` before it answers), so no call's deadline
   * pays for a worker's start. Tools without `worker`: nothing to do, at once.
   */
  readonly prepare: (tools: Iterable<Tool.Any>) => Effect.Effect<void, ModuleNotFound | JobError | WorkerCrashed>
  /** The worker threads of its pools alive now: none once their scope has closed (a call's own pool is the call's). */
  readonly threads: () => number
}

const modulesCache = new WeakMap<Iterable<Tool.Any>, ReadonlyArray<URL>>()
/** The distinct modules of the tools that run on workers, worked out once per list (a toolkit's, an agent's). */
export const modulesOf = (tools: Iterable<Tool.Any>): ReadonlyArray<URL> => {
  let cached = modulesCache.get(tools)
  if (cached === undefined) {
    const modules = new Map<string, URL>()
    for (const tool of tools) if (tool.worker !== undefined) modules.set(tool.worker.href, tool.worker)
    cached = [...modules.values()]
    modulesCache.set(tools, cached)
  }
  return cached
}
