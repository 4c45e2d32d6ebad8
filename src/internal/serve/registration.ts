/**
 * A serving process's standing with the platform (design: Serving, Interruption and shutdown): the
 * registration and its republishing, the heartbeat, the deregistration at the end, the shutdown report
 * and the warning about a memory-only store.
 */
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Option, Ref, Schedule, Stream, SubscriptionRef } from "effect"
import { createHash } from "node:crypto"
import * as Json from "../util/json.js"
import { type Caller, type PlatformClient, PlatformUnavailable } from "../../PlatformClient.js"
import * as Timing from "../../Timing.js"
import * as Toolkit from "../../Toolkit.js"
import type { ServeError } from "./errors.js"

/**
 * `effect` within `limit`, from a finalizer: in a fiber of its own, since the closing fiber may be
 * interrupted already (an interruptible region there would end at once), and interruptible in it, so
 * that the limit can stop it.
 */
export const boundedInFinalizer = <A, E>(
  effect: Effect.Effect<A, E>,
  limit: Duration.DurationInput
): Effect.Effect<Exit.Exit<A, E | Cause.TimeoutException>> =>
  Effect.flatMap(Effect.forkDaemon(Effect.interruptible(Effect.timeout(effect, limit))), Fiber.await)

/**
 * Why the deregistration did not happen, for its warning. It runs in a fiber of its own, bounded by a
 * timeout: interrupted, it was the client, closed in this process before Serve (its scope ended first),
 * which ends its calls so; a platform that is gone fails them with `PlatformUnavailable` instead.
 */
export const deregistrationFailed = (agentId: string, cause: Cause.Cause<unknown>): string => {
  if (Cause.isInterruptedOnly(cause)) {
    return `agent ${agentId}: not deregistered: this process had closed its PlatformClient (its scope ended ` +
      `before Serve's), so the deregistration was never sent; the platform lists this process's tools until ` +
      `it misses 3 heartbeats. Provide the client outside Serve's scope: ` +
      `Serve.layerConfig(toolkit).pipe(Layer.provide(PlatformClient.layer)), or ` +
      `Effect.scoped(program).pipe(Effect.provide(PlatformClient.layer)), not Effect.scoped outermost`
  }
  const error = Cause.squash(cause)
  if (error instanceof PlatformUnavailable) {
    return `agent ${agentId}: deregistration failed: the platform is gone (${error.message})`
  }
  return `agent ${agentId}: deregistration failed: ${String(error)}`
}

/** The manifest's hash: SHA-256 of its canonical JSON. */
export const manifestHash = (toolkit: Toolkit.Toolkit<any>): string =>
  createHash("sha256").update(Json.canonical(toolkit.manifest)).digest("hex")


// ---------------------------------------------------------------------------------------------
// The parts of a serving process, in the order `make` builds them. A scope runs its finalizers
// last-added first, so they stop in the reverse order (design: Interruption and shutdown): the drain
// first, then the re-attached followers, the answers' sender, the heartbeat, the deregistration and,
// last, the shutdown report.

// --- The store's warning ---

/**
 * Said once, when nobody chose the memory store and some tools are idempotent: a restart is when it
 * matters, and then it is too late.
 */
export const warnIfMemoryOnly = (agentId: string, toolkit: Toolkit.Toolkit<any>, byDefault: boolean): Effect.Effect<void> => {
  const idempotentTools = toolkit.tools.filter((tool) => tool.idempotent).map((tool) => tool.name)
  if (!byDefault || idempotentTools.length === 0) return Effect.void
  return Effect.logWarning(
    `agent ${agentId}: the idempotent tools ${idempotentTools.join(", ")} are deduplicated in memory only: ` +
      `a restarted process forgets their claims and may run a call again; set IDEMPOTENCY_DB=path.sqlite ` +
      `(or a postgres:// URL, shared by the replicas; or provide Idempotency.layerSql) to keep them`
  )
}

// --- Registration ---

/** The toolkit published now and its manifest's hash. */
export interface Published {
  readonly toolkit: Toolkit.Toolkit<any>
  readonly hash: string
}

/**
 * Registration (design: Serving): the toolkit published now, registered once before anything else
 * is set up (a refusal, as a bad token, a rejected manifest or the lifecycle budget, fails `make`
 * with nothing to undo); `register` tells the platform again (the heartbeat's republish), `republish`
 * swaps the toolkit first. Each answer's heartbeat interval is kept (`interval`): the latest answer
 * wins, so a platform that restarted with another interval is followed; each accepted registration is
 * logged at info (the tools, the process, the heartbeat it keeps). It holds no fiber: its end is
 * the deregistration's, which is armed before the first call goes out: interrupted while that call is
 * in flight, the platform may have recorded it, so the process deregisters (`sent` stays true);
 * refused or unsent, it does not.
 */
export const makeRegistration = (
  client: PlatformClient["Type"],
  caller: Caller,
  toolkit: Toolkit.Toolkit<any>,
  sent: Ref.Ref<boolean>,
  local: Schedule.Schedule<unknown, unknown>
) =>
  Effect.gen(function*() {
    const current = yield* Ref.make<Published>({ toolkit, hash: manifestHash(toolkit) })
    const interval = yield* SubscriptionRef.make<number | undefined>(undefined)
    const register = Effect.flatMap(Ref.get(current), ({ hash, toolkit }) =>
      client.register({ ...caller, manifest: toolkit.manifest, manifestHash: hash }).pipe(
        Effect.flatMap(({ heartbeatIntervalMillis }) =>
          Effect.zipRight(
            SubscriptionRef.set(interval, heartbeatIntervalMillis),
            // Said once the platform has accepted the tools, never before.
            Effect.logInfo(
              `agent ${caller.agentId}: registered ${toolkit.tools.length} tool(s) ` +
                `(${toolkit.tools.map((tool) => tool.name).join(", ")}) as ${caller.processId}; ` +
                `heartbeat ${Timing.heartbeatText(local, heartbeatIntervalMillis)}`
            )
          )
        )
      )).pipe(
        Effect.withSpan("Serve.register", { attributes: { agentId: caller.agentId }, captureStackTrace: false })
      )
    yield* Effect.zipRight(Ref.set(sent, true), register).pipe(Effect.tapError(() => Ref.set(sent, false)))
    return {
      current: Ref.get(current),
      /** The heartbeat interval the platform said at the last registration, in milliseconds (none: it did not say). */
      interval,
      register,
      republish: (next: Toolkit.Toolkit<any>) =>
        Effect.zipRight(Ref.set(current, { toolkit: next, hash: manifestHash(next) }), register)
    }
  })

export type Registration = Effect.Effect.Success<ReturnType<typeof makeRegistration>>

// --- Shutdown report ---

/** What shutdown did. */
export interface Stopped {
  readonly drained: number
  readonly interrupted: number
  readonly notStarted: number
}

/**
 * The shutdown report (design: Interruption and shutdown): what shutdown did, counted by the drain
 * and the deliveries, said when everything else has stopped, so that deliveries arriving during the
 * deregistration are counted too. Its finalizer is the first `make` adds: it runs last.
 */
export const shutdownReport = (agentId: string) =>
  Effect.gen(function*() {
    const report = yield* Ref.make<Stopped>({ drained: 0, interrupted: 0, notStarted: 0 })
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Ref.get(report), ({ drained, interrupted, notStarted }) => {
        const line = `agent ${agentId}: stopping: ${drained} call(s) drained, ${interrupted} interrupted, ` +
          `${notStarted} delivery(ies) not started (delivered again after a re-attach)`
        return drained + interrupted + notStarted > 0 ? Effect.logInfo(line) : Effect.logDebug(line)
      })
    )
    return report
  })

// --- Deregistration ---

/**
 * The deregistration (design: Interruption and shutdown): the last call to the platform, after the
 * drain, the last answers and the heartbeat, made when the registration was `sent` (not refused).
 * Best effort, bounded: a platform already gone (a closed connection), or a client closed before
 * Serve's scope (an in-process platform's too), neither fails nor interrupts the scope that is
 * closing; the warning says which it was (`deregistrationFailed`).
 */
export const deregisterOnClose = (client: PlatformClient["Type"], caller: Caller) =>
  Effect.flatMap(Ref.make(false), (sent) =>
    Effect.as(
      Effect.addFinalizer(() =>
        Effect.flatMap(Ref.get(sent), (sent) =>
          sent
            ? boundedInFinalizer(client.deregister(caller), "5 seconds").pipe(
              Effect.flatMap((exit) =>
                Exit.isSuccess(exit)
                  ? Effect.logDebug(`agent ${caller.agentId}: deregistered`)
                  : Effect.logWarning(deregistrationFailed(caller.agentId, exit.cause))
              )
            )
            : Effect.void)
      ),
      sent
    ))

// --- Heartbeat ---

/**
 * The heartbeat (design: Serving): a fiber beating on the interval the platform said at the last
 * registration (`Timing.heartbeatFor`; `Timing.heartbeat` when it said none). A registration that
 * says another interval (a re-registration after the platform restarted, a republish) ends the wait
 * on the old one and the beats go on at the new one. The platform not knowing the manifest
 * republishes it; 3 failures in a row fail serving (the returned `failed`), a success resets the
 * count. It keeps beating through the drain, and stops before the deregistration, so that no beat
 * registers the process again after it.
 */
export const heartbeat = (
  client: PlatformClient["Type"],
  caller: Caller,
  registration: Registration,
  local: Schedule.Schedule<unknown, unknown>
) =>
  Effect.gen(function*() {
    const failed = yield* Deferred.make<never, ServeError>()
    const failures = yield* Ref.make(0)
    const beat = registration.current.pipe(
      Effect.flatMap(({ hash }) => client.heartbeat({ ...caller, manifestHash: hash })),
      Effect.flatMap(({ known }) => known ? Effect.void : registration.register),
      Effect.tap(() => Effect.logDebug(`agent ${caller.agentId}: heartbeat`)),
      Effect.matchEffect({
        onSuccess: () => Ref.set(failures, 0),
        onFailure: (error) =>
          Effect.flatMap(Ref.updateAndGet(failures, (n) => n + 1), (inARow) =>
            inARow >= 3
              ? Deferred.fail(failed, error)
              : Effect.logWarning(`agent ${caller.agentId}: heartbeat failed (${inARow} in a row): ${error.message}`))
      })
    )
    /** Completes when the platform says an interval other than `said`. */
    const changedFrom = (said: number | undefined) =>
      registration.interval.changes.pipe(Stream.filter((now) => now !== said), Stream.runHead)
    const beats = Effect.gen(function*() {
      let said = yield* SubscriptionRef.get(registration.interval)
      let driver = yield* Schedule.driver(Timing.heartbeatFor(local, said))
      while (true) {
        // The wait alone races a change: a beat (and the registration it may make) is never cut short.
        const due = yield* Effect.option(
          Effect.raceFirst(Effect.as(driver.next(undefined), true), Effect.as(changedFrom(said), false))
        )
        // The schedule ended (a local one with an end): no more beats, as with `Effect.schedule`.
        if (Option.isNone(due)) return
        if (due.value) yield* beat
        const now = yield* SubscriptionRef.get(registration.interval)
        if (now !== said) {
          said = now
          driver = yield* Schedule.driver(Timing.heartbeatFor(local, said))
        }
      }
    })
    yield* Effect.forkScoped(beats)
    return failed
  })
