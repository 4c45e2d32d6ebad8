/**
 * The front of a runner (Cluster.ts): what the runner a process is connected to does with its calls,
 * `Handlers.Backend` on the entities, each call going to the owner of its agent's or task's shard (or
 * taken here, when this runner owns the task), a task's events through its follower.
 */
import { Cause, Effect } from "effect"
import { Ids } from "../Ids.js"
import { formatDuration } from "../internal/util/duration.js"
import type { ToolCallResult } from "../protocol/Protocol.js"
import { Timing } from "../Timing.js"
import { clusterAnswerWithin } from "./ClusterTiming.js"
import * as ClusterAgentCalls from "./ClusterAgentCalls.js"
import { Drain } from "./ClusterDrain.js"
import { AgentEntity, orDieOnEngine, TaskEntity } from "./ClusterEntities.js"
import { followOn, type Here, makeHere, watchDatabase } from "./ClusterFollow.js"
import type { Start } from "./ClusterStart.js"
import type * as ClusterTasks from "./ClusterTasks.js"
import type * as Handlers from "./Handlers.js"

/**
 * An answer on its way to its task's owner: one not taken (a defect: the owner stopped under it), or
 * not within `clusterAnswerWithin`, is let go with a warning; its call is delivered again, and answered again.
 */
const letGoUntaken = <E>(result: ToolCallResult, answer: Effect.Effect<void, E>): Effect.Effect<void, E> =>
  answer.pipe(
    Effect.timeoutFailCause({
      duration: clusterAnswerWithin,
      onTimeout: () => Cause.die(new Error(`no reply within ${formatDuration(clusterAnswerWithin)}`))
    }),
    Effect.catchAllDefect((defect) =>
      Effect.logWarning(
        `task ${result.taskId}: its owner did not take the answer to call ${result.toolCallId} ` +
          `(${defect instanceof Error ? defect.message : String(defect)}); the call will be delivered again`
      )
    )
  )

/**
 * Answers: each its own message, to its task's owner (taken here when this runner owns it); one for
 * an unknown task fails after the others.
 */
const completeOn = (
  tasks: Effect.Effect.Success<typeof TaskEntity.client>,
  here: Here
): Handlers.Backend["complete"] =>
(agentId, results, connection) => completed(tasks, here, agentId, results, connection)

/** `completeOn`'s answers, by one generator function for every answer (design: Generators on hot paths). */
const completed = Effect.fnUntraced(function*(
  tasks: Effect.Effect.Success<typeof TaskEntity.client>,
  here: Here,
  agentId: string,
  results: ReadonlyArray<ToolCallResult>,
  connection: string
) {
  const answer = (result: ToolCallResult) =>
    Effect.either(letGoUntaken(
      result,
      here.owns(result.taskId)
        ? here.tasks.answer(agentId, result, connection, true)
        : orDieOnEngine(tasks(result.taskId).Answer({ agentId, result, connection }))
    ))
  // One answer, the usual: in this fiber (Effect.forEach of one, concurrent, forks two: 110 of its Effect steps).
  const outcomes = results.length === 1
    ? [yield* answer(results[0]!)]
    : yield* Effect.forEach(results, answer, { concurrency: "unbounded" })
  const unknown = outcomes.find((outcome) => outcome._tag === "Left")
  if (unknown !== undefined && unknown._tag === "Left") return yield* unknown.left
})

/**
 * `Handlers.Backend` on the entities: each call goes to the owner of its agent's or task's shard. A call
 * (other than a task's events) is in flight for the runner's drain (ClusterDrain.ts) until it answers.
 */
export const clusterBackend = (held: ClusterTasks.ClusterTasks, started: Start) =>
  Effect.gen(function*() {
    const agents = yield* AgentEntity.client
    const tasks = yield* TaskEntity.client
    const here = yield* makeHere(held)
    const ids = yield* Ids
    const policy = yield* Timing
    const { away, unreachable } = yield* watchDatabase
    const follow = followOn({ tasks, here, ids, policy, away, unreachable })
    const { track } = yield* Drain

    return {
      register: ({ agentId, ...payload }) => track(orDieOnEngine(agents(agentId).Register(payload))),
      heartbeat: ({ agentId, ...payload }) => track(orDieOnEngine(agents(agentId).Heartbeat(payload))),
      deregister: ({ agentId, processId }) => track(orDieOnEngine(agents(agentId).Deregister({ processId }))),
      submit: (payload) =>
        Effect.flatMap(
          started(payload),
          (taskId) =>
            follow(payload.agentId, taskId, payload.events, payload.connection, Effect.die, true, payload.writeEvents)
        ),
      attach: ({ agentId, connection, events, taskId, writeEvents }) =>
        follow(agentId, taskId, events, connection, Effect.fail, false, writeEvents),
      complete: (agentId, results, connection) => track(completeOn(tasks, here)(agentId, results, connection)),
      decide: (agentId, { taskId, ...decision }) => track(orDieOnEngine(tasks(taskId).Decide({ agentId, ...decision }))),
      // Goes to the task's owner, where its loop runs and its calls were delivered.
      cancel: (agentId, { taskId, ...cancel }) => track(orDieOnEngine(tasks(taskId).Cancel({ agentId, ...cancel }))),
      // A process watches on the runner it is connected to; its tasks come from the owner of its agent's shard.
      watchAssignments: ClusterAgentCalls.watchOn(yield* ClusterAgentCalls.AssignmentsEntity.client)
    } satisfies Handlers.Backend
  })
