/** A tool hook that redacts a field, a turn hook that changes the instructions, and the hooks installed. */
// #region hooks
import { Effect } from "effect"
import { Hooks, ToolResult } from "../src/index.js"

// A tool hook wraps each call through Invocation: agent runs, served calls and MCP calls alike.
export const redact: Hooks.ToolHook = (call, proceed) => // call: { tool, input (decoded), context, attempts() }
  Effect.map(proceed, (result) =>
    typeof result.value === "object" && result.value !== null && "ssn" in result.value
      ? new ToolResult.ToolResult({ ...result.value, ssn: "***" }, undefined)
      : result)
// Deny: return ToolResult.failure("reason") without running `proceed`; retry: run `proceed` again.

// A turn hook wraps each model turn: other instructions, fewer tools, and it sees the turn.
export const brief: Hooks.TurnHook = (turn, proceed) =>
  proceed({ ...turn, instructions: `${turn.instructions} Be brief.` })

// Provided like any layer; the first hook wraps the others.
export const hooks = Hooks.layer({ tool: [Hooks.logging, Hooks.approval, Hooks.callBudget(5), redact], turn: [brief] })
// #endregion
