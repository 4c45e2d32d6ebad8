/**
 * Cluster mode's half of the job queue (design: The platform, Cluster mode): a task's calls of tools its holder does
 * not serve go to a worker of its agent connected to any runner, by the routing of TaskRoutes.ts, on the runner that
 * owns the task. The workers are known to the owner of the agent's shard (its `Assignments`, the streams of
 * `WatchAssignments` with `calls` that the runners they are connected to opened there: ClusterAgentCalls.ts): the
 * owner of a task follows them with `Workers` (the agent's live processes with their tools, and the workers with
 * their connections: at once, on each change, and every `followAlive.every`), and gives a call with `Give`, which the
 * owner of the agent's shard passes on the worker's stream to the runner it is connected to. What TaskRoutes.ts reads
 * of the agents and the assignments is this mirror, so the routing is the same whichever runner a worker is on: a
 * worker whose stream is gone from the mirror is a connection closed (its calls wait the grace for it, then go to
 * another), one that watches again on another connection (it reconnected to another runner) is given its calls there.
 *
 * An agent is followed from the first call of it routed here until no call of it has been routed, nor looked at, for
 * `idleAfter`. A stream to the owner of the agent's shard that breaks, ends or goes quiet past `followAlive.within`
 * (the shard moved) is opened again; the mirror keeps what it knew meanwhile.
 */
import { Clock, Data, Deferred, Duration, Effect, Exit, FiberId, FiberSet, Schedule, type Scope, Stream } from "effect"
import type { Assignment } from "../protocol/Protocol.js"
import type { CallWorker } from "./AgentCalls.js"
import type { AssignmentsEntity, Workers } from "./ClusterAgentCalls.js"
import { followAlive } from "./ClusterTiming.js"
import type { RouteDeps, Routes } from "./TaskRoutes.js"

type Client = Effect.Effect.Success<typeof AssignmentsEntity.client>

/** How long an agent is followed after its last call routed or looked at here. */
const idleAfter = Duration.seconds(60)

/** How long the first call of an agent routed here waits for what the owner of the agent's shard knows. */
const readyWithin = Duration.seconds(2)

/** What this runner knows of an agent's workers, as the owner of its shard last told it. */
interface Mirror {
  live: ReadonlyArray<{ readonly processId: string; readonly manifest: ReadonlyArray<{ readonly name: string }> }>
  workers: ReadonlyArray<CallWorker>
  readonly ready: Deferred.Deferred<void>
  usedAt: number
}

/** The stream from the owner of the agent's shard went quiet: opened again. */
class Quiet extends Data.TaggedError("Quiet") {}

/** No call of the agent was routed or looked at here for `idleAfter`: it is no longer followed. */
class Idle extends Data.TaggedError("Idle") {}

/**
 * The routing's view of the cluster's workers (`RouteDeps` but the grace), and `bind`, which gives it the routes'
 * connections to tell of workers' streams that come and go. Its followers run in the scope's fiber set.
 */
export const make = (assignments: Client): Effect.Effect<
  Omit<RouteDeps, "graceMillis"> & { readonly bind: (connections: Routes["connections"]) => void },
  never,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const run = yield* FiberSet.runtime(yield* FiberSet.make())<never>()
    const mirrors = new Map<string, Mirror>()
    const listeners: Array<(agentId: string, worker: CallWorker) => void> = []
    let connections: Routes["connections"] = { opened: () => {}, closed: () => {} }

    /** The owner of the agent's shard told what it knows: the routes hear of the streams that came and went. */
    const told = (agentId: string, mirror: Mirror, { live, workers }: Workers): void => {
      const before = new Map(mirror.workers.map((w) => [w.connection, w.processId]))
      mirror.live = live.map((p) => ({ processId: p.processId, manifest: p.tools.map((name) => ({ name })) }))
      mirror.workers = workers
      const now = new Set(workers.map((w) => w.connection))
      for (const connection of before.keys()) if (!now.has(connection)) connections.closed(connection)
      for (const worker of workers) {
        if (before.get(worker.connection) === worker.processId) continue
        connections.opened(worker.connection)
        for (const listener of listeners) listener(agentId, worker)
      }
      Deferred.unsafeDone(mirror.ready, Exit.void)
    }

    /** Follows the agent's workers until it is idle, the stream opened again whenever it breaks, ends or goes quiet. */
    const follow = (agentId: string, mirror: Mirror): Effect.Effect<void> => {
      const once = assignments(agentId).Workers().pipe(
        Stream.timeoutFail(() => new Quiet(), followAlive.within),
        Stream.runForEach((workers) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            told(agentId, mirror, workers)
            return now - mirror.usedAt > Duration.toMillis(idleAfter) ? Effect.fail(new Idle()) : Effect.void
          })
        ),
        Effect.catchAll((error) => error._tag === "Idle" ? Effect.fail(error) : Effect.void),
        Effect.catchAllDefect(() => Effect.void),
        Effect.zipRight(Effect.logDebug(`agent ${agentId}: the stream of its workers is opened again`))
      )
      return Effect.repeat(once, Schedule.spaced(followAlive.every)).pipe(
        Effect.catchAll(() => Effect.void),
        Effect.ensuring(Effect.sync(() => {
          if (mirrors.get(agentId) === mirror) mirrors.delete(agentId)
          for (const w of mirror.workers) connections.closed(w.connection)
        }))
      )
    }

    /** The agent's mirror, followed from now if it was not (touched: it is in use). */
    const mirrorOf = (agentId: string, now: number): Mirror => {
      let mirror = mirrors.get(agentId)
      if (mirror === undefined) {
        mirror = { live: [], workers: [], ready: Deferred.unsafeMake<void>(FiberId.none), usedAt: now }
        mirrors.set(agentId, mirror)
        run(follow(agentId, mirror))
      }
      mirror.usedAt = now
      return mirror
    }

    /** Gives the assignment on the owner of the agent's shard; a `Give` the engine cut short is tried again twice. */
    const give = (agentId: string, processId: string, assignment: Assignment): void => {
      run(assignments(agentId).Give({ processId, ...assignment }).pipe(
        Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.intersect(Schedule.recurs(2)))),
        Effect.flatMap((given) =>
          given ? Effect.void : Effect.logDebug(
            `task ${assignment.taskId}: process ${processId} of agent ${agentId} had no stream that takes calls; ` +
              "the routing hears of it with the next word of its workers"
          )
        ),
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`task ${assignment.taskId}: a call given to process ${processId} may be lost; it is given again`, cause)
        )
      ))
    }

    return {
      live: (agentId, now) => mirrorOf(agentId, now).live,
      assignments: {
        callWorkers: (agentId) => mirrors.get(agentId)?.workers ?? [],
        give: (agentId, processId, assignment) => {
          const worker = mirrors.get(agentId)?.workers.find((w) => w.processId === processId)
          if (worker === undefined) return undefined
          give(agentId, processId, assignment)
          return worker.connection
        },
        onCallsWatch: (listener) => void listeners.push(listener)
      },
      ready: (agentId) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.ignore(Effect.timeout(Deferred.await(mirrorOf(agentId, now).ready), readyWithin))),
      bind: (routes) => void (connections = routes)
    }
  })
