/**
 * How the platform runs (design: The platform): its options, the tokens they bind to agents, and
 * the limits they come to once defaults are applied, in milliseconds.
 */
import { Duration, Redacted } from "effect"
import type * as LanguageModel from "../LanguageModel.js"
import * as Timing from "../Timing.js"

/**
 * What an operator's token may do on the operator API (docs: operations): `viewer` reads, `approver` also
 * decides approvals, `admin` also cancels tasks. Each may do what the roles before it may.
 */
export const operatorRoles = ["viewer", "approver", "admin"] as const
/** What an operator's token may do. */
export type OperatorRole = typeof operatorRoles[number]

/** An operator's token: not an agent's; `name` is who it is, journaled as the author of what it decides. */
export interface OperatorToken {
  readonly token: Redacted.Redacted<string>
  readonly role: OperatorRole
  readonly name: string
}

/** The fewest characters an operator's token may have. */
export const minOperatorTokenLength = 16

/** The per-agent limits of `Options`, for one agent (each unset: the platform's). */
export interface AgentLimits {
  readonly maxTasksPerAgent?: number | undefined
  readonly maxPromptBytesPerAgent?: number | undefined
  readonly maxManifestBytes?: number | undefined
  readonly maxManifestBytesPerAgent?: number | undefined
  /** Its open WebSocket connections to one platform process, instead of the listener's `maxConnectionsPerAgent`. */
  readonly maxConnections?: number | undefined
}

/**
 * One agent's settings (docs: configuration, "The platform's agents"): read when each of its tasks starts, so
 * that settings changed while tasks run (a reloaded file) apply to the new tasks only. Each unset: the platform's.
 */
export interface AgentSettings {
  /** The model of the agent's tasks (the `LanguageModel` service). Unset: the one the platform's layer is given. */
  readonly model?: LanguageModel.LanguageModel["Type"] | undefined
  /** The system instructions of the agent's tasks. */
  readonly instructions?: string | undefined
  /** Model turns per task. */
  readonly maxSteps?: number | undefined
  readonly limits?: AgentLimits | undefined
  /** The agents its tasks may run with `exec_agent`, instead of `Options.agentCalls`' entry for it. */
  readonly calls?: ReadonlyArray<string> | undefined
  /**
   * Tools of the agent that need a person's approval besides those whose own `needsApproval` says so. With a journal
   * the task suspends until one decides (as for the tool's own flag); without one, nothing can wait: the call is refused.
   */
  readonly approve?: ReadonlyArray<string> | undefined
}

/** Per-agent settings: by agent id, or a function of it (undefined: the platform's settings). */
export type AgentSettingsSource =
  | Readonly<Record<string, AgentSettings>>
  | ((agentId: string) => AgentSettings | undefined)

/** The settings `options` give `agentId`, read now; undefined when they give none. */
export const agentSettingsOf = (options: Pick<Options, "agents">, agentId: string): AgentSettings | undefined => {
  const agents = options.agents
  if (agents === undefined) return undefined
  if (typeof agents === "function") return agents(agentId)
  return Object.hasOwn(agents, agentId) ? agents[agentId] : undefined
}

/** How the platform runs. */
export interface Options {
  /**
   * Per-agent settings (model, instructions, maxSteps, limits, agent calls, approvals): a record by agent id or a
   * function of it, read as each task starts. An agent they give nothing for has the platform's.
   */
  readonly agents?: AgentSettingsSource | undefined
  /** Token -> the agent id it is bound to. */
  readonly tokens: ReadonlyMap<string, string>
  /** The interval serving processes heartbeat at; 3 of them silent hides an agent's tools. Default 60 s. */
  readonly heartbeatInterval?: Duration.DurationInput | undefined
  /** Lifecycle calls (register, heartbeat, deregister) allowed per agent per window. Default 30. */
  readonly lifecycleBudget?: number | undefined
  /** Default 1 minute. */
  readonly lifecycleWindow?: Duration.DurationInput | undefined
  /** System instructions for the tasks' model. */
  readonly instructions?: string | undefined
  /** Model turns per task. Default 20. */
  readonly maxSteps?: number | undefined
  /**
   * A SQLite file (created if missing) journaling tasks, model turns, delivered calls and answers:
   * on start, the tasks that had not ended run again from it. Default: none, everything in memory.
   */
  readonly journal?: string | undefined
  /**
   * With a journal: how long a suspended task waits for a decision on a call that needs approval
   * (`DecideApproval`); at the first expiry it goes on, and the model reads that no one decided. Default 24 hours.
   */
  readonly approvalExpiry?: Duration.DurationInput | undefined
  /** How long an ended task can still be attached for its final event, in memory and in the journal. Default 10 minutes. */
  readonly keepEndedTasks?: Duration.DurationInput | undefined
  /** A process silent for this many heartbeat intervals is forgotten (its manifest freed). Default 10. */
  readonly evictSilentAfter?: number | undefined
  /**
   * Tasks of one agent not ended yet (running, waiting for a call's answer or for approvals); a
   * `SubmitTask` over it fails with `AgentLimitExceeded`. Default 256.
   */
  readonly maxTasksPerAgent?: number | undefined
  /**
   * Bytes of prompts (UTF-8) of one agent's tasks not ended yet; a `SubmitTask` whose prompt would
   * take it over fails with `AgentLimitExceeded`. Default 64 MiB.
   */
  readonly maxPromptBytesPerAgent?: number | undefined
  /** Bytes of one registered manifest (as JSON); a larger one is refused with `ManifestRejected`. Default 256 KiB. */
  readonly maxManifestBytes?: number | undefined
  /**
   * Bytes of the manifests held for one agent's processes together (as JSON); a registration that
   * would take it over is refused with `ManifestRejected`. Default 4 MiB.
   */
  readonly maxManifestBytesPerAgent?: number | undefined
  /**
   * Agents that call agents (design: Agents that call agents): for each agent id, the agent ids its
   * tasks may run with `exec_agent` (its model is then offered `exec_agent` and `list_agents`), like
   * `{ support: ["billing"] }`. Default: none, for every agent.
   */
  readonly agentCalls?: Readonly<Record<string, ReadonlyArray<string>>> | undefined
  /** How long one `exec_agent` call may take; past it the other agent's task is stopped. Default 10 minutes. */
  readonly agentCallTimeout?: Duration.DurationInput | undefined
  /**
   * A call given to a serving process of the task's agent (a worker: the task's holder does not serve the tool)
   * whose connection then closes waits this long for that process to come back before it goes to another
   * worker (design: The platform). Default 3 s.
   */
  readonly workerGrace?: Duration.DurationInput | undefined
  /**
   * Tokens of the operator API (`/api/v1` on the platform's port, docs: operations), each with its role
   * and name. Default: those of `PLATFORM_OPERATOR_TOKENS` (`parseOperatorTokens`); none there, no API.
   */
  readonly operatorTokens?: ReadonlyArray<OperatorToken> | undefined
  /**
   * `Host` values the operator API answers besides its listening address (`host:port`, as a client behind a
   * proxy names it). Default: none.
   */
  readonly operatorHosts?: ReadonlyArray<string> | undefined
  /**
   * The console (docs: console): browser pages at `/console` on the platform's port, over the operator API (so
   * only with operator tokens). `true`, or its settings. Default: off.
   */
  readonly console?: boolean | ConsoleOptions | undefined
}

/** The console's settings (docs: console). */
export interface ConsoleOptions {
  /**
   * The link of a task's trace id: a URL with `{traceId}` in it (Jaeger's `http://localhost:16686/trace/{traceId}`,
   * say). Default: none, the trace id is shown as text.
   */
  readonly traceUrl?: string | undefined
}

/** Parses `PLATFORM_TOKENS` (`token:agent,token:agent`, or one pair a line) into `Options.tokens`. */
export const parseTokens = (text: string): ReadonlyMap<string, string> =>
  new Map(
    text.split(/[,\n]/).map((pair) => pair.trim()).filter((pair) => pair !== "").map((pair) => {
      const colon = pair.indexOf(":")
      // No colon: no pair (not a token of all but its last character).
      return colon === -1 ? ["", ""] as const : [pair.slice(0, colon), pair.slice(colon + 1)] as const
    }).filter(([token, agent]) => token !== "" && agent !== "")
  )

/**
 * Parses `PLATFORM_OPERATOR_TOKENS` (`token:role:name` entries, comma-separated or one a line; a role of
 * `operatorRoles`) into `Options.operatorTokens`; an entry that is not one is left out (see `operatorTokensProblem`).
 */
export const parseOperatorTokens = (text: string): ReadonlyArray<OperatorToken> =>
  entriesOf(text).flatMap((entry) => {
    const [token, role, ...name] = entry.split(":")
    const known = operatorRoles.find((r) => r === role)
    return token === undefined || token === "" || known === undefined || name.join(":").trim() === ""
      ? []
      : [{ token: Redacted.make(token), role: known, name: name.join(":").trim() }]
  })

/** The entries of a comma- or line-separated setting, trimmed, blank ones left out. */
const entriesOf = (text: string): Array<string> =>
  text.split(/[,\n]/).map((entry) => entry.trim()).filter((entry) => entry !== "")

/**
 * Why `operatorTokens` (or `PLATFORM_OPERATOR_TOKENS`'s text) cannot be used, or undefined when they can: every
 * entry `token:role:name`, a known role, a name, a token of `minOperatorTokenLength` characters or more, no
 * blank in it, none twice. Entries are named by number, never by their token.
 */
export const operatorTokensProblem = (tokens: string | ReadonlyArray<OperatorToken>): string | undefined => {
  const entries = typeof tokens === "string"
    ? entriesOf(tokens).map((entry) => {
      const [token = "", role = "", ...name] = entry.split(":")
      return { token, role, name: name.join(":").trim() }
    })
    : tokens.map((t) => ({ token: Redacted.value(t.token), role: t.role as string, name: t.name }))
  const seen = new Set<string>()
  for (let i = 0; i < entries.length; i++) {
    const { name, role, token } = entries[i]!
    const at = `operator token ${i + 1} of ${entries.length}`
    if (!operatorRoles.some((r) => r === role)) return `${at} has role "${role}"; the roles are ${operatorRoles.join(", ")}`
    if (name === "") return `${at} has no name (token:role:name)`
    if (token.length < minOperatorTokenLength || /\s/.test(token)) {
      return `${at} is shorter than ${minOperatorTokenLength} characters or has a blank in it`
    }
    if (seen.has(token)) return `${at} repeats an earlier token`
    seen.add(token)
  }
  return undefined
}

/**
 * Parses `PLATFORM_AGENT_CALLS` (`caller:callee` pairs, comma-separated or one a line, a caller
 * repeated for each agent it may call) into `Options.agentCalls`; an entry that is not a pair is left out.
 */
export const parseAgentCalls = (text: string): Readonly<Record<string, ReadonlyArray<string>>> => {
  const calls = new Map<string, Array<string>>()
  for (const pair of text.split(/[,\n]/).map((entry) => entry.trim())) {
    const colon = pair.indexOf(":")
    if (colon <= 0 || colon === pair.length - 1) continue
    const caller = pair.slice(0, colon)
    calls.set(caller, [...(calls.get(caller) ?? []), pair.slice(colon + 1)])
  }
  return Object.fromEntries(calls)
}

/**
 * Why `PLATFORM_AGENT_CALLS` cannot be used with the platform's `agents` (those of its tokens), or undefined when it
 * can: every entry a `caller:callee` pair of two agent ids (no blank around the colon, no second colon, not a name an
 * object keeps for itself such as `__proto__`), each an agent of the tokens. Entries are named by number.
 */
export const agentCallsProblem = (text: string, agents: ReadonlySet<string>): string | undefined => {
  const entries = text.split(/[,\n]/).map((entry) => entry.trim()).filter((entry) => entry !== "")
  const reserved = new Set(["__proto__", "constructor", "prototype"])
  for (let i = 0; i < entries.length; i++) {
    const parts = entries[i]!.split(":")
    const at = `entry ${i + 1} of ${entries.length}`
    if (parts.length !== 2 || parts.some((part) => part === "" || /\s/.test(part))) {
      return `${at} is not caller:callee (two agent ids, one colon, no blanks)`
    }
    const named = parts.find((part) => reserved.has(part))
    if (named !== undefined) return `${at} names ${named}, which cannot be an agent id`
    const unknown = parts.find((part) => !agents.has(part))
    if (unknown !== undefined) return `${at} names agent ${unknown}, which no token of the platform serves`
  }
  return undefined
}

/** The default of `Options.workerGrace`: a reconnect takes well under it. */
const defaultWorkerGrace = Duration.seconds(3)

/** The default of `Options.keepEndedTasks`. */
const defaultKeepEndedTasks = Duration.minutes(10)

/** The defaults of `Options`' per-agent limits (design: Hostile clients). */
export const defaultAgentLimits = {
  // Far above what one serving process runs at once, far below what fills the platform's memory.
  maxTasksPerAgent: 256,
  // A prompt is held by its task until it ends: 256 tasks of 256 KiB.
  maxPromptBytesPerAgent: 64 * 1024 * 1024,
  // Hundreds of tools with long descriptions and schemas; a decoded manifest takes ~20 times its JSON.
  maxManifestBytes: 256 * 1024,
  // 16 processes of the largest manifest.
  maxManifestBytesPerAgent: 4 * 1024 * 1024
} as const

/** `Options` in milliseconds, defaults applied. */
export interface Limits {
  readonly heartbeatMillis: number
  readonly lifecycleBudget: number
  readonly lifecycleWindowMillis: number
  readonly keepEndedTasksMillis: number
  readonly evictAfterMillis: number
  readonly maxTasksPerAgent: number
  readonly maxPromptBytesPerAgent: number
  readonly maxManifestBytes: number
  readonly maxManifestBytesPerAgent: number
  readonly workerGraceMillis: number
  /** The limits of one agent: its own settings' (`Options.agents`), where they give one, over these. */
  readonly forAgent: (agentId: string) => Limits
}

/** The limits `options` set, defaults applied. */
export const limitsOf = (options: Options): Limits => {
  const millis = (duration: Duration.DurationInput) => Duration.toMillis(Duration.decode(duration))
  const heartbeatMillis = millis(options.heartbeatInterval ?? Timing.heartbeatInterval)
  const limits: Limits = {
    heartbeatMillis,
    lifecycleBudget: options.lifecycleBudget ?? 30,
    lifecycleWindowMillis: millis(options.lifecycleWindow ?? "1 minute"),
    keepEndedTasksMillis: millis(options.keepEndedTasks ?? defaultKeepEndedTasks),
    evictAfterMillis: (options.evictSilentAfter ?? 10) * heartbeatMillis,
    maxTasksPerAgent: options.maxTasksPerAgent ?? defaultAgentLimits.maxTasksPerAgent,
    maxPromptBytesPerAgent: options.maxPromptBytesPerAgent ?? defaultAgentLimits.maxPromptBytesPerAgent,
    maxManifestBytes: options.maxManifestBytes ?? defaultAgentLimits.maxManifestBytes,
    maxManifestBytesPerAgent: options.maxManifestBytesPerAgent ?? defaultAgentLimits.maxManifestBytesPerAgent,
    workerGraceMillis: millis(options.workerGrace ?? defaultWorkerGrace),
    forAgent: (agentId) => {
      const own = agentSettingsOf(options, agentId)?.limits
      return own === undefined ? limits : {
        ...limits,
        maxTasksPerAgent: own.maxTasksPerAgent ?? limits.maxTasksPerAgent,
        maxPromptBytesPerAgent: own.maxPromptBytesPerAgent ?? limits.maxPromptBytesPerAgent,
        maxManifestBytes: own.maxManifestBytes ?? limits.maxManifestBytes,
        maxManifestBytesPerAgent: own.maxManifestBytesPerAgent ?? limits.maxManifestBytesPerAgent
      }
    }
  }
  return limits
}
