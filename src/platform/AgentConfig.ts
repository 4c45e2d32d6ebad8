/**
 * The platform's configuration file (docs: configuration, "The platform's agents"): each agent's model, instructions,
 * `maxSteps`, limits, agent calls, approvals and tokens, in JSON (or YAML, `.yaml`/`.yml`). Decoded with Schema
 * before anything starts: a file that cannot be used is refused in one line naming the field and the fix. Once
 * running, `reload` reads it again: the new settings apply to the tasks that start after it, the running ones keep
 * theirs; a file that cannot be used leaves the running configuration as it is, and says why.
 */
import { Context, Data, Duration, Effect, Either, Layer, Option, ParseResult, Runtime, Schema, Scope } from "effect"
import { readFileSync } from "node:fs"
import * as LanguageModel from "../LanguageModel.js"
import * as Model from "../Model.js"
import type { AgentSettings, Options } from "./Options.js"

/** The configuration file cannot be read or used; `message` names the file's field and the fix. */
export class AgentConfigError extends Data.TaggedError("AgentConfigError")<{ readonly message: string }> {}

/** The model strings' providers (`Model.known`), for the message of a model string of none. */
const providers = Model.known.map((form) => form.replace(":<model>", ""))

const positiveInt = Schema.Number.pipe(
  Schema.filter((n) => Number.isSafeInteger(n) && n > 0, { message: () => "expected a positive integer" })
)

const nonEmpty = Schema.String.pipe(Schema.filter((s) => s.trim() !== "", { message: () => "expected a non-empty string" }))

/** A model string `Model.layer` knows: `scripted`, or `provider:name` of a known provider. */
const modelString = Schema.String.pipe(Schema.filter((text) => {
  const colon = text.indexOf(":")
  return text === "scripted" || (colon > 0 && colon < text.length - 1 && providers.includes(text.slice(0, colon)))
}, { message: (issue) => `${JSON.stringify(issue.actual)} is not a model string; use one of ${Model.known.join(", ")}` }))

/** An agent id: non-empty, no blank or colon (a token list's separator), not a name an object keeps for itself. */
const agentId = Schema.String.pipe(Schema.filter(
  (id) => /^[^\s:]+$/.test(id) && !["__proto__", "constructor", "prototype"].includes(id),
  { message: (issue) => `${JSON.stringify(issue.actual)} is not an agent id (non-empty, no blank or colon)` }
))

/** An agent's limits (`Options`' per-agent limits), and at the top level, every agent's defaults. */
export const LimitsFields = Schema.Struct({
  maxTasksPerAgent: Schema.optional(positiveInt),
  maxPromptBytesPerAgent: Schema.optional(positiveInt),
  maxManifestBytes: Schema.optional(positiveInt),
  maxManifestBytesPerAgent: Schema.optional(positiveInt),
  maxConnections: Schema.optional(positiveInt)
})

/** The settings the file's top level and each agent share. */
const common = {
  model: Schema.optional(modelString),
  instructions: Schema.optional(Schema.String),
  maxSteps: Schema.optional(positiveInt)
}

/** One agent's entry under `agents`. */
export const AgentEntry = Schema.Struct({
  ...common,
  limits: Schema.optional(LimitsFields),
  calls: Schema.optional(Schema.Array(agentId)),
  approve: Schema.optional(Schema.Array(nonEmpty)),
  tokens: Schema.optional(Schema.Array(nonEmpty))
})

/** A duration in the file, as Effect's `Duration` reads one ("30 seconds", "10 minutes", "24 hours"), above zero. */
const duration = Schema.String.pipe(Schema.filter((text) => {
  const decoded = Duration.decodeUnknown(text)
  return Option.isSome(decoded) && Duration.greaterThan(decoded.value, Duration.zero)
}, {
  message: (issue) =>
    `${JSON.stringify(issue.actual)} is not a duration; write one such as "500 millis", "30 seconds", ` +
    `"10 minutes" or "24 hours"`
}))

/**
 * The platform's own options (`Options`), at the file's top level: read at the start, not by a reload (a change
 * takes effect at the next start, and a reload says so).
 */
const platformFields = {
  limits: Schema.optional(LimitsFields),
  heartbeatInterval: Schema.optional(duration),
  lifecycleBudget: Schema.optional(positiveInt),
  lifecycleWindow: Schema.optional(duration),
  approvalExpiry: Schema.optional(duration),
  keepEndedTasks: Schema.optional(duration),
  evictSilentAfter: Schema.optional(positiveInt),
  agentCallTimeout: Schema.optional(duration),
  workerGrace: Schema.optional(duration),
  operatorHosts: Schema.optional(Schema.Array(nonEmpty))
}

/** The file: defaults for agents it does not name, its agents, and tokens (`token: agent`) besides the agents' own. */
export const ConfigFile = Schema.Struct({
  ...common,
  ...platformFields,
  agents: Schema.Record({ key: agentId, value: AgentEntry }),
  tokens: Schema.optional(Schema.Record({ key: nonEmpty, value: agentId }))
})
export type ConfigFile = typeof ConfigFile.Type

/** A parse failure's first issue, as `agents.billing.maxSteps: expected a positive integer`. */
const firstIssue = (error: ParseResult.ParseError): string => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (issue === undefined) return error.message
  const path = issue.path.map(String).join(".")
  const message = issue._tag === "Unexpected" ? "is not a field of the file (a typo?)" : issue.message
  return path === "" ? message : `${path}: ${message}`
}

/** What the file's parts must agree on beyond their shapes: calls and tokens name agents, no token twice. */
const crossProblem = (config: ConfigFile, known: ReadonlySet<string>): string | undefined => {
  const agents = new Set([...Object.keys(config.agents), ...known, ...Object.values(config.tokens ?? {})])
  const seen = new Set(Object.keys(config.tokens ?? {}))
  for (const [id, agent] of Object.entries(config.agents)) {
    const unknown = (agent.calls ?? []).findIndex((callee) => !agents.has(callee))
    if (unknown !== -1) {
      return `agents.${id}.calls.${unknown}: ${JSON.stringify(agent.calls![unknown])} is not an agent of the file ` +
        "or of the tokens; name one of them"
    }
    for (const [i, token] of (agent.tokens ?? []).entries()) {
      if (seen.has(token)) return `agents.${id}.tokens.${i}: repeats a token given before; each token is one agent's`
      seen.add(token)
    }
  }
  return undefined
}

/** The text of `file`'s configuration, as a value: JSON, or YAML for a `.yaml`/`.yml` file. */
const parse = (file: string, text: string): Effect.Effect<unknown, AgentConfigError> =>
  /\.ya?ml$/i.test(file)
    // YAML's parser is the `yaml` package (the CLI's own dependency, @effect/cli's), loaded only for a YAML file.
    ? Effect.flatMap(
      Effect.tryPromise({
        try: () => import("yaml"),
        catch: () => new AgentConfigError({ message: `${file}: reading YAML needs the yaml package; install it, or write JSON` })
      }),
      (yaml) =>
        Effect.try({
          try: () => yaml.parse(text) as unknown,
          catch: (error) => new AgentConfigError({ message: `${file} is not YAML: ${firstLine(error)}` })
        })
    )
    : Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: (error) => new AgentConfigError({ message: `${file} is not JSON: ${firstLine(error)}` })
    })

const firstLine = (error: unknown): string => String(error instanceof Error ? error.message : error).split("\n")[0]!

/**
 * Reads and decodes `file`; `known`, the agents of tokens given elsewhere (`PLATFORM_TOKENS`), which calls may name.
 * Fails with one line naming the file, the field and the fix.
 */
export const read = (file: string, known: ReadonlySet<string> = new Set()): Effect.Effect<ConfigFile, AgentConfigError> =>
  Effect.gen(function*() {
    const text = yield* Effect.try({
      try: () => readFileSync(file, "utf8"),
      catch: (error) => new AgentConfigError({ message: `the configuration file ${file} cannot be read: ${firstLine(error)}` })
    })
    const decoded = Schema.decodeUnknownEither(ConfigFile, { onExcessProperty: "error", errors: "first" })(
      yield* parse(file, text)
    )
    if (Either.isLeft(decoded)) {
      return yield* new AgentConfigError({ message: `${file} cannot be used: ${firstIssue(decoded.left)}` })
    }
    const problem = crossProblem(decoded.right, known)
    if (problem !== undefined) return yield* new AgentConfigError({ message: `${file} cannot be used: ${problem}` })
    return decoded.right
  })

/** The tokens of `config` (`token -> agent id`): the top level's and each agent's. */
export const tokensOf = (config: ConfigFile): Map<string, string> =>
  new Map([
    ...Object.entries(config.tokens ?? {}),
    ...Object.entries(config.agents).flatMap(([id, agent]) => (agent.tokens ?? []).map((token) => [token, id] as const))
  ])

/** The platform's options `config` sets at its top level (`limits` are the defaults of every agent's). */
export const platformOptionsOf = (config: ConfigFile): Partial<Options> => {
  const { limits, ...rest } = config
  const picked: Record<string, unknown> = { ...limits }
  for (const key of Object.keys(platformFields)) {
    const value = (rest as Record<string, unknown>)[key]
    if (key !== "limits" && value !== undefined) picked[key] = value
  }
  return picked as Partial<Options>
}

/** Makes the `LanguageModel` of a model string, for the platform's lifetime (the scope of `live`). */
export type ModelOf = (model: string) => Effect.Effect<LanguageModel.LanguageModel["Type"], unknown, Scope.Scope>

/** A running configuration: the platform's per-agent settings and tokens, read again by `reload`. */
export interface Live {
  /** `Options.agents`: each agent's settings as the file last read gives them (its defaults for an agent it does not name). */
  readonly agents: (agentId: string) => AgentSettings | undefined
  /**
   * `Options.tokens`: the file's tokens, or `fallback`'s when it gives none; a reload replaces them in place (a
   * connection already authenticated stays).
   */
  readonly tokens: Map<string, string>
  /** The agents the file names. */
  readonly agentIds: () => ReadonlyArray<string>
  /** The platform's options the file set at the start (`platformOptionsOf`); a reload leaves them. */
  readonly options: Partial<Options>
  /** Reads the file again: used, it applies to the tasks that start from now; else the running one stays, and a warning says why. */
  readonly reload: Effect.Effect<boolean>
}

/** Settings per agent id, and the defaults for others, with each model string made a `LanguageModel` by `models`. */
const settingsOf = (config: ConfigFile, models: ReadonlyMap<string, LanguageModel.LanguageModel["Type"]>) => {
  const of = (entry: typeof AgentEntry.Type | undefined): AgentSettings => {
    const model = entry?.model ?? config.model
    return {
      model: model === undefined ? undefined : models.get(model),
      instructions: entry?.instructions ?? config.instructions,
      maxSteps: entry?.maxSteps ?? config.maxSteps,
      limits: entry?.limits,
      calls: entry?.calls,
      approve: entry?.approve
    }
  }
  return { byId: new Map(Object.entries(config.agents).map(([id, entry]) => [id, of(entry)])), others: of(undefined) }
}

/**
 * The configuration of `file`, running: its models made by `modelOf` (once per model string, kept for the scope, so
 * that a running task's model outlives a reload), its tokens, or `fallback` when it gives none. Fails as `read`
 * does, or when a model cannot be made (a missing API key).
 */
export const live = (
  file: string,
  modelOf: ModelOf,
  fallback: ReadonlyMap<string, string> = new Map()
): Effect.Effect<Live, AgentConfigError, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const models = new Map<string, LanguageModel.LanguageModel["Type"]>()
    const prepare = (config: ConfigFile) =>
      Effect.gen(function*() {
        const wanted = [config.model, ...Object.values(config.agents).map((agent) => agent.model)]
        for (const model of new Set(wanted.filter((m): m is string => m !== undefined))) {
          if (models.has(model)) continue
          const made = yield* Effect.mapError(
            Scope.extend(modelOf(model), scope),
            (error) => new AgentConfigError({ message: `${file}: the model ${model} cannot be used: ${firstLine(error)}` })
          )
          models.set(model, made)
        }
        return settingsOf(config, models)
      })
    const known = new Set(fallback.values())
    let current = yield* Effect.flatMap(read(file, known), (config) => Effect.map(prepare(config), (s) => ({ config, s })))
    const tokens = new Map<string, string>()
    const setTokens = (config: ConfigFile) => {
      const own = tokensOf(config)
      tokens.clear()
      for (const [token, agent] of own.size > 0 ? own : fallback) tokens.set(token, agent)
    }
    setTokens(current.config)
    const options = platformOptionsOf(current.config)
    const reload = Effect.flatMap(read(file, known), (config) => Effect.map(prepare(config), (s) => ({ config, s }))).pipe(
      Effect.tap((next) =>
        Effect.sync(() => {
          current = next
          setTokens(next.config)
        })
      ),
      Effect.tap((next) => {
        const changed = changedOptions(options, platformOptionsOf(next.config))
        return changed.length === 0 ? Effect.void : Effect.logWarning(
          `platform configuration ${file}: ${changed.join(", ")} changed; the platform's own options take effect at ` +
            "the next start (restart the platform, or each runner in turn)"
        )
      }),
      Effect.zipRight(Effect.logInfo(`platform configuration ${file} reloaded: new tasks take its settings`)),
      Effect.as(true),
      Effect.catchAll((error) =>
        Effect.as(Effect.logWarning(`platform configuration not reloaded, the running one stays: ${error.message}`), false)
      )
    )
    return {
      agents: (id) => current.s.byId.get(id) ?? current.s.others,
      tokens,
      agentIds: () => Object.keys(current.config.agents),
      options,
      reload
    }
  })

/** The options whose values differ between `before` and `after`, by name. */
const changedOptions = (before: Partial<Options>, after: Partial<Options>): Array<string> =>
  [...new Set([...Object.keys(before), ...Object.keys(after)])].filter((key) =>
    JSON.stringify((before as Record<string, unknown>)[key]) !== JSON.stringify((after as Record<string, unknown>)[key])
  )

/** Runs `effect` on each `signal` the process receives (SIGHUP: `reload`), while the scope lasts. */
export const onSignal = (signal: NodeJS.Signals, effect: Effect.Effect<unknown>): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const listener = () => void Runtime.runFork(runtime)(effect)
        process.on(signal, listener)
        return listener
      }),
      (listener) => Effect.sync(() => void process.off(signal, listener))
    )).pipe(Effect.asVoid)

/** `ModelOf` from a function giving a model string's `LanguageModel` layer (the CLI's `loadModel`): each built in the scope. */
export const modelsFrom = <E1, E2>(
  layerOf: (model: string) => Effect.Effect<Layer.Layer<LanguageModel.LanguageModel, E1>, E2>
): ModelOf =>
(model) =>
  Effect.flatMap(layerOf(model), (layer) =>
    Effect.map(Layer.build(layer), (context) => Context.get(context, LanguageModel.LanguageModel)))
