/**
 * A tool hook that redacts a field, one that logs timeouts by their kind, one that approves, a turn hook, and the
 * hooks installed; a hook that needs a service, and its layer given it.
 */
// #region hooks
import { Context, Effect, Layer } from "effect"
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

// #region services
// A hook may need services: its type says which, and its layer needs them (Layer<Hooks.Hooks, never, AuditLog>).
export class AuditLog extends Context.Tag("AuditLog")<AuditLog, { readonly record: (line: string) => Effect.Effect<void> }>() {}

export const audited: Hooks.ToolHook<AuditLog> = (call, proceed) =>
  Effect.flatMap(AuditLog, (audit) => Effect.zipRight(audit.record(`${call.tool.name} ${JSON.stringify(call.input)}`), proceed))

export const auditToLogs = Layer.succeed(AuditLog, { record: (line) => Effect.logInfo(`audit: ${line}`) })

// Built, the layer lends the hooks what it was given (to the hooks, not to the tools they wrap); what runs the
// hooks needs nothing. Provided without an AuditLog, a program does not compile.
export const auditing = Hooks.layer({ tool: [audited, Hooks.approval] }).pipe(Layer.provide(auditToLogs))
// program.pipe(Effect.provide(auditing))
// #endregion
