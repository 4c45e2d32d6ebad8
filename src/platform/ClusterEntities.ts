/**
 * The entities of cluster mode (Cluster.ts): an agent, sharded by agent id, and a task, sharded by task
 * id, as the engine knows them; a call to one that the engine could not carry, a defect of the call;
 * and whether a task's shard is this runner's.
 */
import { AlreadyProcessingMessage, MailboxFull, PersistenceError } from "@effect/cluster/ClusterError"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as EntityId from "@effect/cluster/EntityId"
import type * as Sharding from "@effect/cluster/Sharding"
import * as Rpc from "@effect/rpc/Rpc"
import { Cause, Data, Effect, Schema } from "effect"
import * as Journal from "../Journal.js"
import {
  ApprovalsNeedJournal,
  EventsWanted,
  LifecycleBudgetExceeded,
  ManifestRejected,
  NoPendingTaskApproval,
  TaskEvent,
  ToolCallResult,
  UnknownTask
} from "../protocol/Protocol.js"
import * as Toolkit from "../Toolkit.js"

/** An agent: its processes, their tools and its lifecycle budget. The entity id is the agent id. */
export const AgentEntity = Entity.make("agent-tools/Agent", [
  Rpc.make("Register", {
    payload: { processId: Schema.String, manifest: Schema.Array(Toolkit.ManifestEntry), manifestHash: Schema.String },
    success: Schema.Struct({ heartbeatIntervalMillis: Schema.Number }),
    error: Schema.Union(ManifestRejected, LifecycleBudgetExceeded)
  }),
  Rpc.make("Heartbeat", {
    payload: { processId: Schema.String, manifestHash: Schema.String },
    success: Schema.Struct({ known: Schema.Boolean }),
    error: LifecycleBudgetExceeded
  }),
  Rpc.make("Deregister", { payload: { processId: Schema.String }, error: LifecycleBudgetExceeded }),
  // The tools a new task of `processId` is offered.
  Rpc.make("Tools", { payload: { processId: Schema.String }, success: Journal.TaskTools })
])

/**
 * What the owner of a task sends a follower between events, every `ClusterTiming.followAlive.every`: a
 * stream that goes quiet for longer (its owner was replaced, or its entity stopped without a word)
 * is given up and attached again, never waited on.
 */
export const Alive = Schema.TaggedStruct("Alive", {})

/** What a follower attaching to a task sends its owner. */
export interface AttachPayload {
  readonly agentId: string
  readonly events?: EventsWanted | undefined
  readonly attachmentId: string
  readonly reattach: boolean
  readonly connection?: string | undefined
  readonly fromStart?: boolean | undefined
}

/** A task: its loop, its events, its answers and its approvals. The entity id is the task id. */
export const TaskEntity = Entity.make("agent-tools/Task", [
  // Runs the loop to the task's end, on the owner of the task's shard. Not a persisted message: the journal
  // is what makes a task durable, and the owner sends it only to itself (ClusterStart.ts, `makeRuns`), to a
  // task of its shards it was told of (`TakeUp`), or found open in the journal on taking its shard (Cluster.ts).
  Rpc.make("Run", { payload: { agentId: Schema.String } }),
  // Asks the owner of the task's shard to run it (its `Run` sent to itself) and answers at once. Lost with
  // its owner, the next owner of the shard finds the task open in the journal as it takes the shard.
  Rpc.make("TakeUp", { payload: { agentId: Schema.String } }),
  Rpc.make("Attach", {
    payload: {
      agentId: Schema.String,
      events: Schema.optional(EventsWanted),
      // The follower's attachment, the same in each of its attaches; `reattach` after the first (see `follow`).
      attachmentId: Schema.String,
      reattach: Schema.Boolean,
      // The client's connection on its front: the only one whose answers are taken (TaskAnswers.ts, `answersFrom`).
      connection: Schema.optional(Schema.String),
      // A task just submitted: every event it has emitted so far first (its loop started before the attach).
      fromStart: Schema.optional(Schema.Boolean)
    },
    success: Schema.Union(TaskEvent, Alive),
    error: UnknownTask,
    stream: true
  }),
  // Not a persisted message: the owner journals it (see `tasks.answer`), and one lost on the way is
  // given again when the call is delivered again. Persisted and keyed by the call id, as first built,
  // an answer sent again after a runner died waited for the reply of the first one, stuck with the
  // dead runner's shard: the tasks of the failover test then stalled about 55 s.
  Rpc.make("Answer", {
    payload: { agentId: Schema.String, result: ToolCallResult, connection: Schema.String },
    error: UnknownTask
  }),
  Rpc.make("Decide", {
    payload: {
      agentId: Schema.String,
      toolCallId: Schema.String,
      approved: Schema.Boolean,
      reason: Schema.optional(Schema.String),
      retried: Schema.optional(Schema.Boolean),
      /** Who decides, journaled with it: an operator's name (the operator API); absent, the agent. */
      by: Schema.optional(Schema.String)
    },
    error: Schema.Union(UnknownTask, NoPendingTaskApproval, ApprovalsNeedJournal)
  }),
  // Cancels the task where it runs (design: Cancelling a task), `by` who; false if it had ended already.
  Rpc.make("Cancel", {
    payload: { agentId: Schema.String, by: Schema.String, reason: Schema.String },
    success: Schema.Boolean,
    error: UnknownTask
  }),
  // Stops the task (the `exec_agent` call that started it ended first). Persisted: a runner that dies
  // with it unread leaves it to the next owner of the task's shard.
  Rpc.make("Stop", { payload: { agentId: Schema.String, reason: Schema.String }, primaryKey: () => "stop" })
    .annotate(ClusterSchema.Persisted, true),
  // A call of the task (one of a tree) was decided at the tree's root, on its runner, and journaled: the task
  // goes on once it waits for nothing more. Persisted, as `Stop`: the next owner takes the task up from the
  // journal anyway, and a message it reads then finds nothing waiting.
  Rpc.make("Decided", { payload: { toolCallId: Schema.String }, primaryKey: ({ toolCallId }) => `decided/${toolCallId}` })
    .annotate(ClusterSchema.Persisted, true)
])

/** The owner of an agent or task stopped before it answered (its shard moved, its locks lost with the database). */
export class EngineStopped extends Data.TaggedError("EngineStopped") {
  override get message(): string {
    return "the owner of the agent or task stopped before it answered"
  }
}

/** The engine could not take a message (its storage, a full mailbox). */
export type EngineError = AlreadyProcessingMessage | MailboxFull | PersistenceError

const isEngineError = (error: unknown): error is EngineError =>
  error instanceof AlreadyProcessingMessage || error instanceof MailboxFull || error instanceof PersistenceError

/**
 * An engine failure is a defect of the call (its answer is a failure the caller can retry), not one of
 * its errors; so is a reply the engine cut short (the entity was stopped under the call, its shard
 * locks lost while the database was away): the caller must see a failure, never its own call
 * interrupted (an interrupted `CompleteToolCall` stopped a serving process's answers for good).
 */
export const orDieOnEngine = <A, E, R>(effect: Effect.Effect<A, E | EngineError, R>): Effect.Effect<A, Exclude<E, EngineError>, R> =>
  Effect.catchIf(effect, isEngineError, Effect.die).pipe(
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.die(new EngineStopped())
        : Effect.failCause(cause)
    )
  )

/** Whether the task's shard is this runner's. */
export const holdsShardOf = (sharding: Sharding.Sharding["Type"]) => (taskId: string): boolean => {
  const entityId = EntityId.make(taskId)
  return sharding.hasShardId(sharding.getShardId(entityId, TaskEntity.getShardGroup(entityId)))
}
