/** Memory figures for the MCP limit tests: heap and RSS after a full collection, in MB. */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

// Vitest's workers run without --expose-gc: turning the flag on at run time exposes `gc` to new contexts.
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

/** Heap used and RSS, in MB, after a full garbage collection. */
export const memoryAfterGc = (): { readonly heap: number; readonly rss: number } => {
  gc()
  const usage = process.memoryUsage()
  return { heap: usage.heapUsed / (1024 * 1024), rss: usage.rss / (1024 * 1024) }
}
