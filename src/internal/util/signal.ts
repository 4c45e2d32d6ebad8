/**
 * A one-shot outcome that fibers can wait for: what `Deferred` does, for the hot paths (a
 * delivered call's answer, a dedupe entry, a run-cache entry). Effect 3.22's `Deferred.make`
 * builds its object by spreading a prototype, a slow path in V8 that costs ~10 us per Deferred on
 * Node 20 (more than the whole Invocation pipeline); this is a plain class.
 */
import { Effect, Exit } from "effect"

export class Signal<A, E = never> {
  private outcome: Exit.Exit<A, E> | undefined = undefined
  private waiters: Array<(exit: Exit.Exit<A, E>) => void> | undefined = undefined

  /** True once completed. */
  get isDone(): boolean {
    return this.outcome !== undefined
  }

  /** Completes it (the first completion counts); false if it was already done. */
  complete(exit: Exit.Exit<A, E>): boolean {
    if (this.outcome !== undefined) return false
    this.outcome = exit
    const waiters = this.waiters
    this.waiters = undefined
    if (waiters !== undefined) for (const waiter of waiters) waiter(exit)
    return true
  }

  succeed(value: A): boolean {
    return this.complete(Exit.succeed(value))
  }

  /** Waits for the outcome; interrupting the wait leaves the signal as it is. */
  readonly await: Effect.Effect<A, E> = Effect.suspend(() =>
    this.outcome ?? Effect.async<A, E>((resume) => {
      const waiter = (exit: Exit.Exit<A, E>) => resume(exit)
      ;(this.waiters ??= []).push(waiter)
      return Effect.sync(() => {
        const index = this.waiters?.indexOf(waiter) ?? -1
        if (index >= 0) this.waiters!.splice(index, 1)
      })
    })
  )
}
