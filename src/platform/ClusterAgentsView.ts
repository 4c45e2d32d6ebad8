/**
 * `GET /agents` on a cluster's runner (docs: operations): the whole cluster's agents, whichever runners hold their
 * shards and whichever runners their processes are connected to. Each agent's processes come from the registrations
 * in the database (ClusterDatabase.ts), its tasks not ended and their prompts' bytes from the journal, and which of
 * its processes watch for work from the owner of its shard (`Workers`, ClusterAgentCalls.ts). Its connections are
 * this runner's own.
 */
import { Clock, Duration, Effect, Option, Stream } from "effect"
import type * as Journal from "../Journal.js"
import { manifestBytesOf } from "./Agents.js"
import type { AssignmentsEntity } from "./ClusterAgentCalls.js"
import type { makeRegistry } from "./ClusterDatabase.js"
import type { Limits, Options } from "./Options.js"
import type { Operations } from "./api/Operations.js"

type AgentView = Effect.Effect.Success<ReturnType<Operations["agents"]>>[number]

/** How long the owner of an agent's shard is given to say which of its processes watch; past it, none is said to. */
const workersWithin = Duration.seconds(2)

/** `GET /agents` of a runner on the cluster's registrations, journal and assignments. */
export const agentsOn = (deps: {
  readonly registry: Effect.Effect.Success<typeof makeRegistry>
  readonly journal: Journal.Journal["Type"]
  readonly assignments: Effect.Effect.Success<typeof AssignmentsEntity.client>
  readonly options: Options
  readonly limits: Limits
  /** The agents with an entry on this runner (their shards held here). */
  readonly heldHere: () => ReadonlyArray<string>
}): Operations["agents"] =>
(connections) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const ids = [...new Set([...deps.options.tokens.values(), ...deps.heldHere()])].sort()
    return yield* Effect.forEach(ids, (agentId) => agentOn(deps, agentId, connections(agentId), now), { concurrency: 8 })
  })

/** One agent as the cluster has it now. */
const agentOn = (
  { assignments, journal, limits, registry }: Parameters<typeof agentsOn>[0],
  agentId: string,
  connections: number,
  now: number
): Effect.Effect<AgentView> =>
  Effect.gen(function*() {
    const [processes, usage, workers] = yield* Effect.all([
      registry.load(agentId),
      journal.openUsage(agentId),
      Stream.runHead(assignments(agentId).Workers()).pipe(
        Effect.timeout(workersWithin),
        Effect.orElseSucceed(() => Option.none())
      )
    ], { concurrency: "unbounded" })
    const watching = new Set(Option.match(workers, { onNone: () => [], onSome: (w) => w.workers.map((x) => x.processId) }))
    const live = (lastSeen: number) => now - lastSeen <= 3 * limits.heartbeatMillis
    const tools = new Set<string>()
    let manifestBytes = 0
    const views = processes.map((process) => {
      const bytes = manifestBytesOf(process.manifest)
      manifestBytes += bytes
      if (live(process.lastSeen)) for (const entry of process.manifest) tools.add(entry.name)
      return {
        processId: process.processId,
        lastHeartbeatAt: new Date(process.lastSeen).toISOString(),
        live: live(process.lastSeen),
        watching: watching.has(process.processId),
        tools: process.manifest.map((entry) => entry.name),
        manifestBytes: bytes,
        manifestHash: process.manifestHash
      }
    })
    return {
      agentId,
      processes: views,
      connections,
      tools: [...tools],
      tasks: { held: usage.tasks, max: limits.maxTasksPerAgent },
      promptBytes: { held: usage.promptBytes, max: limits.maxPromptBytesPerAgent },
      manifestBytes: { held: manifestBytes, max: limits.maxManifestBytesPerAgent }
    }
  })
