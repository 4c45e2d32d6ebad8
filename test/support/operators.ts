/**
 * What the operator API's tests share: an operator token of each role (viewer, approver, admin, named vera, alice
 * and root), and a clock fixed at a time, under which the journal writes its times.
 */
import { Clock, Effect, Redacted } from "effect"
import type { PlatformServer } from "../../src/exports/platform.js"

export const viewer = "viewer-token-0123456789"
export const approver = "approver-token-0123456789"
export const admin = "admin-token-0123456789"
export const operatorTokens: ReadonlyArray<PlatformServer.OperatorToken> = [
  { token: Redacted.make(viewer), role: "viewer", name: "vera" },
  { token: Redacted.make(approver), role: "approver", name: "alice" },
  { token: Redacted.make(admin), role: "admin", name: "root" }
]

/** A clock that reads `millis`: the journal's times of what is written under it. */
export const clockAt = (millis: number): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => millis,
  currentTimeMillis: Effect.succeed(millis),
  unsafeCurrentTimeNanos: () => BigInt(millis) * 1_000_000n,
  currentTimeNanos: Effect.succeed(BigInt(millis) * 1_000_000n),
  sleep: () => Effect.void
})
