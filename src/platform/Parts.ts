/**
 * The parts of the platform in one process, in their start order: the agents, the tasks' loops, the
 * redelivery and the retention sweep. A scope runs its finalizers last-added first, so they stop in
 * the reverse order: the retention sweep, the redelivery, the tasks' loops (the agents have nothing to
 * stop); the journal, opened before them by the caller, closes last. The embedded platform
 * (Handlers.ts) and a cluster runner (Cluster.ts) both make them.
 */
import { Clock, Effect, Option, Ref, type Schedule } from "effect"
import type * as Journal from "../Journal.js"
import * as LanguageModel from "../LanguageModel.js"
import * as StrictSchema from "../providers/StrictSchema.js"
import { Timing } from "../Timing.js"
import * as AgentCalls from "./AgentCalls.js"
import { type Agents, makeAgents } from "./Agents.js"
import { agentSettingsOf, type Limits, limitsOf, type Options } from "./Options.js"
import type { RouteDeps } from "./TaskRoutes.js"
import { makeTasks, type Tasks } from "./Tasks.js"

// --- redelivery ---

/**
 * Unanswered calls are delivered again, same id and deadline, until the answer or the deadline
 * (design: The platform). One fiber for all tasks: each tick re-sends the calls last sent at or before
 * the tick before, so a call waits between one and two intervals. It stops after the sweep, before
 * the tasks' loops.
 */
const redeliver = (tasks: Tasks, schedule: Schedule.Schedule<unknown, unknown>) =>
  Effect.gen(function*() {
    const previousTick = yield* Ref.make(yield* Clock.currentTimeMillis)
    const tick = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(Ref.getAndSet(previousTick, now), (previous) => tasks.redeliver(previous, now)))
    yield* Effect.forkScoped(Effect.schedule(tick, schedule))
  })

// --- retention ---

/**
 * What the platform keeps stays bounded (design: Hostile clients): an ended task stays a while for a
 * client re-attaching after a reconnect, then goes, from memory and from the journal; a process silent
 * for `evictSilentAfter` intervals is forgotten (were it to come back, its heartbeat reads unknown and
 * it registers again). A fiber on `Timing.platformSweep`, the first to stop.
 */
const sweep = (
  parts: { readonly agents: Agents; readonly tasks: Tasks; readonly journal: Journal.Journal["Type"] | undefined },
  limits: Limits,
  schedule: Schedule.Schedule<unknown, unknown>
) => {
  const { agents, journal, tasks } = parts
  const once = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const forgetBefore = now - limits.keepEndedTasksMillis
    tasks.forgetEnded(forgetBefore)
    agents.forgetSilent(now)
    return journal === undefined ? Effect.void : journal.purge(forgetBefore)
  })
  return Effect.forkScoped(Effect.schedule(once, schedule))
}

// --- the parts ---

/**
 * The parts of the platform in this process, in their start order (stopped in the reverse one):
 * the agents, the tasks' loops, the redelivery and the retention sweep. A cluster runner (Cluster.ts)
 * has them too, for the agents and tasks whose shards it owns; its tasks run agent calls on the
 * cluster (`cluster.host`, given the host of the agents and assignments held here) and route calls to workers on
 * any runner (`cluster.routing`).
 */
export const makeParts = (
  options: Options,
  journal: Journal.Journal["Type"] | undefined,
  cluster?: {
    readonly host: (local: AgentCalls.Host) => AgentCalls.Host
    /** What the routing of calls to workers reads of the agents' workers, on the cluster (ClusterRoutes.ts). */
    readonly routing: Omit<RouteDeps, "graceMillis">
  }
) =>
  Effect.gen(function*() {
    const problems = AgentCalls.agentCallsProblems(options)
    if (problems.length > 0) return yield* Effect.dieMessage(`platform options: ${problems.join("; ")}`)
    const limits = limitsOf(options)
    const policy = yield* Timing
    // A manifest is checked against the form its agent's tasks' model requires (its provider's strict mode): the
    // agent's own model's (its settings, read at each registration), else the platform's.
    const provider = Option.getOrUndefined(
      Option.flatMapNullable(yield* Effect.serviceOption(LanguageModel.LanguageModel), (model) => model.strictSchemas)
    )
    const agents = makeAgents(limits, (agentId) => {
      const own = agentSettingsOf(options, agentId)?.model
      const name = own === undefined ? provider : own.strictSchemas
      return StrictSchema.isProvider(name) ? name : undefined
    })
    const assignments = AgentCalls.makeAssignments()
    // The processes watching here; in cluster mode, those of the agents whose shards this runner holds.
    const host = AgentCalls.makeHost(options, agents, assignments)
    // A task's calls of tools its holder does not serve go to the agent's other processes (TaskRoutes.ts): those
    // watching here, or in cluster mode those the owner of the agent's shard knows.
    const routing = cluster === undefined ? { live: agents.live, assignments } : cluster.routing
    const tasks = yield* makeTasks(options, limits, journal, cluster === undefined ? host : cluster.host(host), routing)
    yield* redeliver(tasks, policy.redelivery)
    yield* sweep({ agents, tasks, journal }, limits, policy.platformSweep)
    return { limits, agents, tasks, assignments, host }
  })

/** The platform's parts, as `makeParts` gives them. */
export type Parts = Effect.Effect.Success<ReturnType<typeof makeParts>>
