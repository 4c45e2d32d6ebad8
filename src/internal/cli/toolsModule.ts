/**
 * `--tools ./my-tools.ts` (`serve`, `mcp`): the tools a module exports, loaded with `import()` (a `.ts`
 * file under tsx), its path relative to the working directory. Its `default` export, or else its named
 * exports, each a tool (`Tool.isTool`), a toolkit or an array of tools; a `layer` export (an Effect
 * Layer) gives what their handlers need. Validated with `Toolkit.make`: a violation refuses the start,
 * each named. Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { pathToFileURL } from "node:url"
import { resolve } from "node:path"
import { load } from "./load.js"
import { BadOptions } from "./options.js"

/** The tools of a module, as served: a validated toolkit, and the layer its handlers need (empty without one). */
export interface LoadedTools {
  readonly toolkit: import("../../Toolkit.js").Toolkit<any>
  readonly layer: Layer.Layer<any, any, never>
  readonly source: string
}

/** A toolkit's shape (`Toolkit.make`'s answer): its tools, by name. */
const isToolkit = (u: unknown): u is { readonly tools: ReadonlyArray<unknown> } =>
  typeof u === "object" && u !== null && Array.isArray((u as { tools?: unknown }).tools) &&
  (u as { byName?: unknown }).byName instanceof Map

/** The tools `value` is or holds: a tool, a toolkit, an array of tools; else none. */
const toolsOf = (value: unknown, isTool: (u: unknown) => boolean): ReadonlyArray<unknown> =>
  isTool(value)
    ? [value]
    : isToolkit(value)
    ? value.tools
    : Array.isArray(value) && value.length > 0 && value.every(isTool)
    ? value
    : []

/**
 * The tools of the module at `path` (relative to the working directory), validated; `BadOptions` saying why not
 * (it cannot be imported, it exports no tool, its tools break a rule: each violation).
 */
export const loadTools = (path: string): Effect.Effect<LoadedTools, BadOptions> =>
  Effect.gen(function*() {
    const [Tool, Toolkit] = yield* load(() => import("../../Tool.js"), () => import("../../Toolkit.js"))
    const url = pathToFileURL(resolve(process.cwd(), path)).href
    const module = yield* Effect.tryPromise({
      try: () => import(url) as Promise<Record<string, unknown>>,
      catch: (error) =>
        new BadOptions({ message: `--tools ${path} cannot be loaded: ${error instanceof Error ? error.message : String(error)}` })
    })
    const fromDefault = toolsOf(module.default, Tool.isTool)
    const tools = fromDefault.length > 0
      ? fromDefault
      : Object.entries(module).filter(([name]) => name !== "default" && name !== "layer")
        .flatMap(([, value]) => toolsOf(value, Tool.isTool))
    // The same tool exported twice (alone and in a toolkit) is served once.
    const unique = [...new Set(tools)] as Array<import("../../Tool.js").Any>
    if (unique.length === 0) {
      return yield* new BadOptions({
        message: `--tools ${path} exports no tool: export tools (Tool.make) or a toolkit (Toolkit.make), named or as default`
      })
    }
    const toolkit = yield* Effect.mapError(
      Toolkit.make(...unique),
      (error) =>
        new BadOptions({
          message: `--tools ${path}: its tools cannot be served: ${error.violations.map((v) => v.message).join("; ")}`
        })
    )
    // What the handlers need, untyped: the module's to match (a handler missing a service fails its calls).
    const layer = (Layer.isLayer(module.layer) ? module.layer : Layer.empty) as Layer.Layer<any, any, never>
    return { toolkit, layer, source: path }
  })
