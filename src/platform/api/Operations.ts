/**
 * What the operator API reads and does (docs: operations): the seam between its routes (OperatorRoutes.ts) and
 * a platform. Tasks, their timelines and the approvals waiting are read from the `Journal` (so that any platform
 * whose journal is a database, a cluster's runner too, reads them the same way); a decision goes the way an
 * agent's `DecideApproval` goes (the backend's `decide`, with the operator's name as its author); the agents
 * and the events are this platform process's, from its parts (a cluster's runner: the agents and tasks it holds);
 * a cancel stops the task where it runs.
 */
import { Clock, Effect } from "effect"
import type * as Journal from "../../Journal.js"
import type { ApprovalsNeedJournal, NoPendingTaskApproval, UnknownTask } from "../../protocol/Protocol.js"
import type { Options } from "../Options.js"
import type { Parts } from "../Parts.js"
import { type Feed, type Follow, followTask } from "./Feeds.js"
import type { AgentView } from "./OperatorApi.js"

/** A task held by this platform process: whose it is, whether it ended, its events to follow. */
export interface HeldTask {
  readonly agentId: string
  /** The offset of its final event, once it ended (undefined for an end that has none). */
  readonly ended: { readonly offset: number | undefined } | undefined
  readonly follow: Follow
}

/** A decision on a call a suspended task waits for, as the backend's (Handlers.ts, `Backend.decide`) takes it. */
export type Decide = (
  agentId: string,
  payload: {
    readonly taskId: string
    readonly toolCallId: string
    readonly approved: boolean
    readonly reason?: string | undefined
    /** A retry after `PlatformBusy`: the same decision, found made by the same author, stands. */
    readonly retried?: boolean | undefined
    readonly by?: string | undefined
  }
) => Effect.Effect<void, UnknownTask | NoPendingTaskApproval | ApprovalsNeedJournal>

/**
 * Cancels the agent's task (design: Cancelling a task), `by` who (`operator <name>`): its end is `TaskCancelled`.
 * False if it had ended already.
 */
export type Cancel = (agentId: string, taskId: string, by: string, reason: string) => Effect.Effect<boolean, UnknownTask>

/** What the operator API reads and does on a platform. */
export interface Operations {
  /** Where tasks, timelines and approvals are read; undefined when the platform keeps no journal. */
  readonly journal: Journal.Journal["Type"] | undefined
  /** Decides a call a suspended task waits for, as the task's agent would, `by` naming who decided. */
  readonly decide: Decide
  /** Cancels the agent's task (its end is `TaskCancelled`); undefined where the platform cannot. */
  readonly cancel: Cancel | undefined
  /** Each agent: its processes, tools and what it holds against its limits; `connections` counts its sockets. */
  readonly agents: (connections: (agentId: string) => number) => Effect.Effect<ReadonlyArray<typeof AgentView.Type>>
  /** The task if this platform process holds it now; never taken up from the journal. */
  readonly task: (taskId: string) => HeldTask | undefined
  /** Every task's events (of `agentId`'s only, if given). */
  readonly events: (agentId: string | undefined) => Follow
}

/** The platform process an operator API is of: its parts, its backend, its journal if it keeps one, its options. */
export interface OperatedPlatform {
  readonly parts: Parts
  readonly backend: { readonly decide: Decide }
  readonly journal: Journal.Journal["Type"] | undefined
  readonly options: Options
  /** How a task is cancelled: a cluster's runner sends it to the task's owner; by default, the parts cancel it here. */
  readonly cancel?: Cancel | undefined
  /** The agents as `GET /agents` shows them: a cluster's runner reads the whole cluster's; by default, the parts'. */
  readonly agents?: Operations["agents"] | undefined
}

/**
 * The operations of a platform process on its parts, its backend, its journal if it keeps one, and its feed:
 * the embedded platform's, or a cluster's runner's (its `cancel` goes to the task's owner).
 */
export const operationsOf = ({ agents, backend, cancel, journal, options, parts }: OperatedPlatform, feed: Feed): Operations => ({
  journal,
  decide: backend.decide,
  cancel: cancel ?? ((agentId, taskId, by, reason) => parts.tasks.cancel(agentId, taskId, by, reason)),
  agents: agents ?? ((connections) => Effect.map(Clock.currentTimeMillis, (now) => agentsOf(parts, options, connections, now))),
  task: (taskId) => {
    const task = parts.tasks.find(taskId)
    if (task === undefined) return undefined
    return {
      agentId: task.agentId,
      ended: task.final === undefined ? undefined : { offset: task.final.offset },
      follow: followTask(task, parts.tasks.watch)
    }
  },
  events: feed.follow
})

/** Each agent of the tokens or held here, by id. */
const agentsOf = (
  { agents, assignments, limits, tasks }: Parts,
  options: Options,
  connections: (agentId: string) => number,
  now: number
): Array<typeof AgentView.Type> => {
  const ids = [...new Set([...options.tokens.values(), ...agents.agentIds()])].sort()
  return ids.map((agentId) => {
    const watching = new Set(assignments.watching(agentId))
    const usage = tasks.usageOf(agentId)
    return {
      agentId,
      processes: agents.processes(agentId).map((process) => ({
        processId: process.processId,
        lastHeartbeatAt: new Date(process.lastSeen).toISOString(),
        live: now - process.lastSeen <= 3 * limits.heartbeatMillis,
        watching: watching.has(process.processId),
        tools: process.manifest.map((entry) => entry.name),
        manifestBytes: process.manifestBytes,
        manifestHash: process.manifestHash
      })),
      connections: connections(agentId),
      tools: agents.visible(agentId, "", now).map((tool) => tool.entry.name),
      tasks: { held: usage.tasks, max: limits.maxTasksPerAgent },
      promptBytes: { held: usage.promptBytes, max: limits.maxPromptBytesPerAgent },
      manifestBytes: { held: agents.manifestBytes(agentId), max: limits.maxManifestBytesPerAgent }
    }
  })
}
