/**
 * The agents (design: The platform): each one's processes and the tools they registered, the tools
 * a task's model is offered, and the lifecycle budget each agent's calls are held to (design: Hostile
 * clients). Memory only and no fiber: nothing of it stops at shutdown; the platform's retention
 * sweep forgets processes gone silent (`forgetSilent`).
 */
import { Clock, Effect, Either } from "effect"
import type * as Journal from "../Journal.js"
import * as StrictSchema from "../providers/StrictSchema.js"
import { type Caller, LifecycleBudgetExceeded, ManifestRejected } from "../protocol/Protocol.js"
import * as Toolkit from "../Toolkit.js"
import type { Limits } from "./Options.js"

/** A registered process: its manifest, and when it was last heard from. */
export interface ProcessEntry {
  readonly processId: string
  readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>
  readonly manifestHash: string
  lastSeen: number
}

/** A registered process as this module holds it: with its manifest's size, counted against the agent's. */
export interface HeldProcess extends ProcessEntry {
  readonly manifestBytes: number
}

/** A manifest's size as the limits count it: its JSON, in UTF-8 bytes. */
export const manifestBytesOf = (manifest: ReadonlyArray<Toolkit.ManifestEntry>): number =>
  Buffer.byteLength(JSON.stringify(manifest))

/**
 * The size limits a manifest breaks (design: Hostile clients): its own (`maxManifestBytes`), or the
 * agent's manifests together, the one it replaces left out (`maxManifestBytesPerAgent`).
 */
const sizeViolations = (
  agent: AgentEntry,
  processId: string,
  bytes: number,
  limits: Limits
): Array<Toolkit.Violation> => {
  if (bytes > limits.maxManifestBytes) {
    return [
      new Toolkit.Violation({
        rule: "manifest-bytes",
        message:
          `the manifest is ${bytes} bytes of JSON, over the platform's maxManifestBytes (${limits.maxManifestBytes})`
      })
    ]
  }
  let others = 0
  for (const process of agent.processes.values()) if (process.processId !== processId) others += process.manifestBytes
  if (others + bytes <= limits.maxManifestBytesPerAgent) return []
  return [
    new Toolkit.Violation({
      rule: "manifest-bytes-per-agent",
      message: `the agent's other processes hold ${others} bytes of manifests; with this one's ${bytes} that is over ` +
        `the platform's maxManifestBytesPerAgent (${limits.maxManifestBytesPerAgent}); deregister a process first`
    })
  ]
}

interface AgentEntry {
  readonly processes: Map<string, HeldProcess>
  /** Times of the lifecycle calls inside the current window. */
  lifecycle: Array<number>
}

type LifecycleKind = "register" | "heartbeat" | "deregister"

const noLifecycleCalls = (): Record<LifecycleKind, number> => ({ register: 0, heartbeat: 0, deregister: 0 })

// --- the book: who is registered, and who is live ---

/** The agents held here, the budget's counting, and the live processes and visible tools read from them. */
const makeBook = (limits: Limits) => {
  const agents = new Map<string, AgentEntry>()
  const counts = new Map<string, Record<LifecycleKind, number>>()

  const agentOf = (agentId: string): AgentEntry => {
    let agent = agents.get(agentId)
    if (agent === undefined) {
      agent = { processes: new Map(), lifecycle: [] }
      agents.set(agentId, agent)
    }
    return agent
  }

  /** Counts a lifecycle call against the agent's budget; the call over it is refused. */
  const lifecycle = (agentId: string, kind: LifecycleKind) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const { lifecycleBudget: limit, lifecycleWindowMillis: windowMillis } = limits
      const agent = agentOf(agentId)
      agent.lifecycle = agent.lifecycle.filter((at) => at > now - windowMillis)
      if (agent.lifecycle.length >= limit) {
        return Effect.fail(new LifecycleBudgetExceeded({ agentId, limit, windowMillis }))
      }
      agent.lifecycle.push(now)
      const count = counts.get(agentId) ?? noLifecycleCalls()
      count[kind]++
      counts.set(agentId, count)
      return Effect.succeed({ agent, now })
    })

  /** Processes of the agent not deregistered and heard from within 3 heartbeat intervals. */
  const live = (agentId: string, now: number): Array<HeldProcess> =>
    [...(agents.get(agentId)?.processes.values() ?? [])].filter((p) => now - p.lastSeen <= 3 * limits.heartbeatMillis)

  /** The tools a task of `processId` is offered: every live process's, the task holder's own first. */
  const visible = (agentId: string, processId: string, now: number): Journal.TaskTools => {
    const seen = new Set<string>()
    const tools: Array<{ entry: Toolkit.ManifestEntry; own: boolean }> = []
    // On a name clash, the call goes where it can be answered.
    const processes = live(agentId, now).sort((a, b) =>
      Number(b.processId === processId) - Number(a.processId === processId)
    )
    for (const process of processes) {
      for (const entry of process.manifest) {
        if (seen.has(entry.name)) continue
        seen.add(entry.name)
        tools.push({ entry, own: process.processId === processId })
      }
    }
    return tools
  }

  return { agents, counts, agentOf, lifecycle, live, visible }
}

type Book = ReturnType<typeof makeBook>

/**
 * The tools whose input the platform's model cannot be sent (its provider's strict mode has no form
 * of it: `StrictSchema`), refused at registration rather than at a task's first model turn.
 */
const strictViolations = (
  manifest: ReadonlyArray<Toolkit.ManifestEntry>,
  strict: StrictSchema.Provider | undefined
): Array<Toolkit.Violation> =>
  strict === undefined ? [] : manifest.flatMap((entry) => {
    const form = StrictSchema.strictForm(strict, entry)
    return Either.isLeft(form) ? [new Toolkit.Violation({ tool: entry.name, rule: "strict-schema", message: form.left.message })] : []
  })

/** The provider whose strict mode an agent's manifests must fit (its tasks' model's), if it has one. */
type StrictOf = (agentId: string) => StrictSchema.Provider | undefined

// --- the lifecycle calls: register, heartbeat, deregister ---

/** What the protocol's lifecycle calls do, each counted against the agent's budget first. */
const lifecycleCalls = (book: Book, limits: Limits, strictOf: StrictOf) => ({
  register: (
    { agentId, manifest, manifestHash, processId }: Caller & {
      readonly manifest: ReadonlyArray<Toolkit.ManifestEntry>
      readonly manifestHash: string
    }
  ) =>
    Effect.gen(function*() {
      const { agent, now } = yield* book.lifecycle(agentId, "register")
      const manifestBytes = manifestBytesOf(manifest)
      // A manifest over a size limit is not checked further: its size is the answer.
      const oversize = sizeViolations(agent, processId, manifestBytes, limits.forAgent(agentId))
      const violations = oversize.length > 0 ? oversize : [...Toolkit.checkEntries(manifest), ...strictViolations(manifest, strictOf(agentId))]
      if (violations.length > 0) return yield* new ManifestRejected({ violations })
      agent.processes.set(processId, { processId, manifest, manifestHash, lastSeen: now, manifestBytes })
      yield* Effect.logDebug(`agent ${agentId}: process ${processId} registered ${manifest.length} tools`)
      return { heartbeatIntervalMillis: limits.heartbeatMillis }
    }),
  heartbeat: ({ agentId, manifestHash, processId }: Caller & { readonly manifestHash: string }) =>
    Effect.gen(function*() {
      const { agent, now } = yield* book.lifecycle(agentId, "heartbeat")
      const process = agent.processes.get(processId)
      if (process === undefined || process.manifestHash !== manifestHash) return { known: false }
      process.lastSeen = now
      yield* Effect.logDebug(`agent ${agentId}: heartbeat from process ${processId}`)
      return { known: true }
    }),
  deregister: ({ agentId, processId }: Caller) =>
    Effect.gen(function*() {
      const { agent } = yield* book.lifecycle(agentId, "deregister")
      agent.processes.delete(processId)
      yield* Effect.logDebug(`agent ${agentId}: process ${processId} deregistered`)
    })
})

// --- upkeep: forgetting, restoring (cluster mode), counting ---

/** What the retention sweep, a cluster runner and `PlatformState` read or change. */
const upkeep = ({ agentOf, agents, counts }: Book, limits: Limits) => ({
  /** Forgets the processes silent for `evictSilentAfter` intervals, and agents left with nothing. */
  forgetSilent: (now: number): void => {
    for (const [agentId, agent] of agents) {
      for (const process of agent.processes.values()) {
        if (now - process.lastSeen > limits.evictAfterMillis) agent.processes.delete(process.processId)
      }
      const windowStart = now - limits.lifecycleWindowMillis
      if (agent.processes.size === 0 && agent.lifecycle.every((at) => at <= windowStart)) agents.delete(agentId)
    }
  },
  /**
   * Takes back a registration kept elsewhere (cluster mode: the runner that now owns the agent's
   * shard reads them from the database): the process as it was last heard from, no budget counted.
   * One already held here is kept.
   */
  restore: (agentId: string, process: ProcessEntry): void => {
    const agent = agentOf(agentId)
    if (!agent.processes.has(process.processId)) {
      agent.processes.set(process.processId, { ...process, manifestBytes: manifestBytesOf(process.manifest) })
    }
  },
  /**
   * Takes the times of the agent's lifecycle calls inside the window from where they are kept
   * (cluster mode: the database, which holds every runner's), in place of this process's, so that
   * the budget holds across a move of the agent's shard.
   */
  restoreLifecycle: (agentId: string, times: ReadonlyArray<number>): void => {
    agentOf(agentId).lifecycle = [...times].sort((a, b) => a - b)
  },
  lifecycleCalls: (agentId: string) => ({ ...(counts.get(agentId) ?? noLifecycleCalls()) }),
  /** The agents with an entry here (a process held, or lifecycle calls in the window). */
  agentIds: (): Array<string> => [...agents.keys()],
  /** Every process of the agent held here, live or silent (not yet forgotten). */
  processes: (agentId: string): Array<HeldProcess> => [...(agents.get(agentId)?.processes.values() ?? [])],
  processCount: (agentId: string) => agents.get(agentId)?.processes.size ?? 0,
  /** Bytes of the manifests held for the agent's processes (counted against `maxManifestBytesPerAgent`). */
  manifestBytes: (agentId: string): number => {
    let bytes = 0
    for (const process of agents.get(agentId)?.processes.values() ?? []) bytes += process.manifestBytes
    return bytes
  }
})

/** The agents of this process, held to `limits`. */
export const makeAgents = (limits: Limits, strictOf: StrictOf = () => undefined) => {
  const book = makeBook(limits)
  return { live: book.live, visible: book.visible, ...lifecycleCalls(book, limits, strictOf), ...upkeep(book, limits) }
}

/** The agents, as `makeAgents` gives them. */
export type Agents = ReturnType<typeof makeAgents>
