/**
 * A command of the CLI (`src/main.ts`) is one Layer, built from the settings (read through Config, so
 * the `ConfigProvider` in force decides them) and the command line's options: the services it needs
 * provided to what it does. Building the layer runs the command: a command that ends (`demo`, `run`,
 * `approve`, `mcp` over stdio) has ended once it is built; a server (`platform`, `serve`, `mcp --http`)
 * is not built before the process is stopped. Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"

/** Runs a command: its layer built, then released (its scope closes). */
export const runCommand = <E, R>(command: Layer.Layer<never, E, R>): Effect.Effect<void, E, Exclude<R, Scope.Scope>> =>
  Effect.scoped(Effect.asVoid(Layer.build(command)))

/** A server as a command: `server` built and kept until the process is stopped (`Layer.launch`). */
export const untilStopped = <A, E, R>(server: Layer.Layer<A, E, R>): Layer.Layer<never, E, R> =>
  Layer.effectDiscard(Layer.launch(server))
