/**
 * Starting a task on the cluster (Cluster.ts): a submitted one or one an `exec_agent` call starts,
 * admitted to its agent's limits counted over the whole cluster, placed on a shard (by default one this
 * runner holds), journaled, and its `Run` sent to its owner.
 */
import * as Sharding from "@effect/cluster/Sharding"
import { Cause, Context, Effect, Option, Tracer } from "effect"
import { Ids } from "../Ids.js"
import * as SqlStore from "../internal/sql/store.js"
import { traceparentOf } from "../internal/util/traceContext.js"
import * as Journal from "../Journal.js"
import { type AgentLimitExceeded, keyedTaskId } from "../protocol/Protocol.js"
import { AgentEntity, holdsShardOf, orDieOnEngine, TaskEntity } from "./ClusterEntities.js"
import type { RunnerOptions } from "./ClusterRunner.js"
import * as Metrics from "./Metrics.js"
import type { Limits } from "./Options.js"
import { usageProblem } from "./Tasks.js"

/** A new task of the agent's, held to its limits counted over the whole cluster: its tasks not ended, in the journal. */
const admit = (journal: Journal.Journal["Type"], limits: Limits, agentId: string, prompt: string) =>
  Effect.flatMap(journal.openUsage(agentId), (held) => {
    const refused = usageProblem(held, limits.forAgent(agentId), agentId, Buffer.byteLength(prompt))
    return refused === undefined ? Effect.void : Effect.fail(refused)
  })

/**
 * The `traceparent` of the span a task is started under, if any: read from the context, not through
 * `Effect.currentSpan`, whose failure without a span (the usual case) makes an exception and its stack
 * for every task.
 */
const currentTraceparent: Effect.Effect<string | undefined> = Effect.map(Effect.context<never>(), (context) => {
  const span = Option.getOrUndefined(Context.getOption(context, Tracer.ParentSpan))
  return span?._tag === "Span" ? traceparentOf(span) : undefined
})

/**
 * How many ids a new task's id is drawn from, at most, for one whose shard the submitting runner holds
 * (`placed`): a runner of n holds about 1/n of the shards, so 64 draws miss only with a cluster of
 * dozens of runners (or a runner that holds no shard yet), and the task is then placed by its id alone.
 */
const placementDraws = 64

/**
 * A new task: whose, which process submitted it (or was given it), its prompt; its id, when fixed (`exec_agent`'s);
 * the submitter's key, when it gave one (a retried submit).
 */
export interface NewTask {
  readonly agentId: string
  readonly processId: string
  readonly prompt: string
  readonly taskId?: string | undefined
  readonly submitKey?: string | undefined
  readonly resubmit?: boolean | undefined
}

/**
 * The ways a task's `Run` is sent. `Run` is not a persisted message (the journal makes a task durable), and a
 * volatile request to another runner would wait for its reply until the task ended, and be interrupted with
 * the sender's connection: so a runner sends `Run` only to itself, in the background (a `Run` that reached
 * another runner all the same, its shard moved meanwhile, holds no one up), and asks the owner of another
 * shard to send it (`TakeUp`), who answers at once.
 */
export const makeRuns = Effect.gen(function*() {
  const tasks = yield* TaskEntity.client
  const holdsShard = holdsShardOf(yield* Sharding.Sharding)
  const scope = yield* Effect.scope
  /** The task's `Run`, sent from this runner in the background: to itself, its shard here. */
  const runHere = (taskId: string, agentId: string): Effect.Effect<void> =>
    Effect.asVoid(Effect.forkIn(
      Effect.catchAllCause(tasks(taskId).Run({ agentId }, { discard: true }), (cause) =>
        Effect.logWarning(`task ${taskId}: its Run could not be sent; the sweep takes it up`, cause)),
      scope
    ))
  /**
   * Runs the task on the owner of its shard: here, its `Run`; elsewhere, `TakeUp` to its owner. Not taken (its
   * owner gone before it answered), the next owner of the shard takes the task up from the journal.
   */
  const run = (taskId: string, agentId: string): Effect.Effect<void> =>
    holdsShard(taskId) ? runHere(taskId, agentId) : tasks(taskId).TakeUp({ agentId }).pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause)
          ? Effect.interrupt
          : Effect.logWarning(`task ${taskId}: its owner was not reached; it takes it up from the journal`, cause))
    )
  return { runHere, run }
})

/** The ways a task's `Run` is sent, as `makeRuns` gives them. */
export type Runs = Effect.Effect.Success<typeof makeRuns>

/**
 * Starting a task on the cluster, a submitted one or one an `exec_agent` call starts (ClusterAgentCalls.ts):
 * admitted to the agent's limits, journaled with its starter's span (the runner that takes it up
 * continues that trace), run by its owner (`makeRuns`); its id. While the database cannot be reached,
 * each step waits for it, as the journal's statements do.
 */
export const makeStart = (limits: Limits, placement: RunnerOptions["placement"], runs: Runs) =>
  Effect.gen(function*() {
    const agents = yield* AgentEntity.client
    const holdsShard = holdsShardOf(yield* Sharding.Sharding)
    const ids = yield* Ids
    const journal = yield* Journal.Journal

    /**
     * A new task's id. Placed by its submitter (the default, `RunnerOptions.placement`): drawn until its
     * shard is one this runner holds (up to `placementDraws` draws), so that its loop, its events and
     * its answers stay in this process (`Here`) rather than go through the engine to another runner
     * and back. Its shard moves as any other (a runner dies or joins), and the follower then attaches
     * through the engine. Still a random id: the draw leaves out the shards held elsewhere, about
     * log2(runners) bits of its 122.
     */
    const placed = (draws: (draw: number) => string = () => ids.make("task")): string => {
      let taskId = draws(0)
      if (placement === "id") return taskId
      for (let draw = 1; draw < placementDraws && !holdsShard(taskId); draw++) taskId = draws(draw)
      return taskId
    }

    /**
     * The task a submit with `submitKey` made, when the journal holds it: a retry finds it among the ids the first
     * could have drawn, in the order it drew them (the first few, as it placed it on a shard its runner held).
     */
    const madeBefore = (agentId: string, submitKey: string) =>
      Effect.gen(function*() {
        for (let draw = 0; draw < (placement === "id" ? 1 : placementDraws); draw++) {
          const taskId = keyedTaskId(agentId, submitKey, draw)
          if ((yield* Effect.orDie(journal.run(taskId))) !== undefined) return taskId
        }
        return undefined
      })

    const at: StartDeps = { agents, journal, limits, runs, placed, madeBefore }
    return (task: NewTask): Effect.Effect<string, AgentLimitExceeded> => started(at, task)
  })

/** What a task's start (`started`) needs of `makeStart`. */
interface StartDeps {
  readonly agents: Effect.Effect.Success<typeof AgentEntity.client>
  readonly journal: Journal.Journal["Type"]
  readonly limits: Limits
  readonly runs: Runs
  readonly placed: (draws?: (draw: number) => string) => string
  readonly madeBefore: (agentId: string, submitKey: string) => Effect.Effect<string | undefined>
}

/** A task started (`makeStart`'s), by one generator function for every task (design: Generators on hot paths). */
const started = Effect.fnUntraced(function*(
  at: StartDeps,
  { agentId, processId, prompt, resubmit, submitKey, ...fixed }: NewTask
) {
  // A submit retried with its key is answered with the task the first made: journaled already, its `Run`
  // is sent again (a duplicate is dropped by its owner; one the first never sent, its runner gone, starts it).
  const made = submitKey === undefined || resubmit !== true ? undefined : yield* at.madeBefore(agentId, submitKey)
  if (made !== undefined) {
    yield* at.runs.run(made, agentId)
    return made
  }
  yield* admit(at.journal, at.limits, agentId, prompt)
  const tools = yield* orDieOnEngine(SqlStore.whileBusy(at.agents(agentId).Tools({ processId })))
  // Unguessable as well as unique, and journaled before anyone learns it (as on one machine).
  const taskId = fixed.taskId ??
    (submitKey === undefined ? at.placed() : at.placed((draw) => keyedTaskId(agentId, submitKey, draw)))
  const traceparent = yield* currentTraceparent
  yield* at.journal.started({ runId: taskId, kind: "task", agentId, processId, prompt, tools, traceparent })
  yield* Metrics.submitted(taskId, agentId)
  yield* at.runs.run(taskId, agentId)
  return taskId
})

/** Starts a task on the cluster, as `makeStart` gives it: its id. */
export type Start = (task: NewTask) => Effect.Effect<string, AgentLimitExceeded>
