/**
 * Type tests, compiled by `npm run check` (never run): layers are typed as what they provide, and a
 * hook's services are its layer's requirements, so a program that lacks them does not compile.
 */
import { Context, Effect, Layer, Schedule } from "effect"
import { Hooks, Timing } from "../../src/index.js"

/** True when `A` and `B` are the same type (not merely assignable one to the other). */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
const expect = <T extends true>(): T => true as T

class Audit extends Context.Tag("types/Audit")<Audit, { readonly record: (line: string) => Effect.Effect<void> }>() {}

const timing = Timing.layer({ toolRetry: Schedule.recurs(1) })
expect<Equals<typeof timing, Layer.Layer<Timing.Timing>>>()

// No hook needs anything: the layer needs nothing.
const plain = Hooks.layer({ tool: [Hooks.logging, (_call, proceed) => proceed], turn: [(turn, proceed) => proceed(turn)] })
expect<Equals<typeof plain, Layer.Layer<Hooks.Hooks>>>()

// A hook that needs Audit, written inline: the layer needs Audit.
const audited = Hooks.layer({
  tool: [Hooks.approval, (call, proceed) => Effect.zipRight(Effect.flatMap(Audit, (audit) => audit.record(call.tool.name)), proceed)]
})
expect<Equals<typeof audited, Layer.Layer<Hooks.Hooks, never, Audit>>>()

// A turn hook's services too, beside a tool hook's.
declare const turnAudited: Hooks.TurnHook<Audit>
declare const toolNeedsTiming: Hooks.ToolHook<Timing.Timing>
const both = Hooks.layer({ tool: [toolNeedsTiming], turn: [turnAudited] })
expect<Equals<typeof both, Layer.Layer<Hooks.Hooks, never, Audit | Timing.Timing>>>()

const program = Effect.void
const auditLayer = Layer.succeed(Audit, { record: () => Effect.void })

// Given Audit, it runs; without, it does not compile.
const needsNothing = (effect: Effect.Effect<void>) => effect
export const runs = needsNothing(program.pipe(Effect.provide(audited.pipe(Layer.provide(auditLayer)))))
export const missing = needsNothing(
  // @effect-diagnostics-next-line missingEffectContext:off
  // @ts-expect-error Audit is missing: the hook's layer needs it
  program.pipe(Effect.provide(audited))
)
