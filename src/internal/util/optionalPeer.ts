/**
 * Loading an optional peer dependency where it is used: the packages only some users need (SQLite,
 * the MCP SDK, an OpenTelemetry exporter) are not installed with agent-tools; the first use imports
 * them, and one that is missing fails with the text that names what to install.
 */
import { Data, Effect } from "effect"

/** A package agent-tools needs for what was asked is not installed. */
export class MissingPackage extends Data.TaggedError("MissingPackage")<{
  /** The packages that feature needs, the missing one first. */
  readonly packages: ReadonlyArray<string>
  /** What needs them, for the text: "a SQLite file", say. */
  readonly feature: string
}> {
  override get message(): string {
    return `${this.feature} needs the package ${this.packages[0]}, an optional peer dependency of agent-tools that ` +
      `is not installed: npm install ${this.packages.join(" ")}`
  }
}

/** The package a failed import could not find (Node's `Cannot find package 'x'`), if that is why it failed. */
const missingOf = (error: unknown): string | undefined => {
  const { code, message } = (error ?? {}) as { readonly code?: unknown; readonly message?: unknown }
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return undefined
  return /Cannot find (?:package|module) '((?:@[^/']+\/)?[^/']+)/.exec(String(message))?.[1]
}

/**
 * `load()` (a dynamic import of an optional peer), or `MissingPackage` naming the package missing among
 * `packages` (those `feature` needs, to install together). Any other failure to load is a defect.
 */
export const loadPeer = <A>(
  load: () => Promise<A>,
  packages: ReadonlyArray<string>,
  feature: string
): Effect.Effect<A, MissingPackage> =>
  Effect.flatMap(
    // Settled either way: a rejection is read here, not thrown as a defect before it is.
    Effect.promise(() => load().then((module) => ({ module }), (error: unknown) => ({ error }))),
    (outcome): Effect.Effect<A, MissingPackage> => {
      if ("module" in outcome) return Effect.succeed(outcome.module)
      const missing = missingOf(outcome.error)
      if (missing === undefined) return Effect.die(outcome.error)
      const ordered = [missing, ...packages.filter((name) => name !== missing)]
      return Effect.fail(new MissingPackage({ packages: ordered, feature }))
    }
  )
