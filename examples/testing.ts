// @effect-diagnostics missingEffectContext:off
/** Testing a tool's logic without the platform or an agent: `Tool.test` runs its body on an input. */
// #region gate
import { Clock, Effect, Option, Schema } from "effect"
import { Tool, ToolContext } from "../src/index.js"

export const closeSecurityGate = Tool.make("close_security_gate", {
  description: "Close the security gate gate_id.",
  input: { gate_id: Schema.String },
  output: Schema.Literal("closed", "deferred"),
  timeout: "30 seconds"
}, ({ gate_id }) =>
  Effect.gen(function*() {
    // Outside a call there is no context: `current` is an Option, read safely. The time is the Clock's,
    // so a test's TestClock drives it.
    const context = yield* ToolContext.current
    const now = yield* Clock.currentTimeMillis
    if (Option.isSome(context) && context.value.deadlineAt - now < 5_000) return "deferred" as const
    yield* Effect.log(`closing ${gate_id}`)
    return "closed" as const
  }))

// In a unit test: the body alone, no pipeline, no platform, no ToolContext.
export const closed = Tool.test(closeSecurityGate, { gate_id: "g-7" }) // Effect<"closed" | "deferred">

// A context of your own, for the paths that read it: a deadline two seconds away on the fiber's clock.
export const deferred = Effect.gen(function*() {
  const now = yield* Clock.currentTimeMillis
  const call = yield* ToolContext.makeCallEffect({ taskId: "task-1", toolCallId: "call-1", deadlineAt: now + 2_000 })
  return yield* Tool.test(closeSecurityGate, { gate_id: "g-7" }, call)
})
// #endregion

// #region unchecked
// A body that reads the context without checking needs the ToolContext service: its type says so.
export const closeUnchecked = Tool.make("close_gate_unchecked", {
  description: "Close a gate, reading the call's deadline.",
  input: { gate_id: Schema.String },
  timeout: "30 seconds"
}, () => Effect.map(ToolContext.isExpiring, (expiring) => expiring ? "deferred" : "closed"))

// @ts-expect-error: ToolContext is missing outside a call, so this does not compile
export const doesNotCompile = () => Effect.runPromise(Tool.test(closeUnchecked, { gate_id: "g-7" }))
// Given a context, it runs:
export const compiles = () => Effect.runPromise(Tool.test(closeUnchecked, { gate_id: "g-7" }, ToolContext.makeCall()))
// #endregion
