/** Whether an object is gone: full collections, once pending callbacks have run, then its WeakRef read. */
import { Effect } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

// Vitest's workers run without --expose-gc: turning the flag on at run time exposes `gc` to new contexts.
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

/** True once `ref`'s target has been collected: a few full collections, each after a turn of the event loop. */
export const collected = (ref: WeakRef<object>): Effect.Effect<boolean> =>
  Effect.promise(async () => {
    for (let i = 0; i < 4; i++) {
      // A WeakRef's target read in this turn is kept until its end: collect in the next one.
      await new Promise((resolve) => setImmediate(resolve))
      gc()
      if (ref.deref() === undefined) return true
    }
    return false
  })
