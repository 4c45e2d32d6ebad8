/** How late the event loop runs a timer while something else works: the measure of "the loop is never blocked". */
import { Effect } from "effect"

/**
 * `effect`'s value, and the lateness (ms) of each tick of a 10 ms interval timer while it ran; a tick
 * the run held back past its end counts too.
 */
export const timerDelays = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const delays: Array<number> = []
      let last = performance.now()
      const timer = setInterval(() => {
        const now = performance.now()
        delays.push(now - last - 10)
        last = now
      }, 10)
      const late = () => delays.push(performance.now() - last - 10)
      return { delays, late, timer }
    }),
    ({ delays, late }) => Effect.map(effect, (value) => (late(), { value, delays })),
    ({ timer }) => Effect.sync(() => clearInterval(timer))
  )
