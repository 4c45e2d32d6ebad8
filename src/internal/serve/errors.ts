/**
 * Why serving failed, and how a followed task can end badly: the errors `Serve` gives.
 */
import { Schema } from "effect"
import { type StoreUnavailable } from "../../Idempotency.js"
import type {
  AgentLimitExceeded,
  LifecycleBudgetExceeded,
  ManifestRejected,
  Unauthorized,
  UnknownTask
} from "../../protocol/Protocol.js"
import { type MissingSetting, PlatformUnavailable } from "../../PlatformClient.js"

/** Why serving failed. */
export type ServeError =
  | MissingSetting
  | StoreUnavailable
  | Unauthorized
  | ManifestRejected
  | LifecycleBudgetExceeded
  | AgentLimitExceeded
  | UnknownTask
  | TaskLost
  | PlatformUnavailable

/**
 * The platform no longer knows a task this process was following (it restarted without a journal,
 * or forgot the task): the task and its pending calls are lost.
 */
export class TaskLost extends Schema.TaggedError<TaskLost>("agent-tools/TaskLost")("TaskLost", {
  taskId: Schema.String
}) {
  override get message(): string {
    return `the platform no longer knows task ${this.taskId} (it restarted without a journal, or forgot the task): ` +
      `the task and its pending calls are lost; submit it again`
  }
}

/** A task ended with `TaskFailed`. */
export class TaskFailedError extends Schema.TaggedError<TaskFailedError>("agent-tools/TaskFailedError")("TaskFailedError", {
  taskId: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `task ${this.taskId} failed: ${this.reason}`
  }
}

/** Another attach of the task (by this agent, another process or connection) took it over: it goes on there. */
export class TaskTakenOverError extends Schema.TaggedError<TaskTakenOverError>("agent-tools/TaskTakenOverError")(
  "TaskTakenOverError",
  { taskId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `task ${this.taskId} was taken over: ${this.reason}`
  }
}
