/**
 * The ids the runtime mints: agent runs, platform tasks, store instances, MCP sessions. One service,
 * so that every id is unique across processes and unguessable by default, and predictable in tests.
 */
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"

/** What an id names; it is the id's prefix. */
export type Kind = "run" | "task" | "process" | "call" | "session" | "attachment" | "connection" | "submit"

/** Mints ids. */
export interface Generator {
  /** A new id of `kind`, written `<kind>-<unique part>`. */
  readonly make: (kind: Kind) => string
}

/**
 * The default: `<kind>-<UUID v4>`. A v4 UUID carries 122 random bits from the OS's CSPRNG, so ids
 * minted by any number of processes do not collide and cannot be guessed from one another.
 */
export const random: Generator = { make: (kind) => `${kind}-${randomUUID()}` }

/** Counts per kind from 1: `run-1`, `run-2`, `task-1`, ... Each call starts its own counts. */
export const deterministic = (): Generator => {
  const counts = new Map<Kind, number>()
  return {
    make: (kind) => {
      const n = (counts.get(kind) ?? 0) + 1
      counts.set(kind, n)
      return `${kind}-${n}`
    }
  }
}

/** The generator in force: a `Context.Reference`, so code that provides nothing gets `random`. */
export class Ids extends Context.Reference<Ids>()("agent-tools/Ids", {
  defaultValue: (): Generator => random
}) {}

/** A new id of `kind` from the generator in force. */
export const make = (kind: Kind): Effect.Effect<string> => Effect.map(Ids, (ids) => ids.make(kind))

/** For tests: ids counted per kind from 1 (`run-1`, `run-2`, ...), fresh counts each time the layer is built. */
export const layerDeterministic: Layer.Layer<never> = Layer.sync(Ids, deterministic)

/** Uses `generator` for every id. */
export const layer = (generator: Generator): Layer.Layer<never> => Layer.succeed(Ids, generator)
