/**
 * What the commands load when they run, not when the CLI starts (`src/main.ts`): modules imported in
 * parallel, the demo's tools and backend, a model's layer. Imports Effect module by module, as
 * main.ts does (start-up time).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** Modules imported when a command runs, not when the CLI starts; in parallel. */
export const load = <const M extends ReadonlyArray<() => Promise<unknown>>>(
  ...imports: M
): Effect.Effect<{ -readonly [K in keyof M]: Awaited<ReturnType<M[K]>> }> =>
  Effect.promise(() => Promise.all(imports.map((f) => f())) as Promise<any>)

/** The demo's tools and their backend: its services and its worker threads (started only when a report is digested). */
export const loadDemo = Effect.gen(function*() {
  const [Backend, DemoTools, Toolkit] = yield* load(
    () => import("../../demo/Backend.js"),
    () => import("../../demo/tools.js"),
    () => import("../../Toolkit.js")
  )
  return {
    Backend,
    DemoTools,
    toolkit: yield* Toolkit.make(...DemoTools.all),
    backendLayer: Layer.merge(Backend.layer, Backend.layerReports)
  }
})

/** The `LanguageModel` layer for a model string (the demo's script for `scripted`). */
export const loadModel = (model: string) =>
  Effect.map(
    load(() => import("../../Model.js"), () => import("../../demo/script.js")),
    ([Model, Demo]) => Model.layer(model, { script: Demo.script })
  )
