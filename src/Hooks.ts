/**
 * Hooks (design: Hooks): what wraps every call, or changes the agent's own state, is a hook, not a tool. A
 * tool hook wraps each call that goes through `Invocation` (agent runs, served calls and MCP alike);
 * a turn hook wraps each model turn of the agent loop. Provided as a Layer; they compose in order
 * (the first is outermost). A hook that fails gives the call a `HookFailed` result. Approvals fail
 * closed: a call of a tool with `needsApproval` runs only once approved, by the journal, the platform, or
 * a hook that proceeds through `approved` (as `approval` does on a yes); else it is refused unrun.
 * A hook may need services: the layer needs them, and gives them to the hook from where it is built.
 */
import { Context, Effect, Layer } from "effect"
import { provideToolHook, provideTurnHook } from "./internal/hooks/services.js"
import { type ToolHook, ToolHooks } from "./internal/hooks/tool.js"
import { type TurnHook, TurnHooks } from "./internal/hooks/turn.js"

export { approval, callBudget, logging } from "./internal/hooks/shipped.js"
export { approved, RunState, type ToolCall, type ToolHook } from "./internal/hooks/tool.js"
export type { Turn, TurnHook } from "./internal/hooks/turn.js"

/**
 * What `layer` provides: the tool hooks and the turn hooks in force. Both are `Context.Reference`s
 * with none as their default, so nothing ever requires them.
 */
export type Hooks = ToolHooks | TurnHooks

/**
 * The services a hook (a `ToolHook<R>` or a `TurnHook<R>`) needs: its `R`. None for `any` (a kind of
 * hook not given to `layer` is inferred as its constraint, which needs nothing).
 */
export type Requirements<H> = H extends (...args: ReadonlyArray<any>) => Effect.Effect<any, any, infer R>
  ? 0 extends 1 & R ? never : R
  : never

/**
 * Installs hooks, in order: the first wraps the others. Hooks of a kind not given are none. The layer
 * needs what the hooks need (`Layer.provide` it, or provide it where those services are): it captures
 * its context when built, and each hook's effect gets the services of it that the call's own context
 * lacks (the call's win); what a hook wraps (`proceed`) runs in the call's context alone. Each hook's
 * type is inferred from it, an inline one's too (so the type parameters have no defaults: a default
 * would be an inline hook's contextual type).
 */
export const layer = <Tools extends ToolHook<any>, Turns extends TurnHook<any>>(
  hooks: { readonly tool?: ReadonlyArray<Tools>; readonly turn?: ReadonlyArray<Turns> }
): Layer.Layer<Hooks, never, Requirements<Tools> | Requirements<Turns>> =>
  Layer.effectContext(
    Effect.map(Effect.context<Requirements<Tools> | Requirements<Turns>>(), (captured) =>
      Context.make(ToolHooks, (hooks.tool ?? []).map((hook) => provideToolHook(hook, captured))).pipe(
        Context.add(TurnHooks, (hooks.turn ?? []).map((hook) => provideTurnHook(hook, captured)))
      ))
  )
