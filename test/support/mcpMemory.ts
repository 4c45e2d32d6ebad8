/** Memory figures for the MCP limit tests: heap, buffers and RSS after a full collection, in MB. */
import { Effect } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

// Vitest's workers run without --expose-gc: turning the flag on at run time exposes `gc` to new contexts.
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

const mb = (bytes: number) => bytes / (1024 * 1024)

const aMoment = () => new Promise<void>((resolve) => setTimeout(resolve, 50))

/**
 * Heap used, memory held outside the heap (buffers: `external`) and RSS, in MB, after a full collection. V8 gives
 * a collected buffer's memory back after the collection, on a later turn of the loop: the figures are read after
 * a second collection a moment later. What the process holds is `heap + external`; RSS also counts the pages the
 * allocator keeps after they were given back.
 */
export const memoryAfterGc: Effect.Effect<{ readonly heap: number; readonly external: number; readonly rss: number }> =
  Effect.promise(async () => {
    gc()
    await aMoment()
    gc()
    await aMoment()
    const usage = process.memoryUsage()
    return { heap: mb(usage.heapUsed), external: mb(usage.external), rss: mb(usage.rss) }
  })
