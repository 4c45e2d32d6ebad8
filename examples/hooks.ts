/** A tool hook that redacts a field, one that logs timeouts by their kind, one that approves, a turn hook, and the hooks installed. */
// #region hooks
import { Effect } from "effect"
import { Hooks, ToolResult } from "../src/index.js"

// A tool hook wraps each call through Invocation: agent runs, served calls and MCP calls alike.
export const redact: Hooks.ToolHook = (call, proceed) => // call: { tool, input (decoded), context, attempts(), run }
  Effect.map(proceed, (result) =>
    typeof result.value === "object" && result.value !== null && "ssn" in result.value
      ? ToolResult.ToolResult.success({ ...result.value, ssn: "***" })
      : result)
// Deny: return ToolResult.ToolResult.failure("reason") without running `proceed`; retry: run `proceed` again.

// A failed result says what went wrong by kind (`failure._tag`) as well as in text (`error`).
export const slowCalls: Hooks.ToolHook = (call, proceed) =>
  Effect.tap(proceed, (result) =>
    result.failure?._tag === "TimedOut"
      ? Effect.logWarning(`${call.tool.name} timed out after ${result.failure.allowedMillis} ms`)
      : Effect.void)

// Approvals fail closed: a call of a tool with `needsApproval` runs only once approved. A hook gives
// the approval by running `proceed` through Hooks.approved (Hooks.approval does so on a person's yes).
export const smallRefunds: Hooks.ToolHook = (call, proceed) =>
  call.tool.name === "issue_refund" && (call.input as { readonly amount: number }).amount <= 10
    ? Hooks.approved(call, proceed) // a refund of 10 or less needs nobody
    : proceed                       // any other: Hooks.approval, further in, asks (or the call is refused)

// A turn hook wraps each model turn: other instructions, fewer tools, and it sees the turn.
export const brief: Hooks.TurnHook = (turn, proceed) =>
  proceed({ ...turn, instructions: `${turn.instructions} Be brief.` })

// Provided like any layer; the first hook wraps the others.
export const hooks = Hooks.layer({
  tool: [Hooks.logging, smallRefunds, Hooks.approval, Hooks.callBudget(5), slowCalls, redact],
  turn: [brief]
})
// #endregion
