/**
 * Hooks that need services (design: Hooks): `Hooks.layer` captures the context it is built in and
 * gives each hook's effect the services of it that the call's own context lacks; what the hook wraps
 * (`proceed`: the call, or the model turn) runs without them, as it would with no hook. So the
 * places that run hooks (the call pipeline, the agent loop) stay as they are: every hook in
 * `ToolHooks` and `TurnHooks` needs nothing.
 */
import { Context, Effect } from "effect"
import type { ToolHook } from "./tool.js"
import type { TurnHook } from "./turn.js"

/** The services of `captured` that `current` lacks; undefined when it lacks none (the usual case). */
const lacking = (captured: Context.Context<never>, current: Context.Context<never>): Map<string, unknown> | undefined => {
  let extra: Map<string, unknown> | undefined
  for (const [key, service] of captured.unsafeMap) {
    if (!current.unsafeMap.has(key)) (extra ??= new Map()).set(key, service)
  }
  return extra
}

/** `effect` in its context with `extra` added (its own services win: `extra` holds none of them). */
const adding = <A, E, R>(extra: Map<string, unknown>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, never> =>
  Effect.mapInputContext(effect, (context: Context.Context<never>) => Context.merge(context, Context.unsafeMake(extra)))

/**
 * `effect` in its context without `extra` (the services a hook was lent): what the hook wraps sees the
 * call's context, with whatever the hook provided it, never the layer's services.
 */
const without = <A, E>(extra: Map<string, unknown>, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.mapInputContext(effect, (context: Context.Context<never>) => {
    const kept = new Map(context.unsafeMap)
    for (const [key, service] of extra) if (kept.get(key) === service) kept.delete(key)
    return Context.unsafeMake<never>(kept)
  })

/**
 * Runs `run(restore)` (the hook's effect, given a `restore` for what it wraps) with the services of
 * `captured` the fiber's context lacks; straight on when it lacks none.
 */
const lending = <A, E>(
  captured: Context.Context<never>,
  run: (restore: <B, F>(inner: Effect.Effect<B, F>) => Effect.Effect<B, F>) => Effect.Effect<A, E, unknown>
): Effect.Effect<A, E> =>
  Effect.contextWithEffect((current: Context.Context<never>) => {
    const extra = lacking(captured, current)
    if (extra === undefined) return run((inner) => inner) as Effect.Effect<A, E>
    return adding(extra, run((inner) => without(extra, inner)))
  })

/** `hook`, given the services of `captured` it needs (`Hooks.layer`). */
export const provideToolHook = <R>(hook: ToolHook<R>, captured: Context.Context<R>): ToolHook => {
  const services = captured as Context.Context<never>
  if (services.unsafeMap.size === 0) return hook as ToolHook
  return (call, proceed) => lending(services, (restore) => hook(call, restore(proceed)))
}

/** `hook`, given the services of `captured` it needs (`Hooks.layer`). */
export const provideTurnHook = <R>(hook: TurnHook<R>, captured: Context.Context<R>): TurnHook => {
  const services = captured as Context.Context<never>
  if (services.unsafeMap.size === 0) return hook as TurnHook
  return (turn, proceed) => lending(services, (restore) => hook(turn, (adjusted) => restore(proceed(adjusted))))
}
