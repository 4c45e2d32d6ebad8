/**
 * Hooks (design: Hooks): what wraps every call, or changes the agent's own state, is a hook, not a tool. A
 * tool hook wraps each call that goes through `Invocation` (agent runs, served calls and MCP alike);
 * a turn hook wraps each model turn of the agent loop. Provided as a Layer; they compose in order
 * (the first is outermost). A hook that fails gives the call a `HookFailed` result. Approvals fail
 * closed: a call of a tool with `needsApproval` runs only once approved, by the journal, the platform, or
 * a hook that proceeds through `approved` (as `approval` does on a yes); else it is refused unrun.
 */
import { Layer } from "effect"
import { type ToolHook, ToolHooks } from "./internal/hooks/tool.js"
import { type TurnHook, TurnHooks } from "./internal/hooks/turn.js"

export { approval, callBudget, logging } from "./internal/hooks/shipped.js"
export { approved, RunState, type ToolCall, type ToolHook } from "./internal/hooks/tool.js"
export type { Turn, TurnHook } from "./internal/hooks/turn.js"

/** Installs hooks, in order: the first wraps the others. Hooks of a kind not given are none. */
export const layer = (
  hooks: { readonly tool?: ReadonlyArray<ToolHook>; readonly turn?: ReadonlyArray<TurnHook> }
): Layer.Layer<never> =>
  Layer.merge(
    Layer.succeed(ToolHooks, hooks.tool ?? []),
    Layer.succeed(TurnHooks, hooks.turn ?? [])
  ) as Layer.Layer<never>
