/**
 * The platform protocol (design: Serving, The platform): the Schemas of every call, event and error, as an `RpcGroup`.
 * Apart from any transport: the WebSocket server, the in-process test client and any faster
 * transport later all speak this group.
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcMiddleware from "@effect/rpc/RpcMiddleware"
import { Context, ParseResult, Schema } from "effect"
import { TypedToolResultFromJson } from "../ToolResult.js"
import * as Toolkit from "../Toolkit.js"
import * as AgentTypes from "../internal/agent/types.js"
import { createHash } from "node:crypto"

// ---------------------------------------------------------------------------------------------
// Errors.

/**
 * `Unauthorized`'s message for a connection without a token the platform knows: what is wrong, and
 * which settings on each side make it right.
 */
export const unknownTokenMessage = "missing or unknown platform token: the serving side sends its PLATFORM_TOKEN, " +
  "which must be one of the platform's tokens, read from PLATFORM_TOKENS (or platform --tokens-file) " +
  "as token:agent pairs, comma-separated"

/** The token is unknown, or bound to another agent. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>("agent-tools/Unauthorized")("Unauthorized", {
  message: Schema.String
}) {}

/** The manifest breaks the limits: every violation, as `Toolkit.make` reports them. */
export class ManifestRejected extends Schema.TaggedError<ManifestRejected>("agent-tools/ManifestRejected")(
  "ManifestRejected",
  { violations: Schema.Array(Toolkit.Violation) }
) {
  override get message(): string {
    return `the platform rejected the manifest: ${this.violations.map((v) => v.message).join("; ")}`
  }
}

/** Too many register/heartbeat/deregister calls for this agent in the window. */
export class LifecycleBudgetExceeded extends Schema.TaggedError<LifecycleBudgetExceeded>(
  "agent-tools/LifecycleBudgetExceeded"
)("LifecycleBudgetExceeded", { agentId: Schema.String, limit: Schema.Number, windowMillis: Schema.Number }) {
  override get message(): string {
    return `agent ${this.agentId} made more than ${this.limit} lifecycle calls in ${this.windowMillis / 1000} s`
  }
}

/**
 * One agent holds as much as the platform lets one agent hold (design: Hostile clients): `limit`
 * names the platform's option, `max` its value, `held` what the agent holds now. Another agent is
 * not held back by it; the agent's next call goes through once some of its tasks have ended.
 */
export class AgentLimitExceeded extends Schema.TaggedError<AgentLimitExceeded>("agent-tools/platform/AgentLimitExceeded")(
  "AgentLimitExceeded",
  { agentId: Schema.String, limit: Schema.String, max: Schema.Number, held: Schema.String }
) {
  override get message(): string {
    return `agent ${this.agentId} holds ${this.held}: the platform's ${this.limit} is ${this.max}; ` +
      `the call goes through once some of its tasks have ended`
  }
}

/**
 * The platform could not do it now (cluster mode): its database, or the runner that owns the task, is away (a
 * restart, an outage). Nothing was done, or what was is found again by a retry (a submit's key); the client tries
 * again (`PlatformClient` does, within a bound: `busyWithin`).
 */
export class PlatformBusy extends Schema.TaggedError<PlatformBusy>("agent-tools/platform/PlatformBusy")("PlatformBusy", {
  operation: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `the platform could not run ${this.operation} now (${this.reason}); try it again`
  }
}

/** No such task for this agent. */
export class UnknownTask extends Schema.TaggedError<UnknownTask>("agent-tools/UnknownTask")("UnknownTask", {
  taskId: Schema.String
}) {
  override get message(): string {
    return `no task ${this.taskId} for this agent`
  }
}

/** `DecideApproval` found nothing to decide: the task does not wait for that call (now), it expired, or it was decided. */
export class NoPendingTaskApproval extends Schema.TaggedError<NoPendingTaskApproval>(
  "agent-tools/platform/NoPendingTaskApproval"
)(
  "NoPendingTaskApproval",
  {
    taskId: Schema.String,
    toolCallId: Schema.String,
    /**
     * The task was started by another task's `exec_agent` call: its calls are decided at the root of the tree,
     * on this task, as this call (design: Agents that call agents).
     */
    decideAt: Schema.optional(Schema.Struct({ taskId: Schema.String, toolCallId: Schema.String }))
  }
) {
  override get message(): string {
    if (this.decideAt !== undefined) {
      return `task ${this.taskId} was started by an exec_agent call of task ${this.decideAt.taskId}: its calls are ` +
        `decided at the root of the tree, on task ${this.decideAt.taskId} as call ${this.decideAt.toolCallId}`
    }
    return `task ${this.taskId} does not wait for approval of call ${this.toolCallId} ` +
      `(it is not among the calls of its last TaskSuspended, it expired, or it was decided already)`
  }
}

/**
 * `DecideApproval` on a platform without a journal: its tasks cannot suspend (nothing durable to go
 * on from), so a served tool that needs approval is asked on the serving side (`Hooks.approval`).
 */
export class ApprovalsNeedJournal extends Schema.TaggedError<ApprovalsNeedJournal>(
  "agent-tools/platform/ApprovalsNeedJournal"
)("ApprovalsNeedJournal", { taskId: Schema.String }) {
  override get message(): string {
    return `task ${this.taskId} cannot wait for approvals: the platform runs without a journal, so a served tool ` +
      `that needs approval is asked on the serving side (Hooks.approval), not through the platform`
  }
}

// ---------------------------------------------------------------------------------------------
// Task events.

/**
 * Where an event stands in its task's stream (design: The model side): offsets grow, also across a
 * platform restart; `AttachTask` with `after` sends the events past it that the platform still holds.
 * The greeting `TaskStarted` of each attachment has none.
 */
const offset = { offset: Schema.optional(Schema.Number) }

/** The task exists; its id is what `AttachTask` needs after a reconnect. */
export const TaskStarted = Schema.TaggedStruct("TaskStarted", { taskId: Schema.String, ...offset })
/** The platform asks the model for turn `step`. */
export const TurnStarted = Schema.TaggedStruct("TurnStarted", { taskId: Schema.String, step: Schema.Number, ...offset })
/** Text the model wrote: a turn's whole text, once the turn is complete. */
export const ModelText = Schema.TaggedStruct("ModelText", { taskId: Schema.String, text: Schema.String, ...offset })
/** A piece of turn `step`'s text as the model writes it (not journaled: a restarted task's turn is whole). */
export const ModelTextDelta = Schema.TaggedStruct("ModelTextDelta", {
  taskId: Schema.String,
  step: Schema.Number,
  text: Schema.String,
  ...offset
})
/** A piece of turn `step`'s reasoning (thinking) as the model writes it. */
export const ReasoningDelta = Schema.TaggedStruct("ReasoningDelta", {
  taskId: Schema.String,
  step: Schema.Number,
  text: Schema.String,
  ...offset
})
/** Turn `step`'s stream broke after some deltas: they are void, and the turn is asked again. */
export const TurnRetried = Schema.TaggedStruct("TurnRetried", {
  taskId: Schema.String,
  step: Schema.Number,
  reason: Schema.String,
  ...offset
})
/** The loop starts a call (a served tool's is then delivered as `ToolCallRequested`). */
export const ToolCallStarted = Schema.TaggedStruct("ToolCallStarted", {
  taskId: Schema.String,
  toolCallId: Schema.String,
  name: Schema.String,
  ...offset
})
/**
 * Run this call and answer with `CompleteToolCall`; it may come again (at least once). `approved`:
 * a person approved it through the platform (`DecideApproval`), so the serving side's
 * `Hooks.approval` does not ask again.
 */
export const ToolCallRequested = Schema.TaggedStruct("ToolCallRequested", {
  taskId: Schema.String,
  toolCallId: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  deadlineAt: Schema.Number,
  approved: Schema.optional(Schema.Boolean),
  /** The platform's span of the call (W3C `traceparent`) while a tracer listens there: the serving side's span continues it. */
  traceparent: Schema.optional(Schema.String),
  ...offset
})
/**
 * What a `ToolCallCompleted` or `TaskCompleted` that leaves a field out means by it: its Schema's defaults, and the
 * codecs that decode the two without Effect's parser (protocol/plainEvents.ts).
 */
export const eventDefaults = {
  cached: (): boolean => false,
  steps: (): number => 0,
  usage: (): { readonly inputTokens: number; readonly outputTokens: number } => ({ inputTokens: 0, outputTokens: 0 })
}
/** A call's outcome, as the model will see it; `cached` when an earlier outcome was reused (design: Per-run reuse). */
export const ToolCallCompleted = Schema.TaggedStruct("ToolCallCompleted", {
  taskId: Schema.String,
  toolCallId: Schema.String,
  name: Schema.String,
  result: TypedToolResultFromJson,
  cached: Schema.optionalWith(Schema.Boolean, { default: eventDefaults.cached }),
  ...offset
})
/**
 * The task is done; `usage` sums the model's tokens (with the prompt cache's counts when the provider
 * gave them). A task submitted with a typed `output` carries the checked JSON `value` of the answer.
 */
export const TaskCompleted = Schema.TaggedStruct("TaskCompleted", {
  taskId: Schema.String,
  output: Schema.String,
  steps: Schema.optionalWith(Schema.Number, { default: eventDefaults.steps }),
  usage: Schema.optionalWith(
    Schema.Struct({
      inputTokens: Schema.Number,
      outputTokens: Schema.Number,
      cacheReadTokens: Schema.optional(Schema.Number),
      cacheWriteTokens: Schema.optional(Schema.Number)
    }),
    { default: eventDefaults.usage }
  ),
  value: Schema.optional(Schema.Unknown),
  ...offset
})
/** The task failed; `reason` says why. */
export const TaskFailed = Schema.TaggedStruct("TaskFailed", { taskId: Schema.String, reason: Schema.String, ...offset })

/**
 * The task was cancelled (design: Cancelling a task): `by` says who (`agent <id>`, a client of its agent, or
 * `operator <name>`, through the operator API), `reason` why (empty when none was given). An end: its running calls
 * were told `ToolCallCancelled`, the tasks its `exec_agent` calls started were cancelled too, and it is never run again.
 */
export const TaskCancelled = Schema.TaggedStruct("TaskCancelled", {
  taskId: Schema.String,
  by: Schema.String,
  reason: Schema.String,
  ...offset
})

/**
 * The call `toolCallId` delivered on this stream is cancelled (its task is): the serving process interrupts it
 * if it runs (its handler's scope closes, its finalizers run) and answers nothing.
 */
export const ToolCallCancelled = Schema.TaggedStruct("ToolCallCancelled", {
  taskId: Schema.String,
  toolCallId: Schema.String,
  ...offset
})

/**
 * One hop from a task down to a call that waits for approval: the call of that task (or run), and its
 * tool. The agent loop's own (`Agent`'s), as the platform's tasks are runs of that loop.
 */
export const ApprovalHop = AgentTypes.ApprovalHop

/**
 * A call a suspended task waits to have approved or denied: the agent loop's (`toolCallId` is what
 * `DecideApproval` takes), its `path` absent from an older platform.
 */
export const PendingApproval = Schema.Struct({
  ...AgentTypes.PendingApproval.fields,
  path: Schema.optional(Schema.Array(ApprovalHop))
})

/**
 * The task waits for a person (a platform with a journal; design: Durable runs): each call of
 * `pending` needs approval (`DecideApproval`). Not an end: the task and its stream stay; once every
 * call is decided, the task goes on (an approved call is delivered, a denied one is read by the model).
 */
export const TaskSuspended = Schema.TaggedStruct("TaskSuspended", {
  taskId: Schema.String,
  pending: Schema.Array(PendingApproval),
  ...offset
})

/**
 * The last event of a stream whose task another attachment of the same agent took over (a process
 * re-attaching after a reconnect or a restart): the task goes on, on the other stream; this one ends.
 */
export const TaskTakenOver = Schema.TaggedStruct("TaskTakenOver", { taskId: Schema.String, reason: Schema.String, ...offset })

/**
 * The task waits, and `reason` says for what: in cluster mode, for the platform's database, which cannot be
 * reached (in the driver's words; the task goes on from its journal once it is back); in both modes, for the
 * process that held the task to attach again, or for a serving process of its agent to take its calls (the one
 * given them went away, or none that serves their tools is connected). Not an end: its next events say it goes on.
 */
export const TaskWaiting = Schema.TaggedStruct("TaskWaiting", { taskId: Schema.String, reason: Schema.String, ...offset })

/**
 * The task's call `toolCallId` (its `exec_agent`, design: Agents that call agents) started a task of
 * agent `agentId`, `childTaskId`, run by that agent's serving processes: a client with that agent's
 * token can attach to it. Not on a `"calls"` stream.
 */
export const SubTaskStarted = Schema.TaggedStruct("SubTaskStarted", {
  taskId: Schema.String,
  toolCallId: Schema.String,
  childTaskId: Schema.String,
  agentId: Schema.String,
  ...offset
})

/**
 * The task `childTaskId` of call `toolCallId` ended (`outcome`: it answered, it failed, or the call's deadline came
 * first and it was stopped); the call's result follows. Not on a `"calls"` stream.
 */
export const SubTaskEnded = Schema.TaggedStruct("SubTaskEnded", {
  taskId: Schema.String,
  toolCallId: Schema.String,
  childTaskId: Schema.String,
  outcome: Schema.Literal("completed", "failed", "timed_out"),
  ...offset
})

/** What a task's stream carries. */
export const TaskEvent = Schema.Union(
  TaskStarted,
  TurnStarted,
  ModelText,
  ModelTextDelta,
  ReasoningDelta,
  TurnRetried,
  ToolCallStarted,
  ToolCallRequested,
  ToolCallCompleted,
  TaskCompleted,
  TaskFailed,
  TaskCancelled,
  ToolCallCancelled,
  TaskTakenOver,
  TaskSuspended,
  TaskWaiting,
  SubTaskStarted,
  SubTaskEnded
)
/** What a task's stream carries. */
export type TaskEvent = typeof TaskEvent.Type

/** A task's end: what its stream ends with. */
export type TaskEnd = Extract<TaskEvent, { _tag: "TaskCompleted" | "TaskFailed" | "TaskCancelled" }>

/** Whether `event` is a task's end (`TaskCompleted`, `TaskFailed` or `TaskCancelled`). */
export const isTaskEnd = (event: { readonly _tag: string }): event is TaskEnd =>
  event._tag === "TaskCompleted" || event._tag === "TaskFailed" || event._tag === "TaskCancelled"

/** A task stream's last event: the task's end, or another attachment took the task over. */
export const endsTaskStream = (event: { readonly _tag: string }): boolean =>
  isTaskEnd(event) || event._tag === "TaskTakenOver"

// ---------------------------------------------------------------------------------------------
// Calls.

/** Who makes a call: the agent, and which of its processes (a process registers its own tools). */
export interface Caller {
  readonly agentId: string
  readonly processId: string
}

/** `Caller` as a payload's fields. */
const callerFields = { agentId: Schema.String, processId: Schema.String }

/**
 * A call's payload, named for it: a payload that does not decode says which call's it was.
 * `RpcClient` checks every call's payload with `make`, whose checker `Schema` builds anew at each
 * call when a field transforms (a payload's type side is not memoized): here the same check, with
 * its checker built once. (No payload field has a constructor default for `make` to fill in.)
 */
const payload = <Fields extends Schema.Struct.Fields>(call: string, fields: Fields): Schema.Struct<Fields> => {
  const schema = Schema.Struct(fields).annotations({ identifier: `${call} payload` })
  const check = ParseResult.validateSync(Schema.typeSchema(schema))
  return class extends schema {
    static override make: typeof schema.make = (props) => check(props)
  }
}

/** The agent a token is bound to, provided to handlers by the authentication middleware. */
export class AuthenticatedAgent extends Context.Tag("agent-tools/platform/AuthenticatedAgent")<
  AuthenticatedAgent,
  { readonly agentId: string }
>() {}

/** Reads `authorization: Bearer <token>` and binds the call to the token's agent. */
export class Authentication extends RpcMiddleware.Tag<Authentication>()("agent-tools/platform/Authentication", {
  failure: Unauthorized,
  provides: AuthenticatedAgent,
  requiredForClient: true
}) {}

/**
 * Which events a task's stream carries: `"all"` (the default: every event but the deltas), `"calls"`:
 * only what a serving process needs to run the task (`TaskStarted`, `ToolCallRequested`,
 * `TaskSuspended`, and the last event), or `"deltas"`: every event, the turns' deltas
 * (`ModelTextDelta`, `ReasoningDelta`, `TurnRetried`) and `ToolCallStarted` too.
 */
export const EventsWanted = Schema.Literal("all", "calls", "deltas")
/** Which events a task's stream carries. */
export type EventsWanted = typeof EventsWanted.Type

/**
 * A typed final output asked of a task (design: The model side): the model's answer must be JSON
 * that `schema` (JSON Schema) accepts; one that is not goes back to the model with its issues,
 * `retries` times at most (default 2), then the task fails. `TaskCompleted.value` is the answer.
 */
export const TaskOutput = Schema.Struct({ schema: Schema.Unknown, retries: Schema.optional(Schema.Number) })
/** A typed final output asked of a task. */
export type TaskOutput = typeof TaskOutput.Type

/** The result of one delivered call. */
export const ToolCallResult = Schema.Struct({
  taskId: Schema.String,
  toolCallId: Schema.String,
  result: TypedToolResultFromJson
})
/** The result of one delivered call. */
export type ToolCallResult = typeof ToolCallResult.Type

/**
 * What the platform gives a serving process to run, on its `WatchAssignments` stream. Without `call`, a task
 * (design: Agents that call agents): a task of its agent that another agent's task started; the process
 * attaches to it (`AttachTask`) and runs its calls. With `call` (given only to a process that watches with
 * `calls: true`), one call of a task of its agent that the process does not hold (design: The platform): it
 * runs it as a call delivered on a task's stream (deduplicated by task and call id) and answers it with
 * `CompleteToolCall` on the same connection; it may come again (at least once).
 */
export const Assignment = Schema.Struct({
  taskId: Schema.String,
  call: Schema.optional(ToolCallRequested),
  /** The call `toolCallId` given earlier on this stream is cancelled (its task is): interrupt it if it runs. */
  cancelled: Schema.optional(Schema.String)
})
/** A task, or one call of a task, the platform gives a serving process to run. */
export type Assignment = typeof Assignment.Type

/** A submit key: 8 to 128 letters, digits, `-` or `_` (a UUID is one). */
export const submitKeyPattern = /^[A-Za-z0-9_-]{8,128}$/

/**
 * The ids a submit with `submitKey` may make in cluster mode, the `draw`-th of them: found again by a retry of it
 * (on any runner, after a restart); derived from the agent and the key, so that two agents' keys never meet, and as
 * unguessable as the key. A runner places the task on a shard it holds by drawing (as it draws an unkeyed task's id).
 */
export const keyedTaskId = (agentId: string, submitKey: string, draw: number): string => {
  const hex = createHash("sha256").update(`${agentId}\n${submitKey}\n${draw}`).digest("hex")
  // Shaped as the platform's other ids (`task-<UUID>`), so that whoever reads them finds one form.
  return `task-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`
}

/** The platform protocol. */
export class PlatformRpcs extends RpcGroup.make(
  Rpc.make("Register", {
    payload: payload("Register", { ...callerFields, manifest: Schema.Array(Toolkit.ManifestEntry), manifestHash: Schema.String }),
    // The interval the platform judges silence by: the serving process beats on it (an older platform may not say).
    success: Schema.Struct({ heartbeatIntervalMillis: Schema.optional(Schema.Number) }),
    error: Schema.Union(ManifestRejected, LifecycleBudgetExceeded, Unauthorized)
  }),
  Rpc.make("Heartbeat", {
    payload: payload("Heartbeat", { ...callerFields, manifestHash: Schema.String }),
    // `known: false`: the platform does not hold this manifest (it restarted, or it expired): register again.
    success: Schema.Struct({ known: Schema.Boolean }),
    error: Schema.Union(LifecycleBudgetExceeded, Unauthorized)
  }),
  Rpc.make("Deregister", {
    payload: payload("Deregister", callerFields),
    error: Schema.Union(LifecycleBudgetExceeded, Unauthorized)
  }),
  Rpc.make("SubmitTask", {
    payload: payload("SubmitTask", {
      ...callerFields,
      prompt: Schema.String,
      events: Schema.optional(EventsWanted),
      output: Schema.optional(TaskOutput),
      // The client's key for this submit, the same in each of its retries: a repeat is answered with the task the
      // first made (`submitKeyPattern`).
      submitKey: Schema.optional(Schema.String.pipe(Schema.pattern(submitKeyPattern))),
      // A retry of a submit with this key (the first one's answer was lost): the platform looks for the task it made.
      resubmit: Schema.optional(Schema.Boolean)
    }),
    success: TaskEvent,
    error: Schema.Union(AgentLimitExceeded, Unauthorized, PlatformBusy),
    stream: true
  }),
  Rpc.make("AttachTask", {
    // `after`: the offset of the last event the client has; it gets the later ones the platform holds.
    payload: payload("AttachTask", {
      ...callerFields,
      taskId: Schema.String,
      events: Schema.optional(EventsWanted),
      after: Schema.optional(Schema.Number)
    }),
    success: TaskEvent,
    error: Schema.Union(UnknownTask, Unauthorized),
    stream: true
  }),
  // One or more results: a client sends the results ready at the same moment together.
  Rpc.make("CompleteToolCall", {
    payload: payload("CompleteToolCall", { ...callerFields, results: Schema.Array(ToolCallResult) }),
    error: Schema.Union(UnknownTask, Unauthorized)
  }),
  // The tasks the platform gives this process to run, for as long as the stream is open; with `calls: true`, also
  // single calls of the agent's tasks for the tools it serves (an older process, which does not say so, gets none).
  Rpc.make("WatchAssignments", {
    payload: payload("WatchAssignments", { ...callerFields, calls: Schema.optional(Schema.Boolean) }),
    success: Assignment,
    error: Unauthorized,
    stream: true
  }),
  // Cancels a task of the token's agent (design: Cancelling a task): its calls are interrupted where they run, its
  // child tasks cancelled, its end `TaskCancelled`. `cancelled: false`: it had ended already.
  Rpc.make("CancelTask", {
    payload: payload("CancelTask", { taskId: Schema.String, reason: Schema.optional(Schema.String) }),
    success: Schema.Struct({ cancelled: Schema.Boolean }),
    error: Schema.Union(UnknownTask, Unauthorized, PlatformBusy)
  }),
  // A person's decision on a call a suspended task waits for; the agent is the token's.
  Rpc.make("DecideApproval", {
    payload: payload("DecideApproval", {
      taskId: Schema.String,
      toolCallId: Schema.String,
      approved: Schema.Boolean,
      reason: Schema.optional(Schema.String),
      // A retry of this decision after `PlatformBusy`: the same decision by the same author, found made, stands.
      retried: Schema.optional(Schema.Boolean)
    }),
    error: Schema.Union(UnknownTask, NoPendingTaskApproval, ApprovalsNeedJournal, Unauthorized, PlatformBusy)
  })
).middleware(Authentication) {}

/** The header that carries the token. */
export const authorizationHeader = "authorization"
