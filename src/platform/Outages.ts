/**
 * What an outage is (design: Cluster mode): a defect that says the platform cannot do it now, not that it never
 * can. The protocol's handlers answer such a failure `PlatformBusy` (Handlers.ts), the operator API 503
 * (api/OperatorRoutes.ts); their clients try again.
 */
import { Effect } from "effect"

/**
 * The defects that are an outage, not a bug: the database away (`SqlError`, the journal's `JournalUnavailable`), the
 * cluster's engine that could not take a message (its storage, a full mailbox), an owner that stopped before it
 * answered.
 */
const outages = new Set([
  "SqlError",
  "JournalUnavailable",
  "PersistenceError",
  "MailboxFull",
  "AlreadyProcessingMessage",
  "EngineStopped"
])

/** The reason of `defect` if it is an outage, else undefined. */
export const outageReason = (defect: unknown): string | undefined => {
  const tag = typeof defect === "object" && defect !== null ? (defect as { readonly _tag?: unknown })._tag : undefined
  if (typeof tag !== "string" || !outages.has(tag)) return undefined
  return defect instanceof Error ? defect.message : tag
}

/**
 * `effect` with a defect that is an outage failing with `busy(reason)` instead (logged as a warning of `operation`,
 * its client told to try again); any other defect stays one.
 */
export const failOnOutage = <B>(operation: string, busy: (reason: string) => B) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | B, R> =>
  Effect.catchAllDefect(effect, (defect) => {
    const reason = outageReason(defect)
    if (reason === undefined) return Effect.die(defect)
    return Effect.zipRight(
      Effect.logWarning(`${operation}: ${reason}; its client is told to try again`),
      Effect.fail(busy(reason))
    )
  })
