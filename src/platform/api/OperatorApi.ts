/**
 * The operator API's description (docs: operations): every route, its parameters, answers and errors as
 * Schemas, in one `HttpApi` under `/api/v1`. The server (OperatorServer.ts) serves it from these Schemas and
 * its OpenAPI document is made from them (`OpenApi.fromApi`), so the two cannot differ; a client can be made
 * from it too (`HttpApiClient.make(OperatorApi, { baseUrl })`).
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import { Context, Schema } from "effect"
import { type OperatorRole, operatorRoles } from "../Options.js"
import { prefix } from "./Listener.js"

// --- errors: each with its status, and the reason a person reads ---

const reason = { reason: Schema.String }

/** No operator token, or one the platform does not know (401). */
export class OperatorUnauthorized extends Schema.TaggedError<OperatorUnauthorized>(
  "agent-tools/platform/OperatorUnauthorized"
)("OperatorUnauthorized", reason, HttpApiSchema.annotations({ status: 401 })) {}

/** The token's role may not do this, or the request is not from this site (403). */
export class OperatorForbidden extends Schema.TaggedError<OperatorForbidden>("agent-tools/platform/OperatorForbidden")(
  "OperatorForbidden",
  reason,
  HttpApiSchema.annotations({ status: 403 })
) {}

/** The task, or the approval, is not known here (404). */
export class OperatorNotFound extends Schema.TaggedError<OperatorNotFound>("agent-tools/platform/OperatorNotFound")(
  "OperatorNotFound",
  reason,
  HttpApiSchema.annotations({ status: 404 })
) {}

/** The task is not in a state this can be done in: ended, or not waiting for that decision (409). */
export class OperatorConflict extends Schema.TaggedError<OperatorConflict>("agent-tools/platform/OperatorConflict")(
  "OperatorConflict",
  reason,
  HttpApiSchema.annotations({ status: 409 })
) {}

/** A query the API cannot read: a cursor it did not give, a time it cannot parse (400). */
export class OperatorBadRequest extends Schema.TaggedError<OperatorBadRequest>("agent-tools/platform/OperatorBadRequest")(
  "OperatorBadRequest",
  reason,
  HttpApiSchema.annotations({ status: 400 })
) {}

/** This platform cannot do it (no journal, cluster mode): the reason says what is missing (501). */
export class OperatorNotImplemented extends Schema.TaggedError<OperatorNotImplemented>(
  "agent-tools/platform/OperatorNotImplemented"
)("OperatorNotImplemented", reason, HttpApiSchema.annotations({ status: 501 })) {}

/** The journal's database cannot be read now (503). */
export class OperatorUnavailable extends Schema.TaggedError<OperatorUnavailable>(
  "agent-tools/platform/OperatorUnavailable"
)("OperatorUnavailable", reason, HttpApiSchema.annotations({ status: 503 })) {}

// --- who is calling ---

/** The operator a request's token names: who they are (journaled as the author of a decision) and their role. */
export class Operator extends Context.Tag("agent-tools/platform/Operator")<Operator, {
  readonly name: string
  readonly role: OperatorRole
}>() {}

/** `Authorization: Bearer <operator token>` on every route but the OpenAPI document's. */
export class OperatorAuth extends HttpApiMiddleware.Tag<OperatorAuth>()("agent-tools/platform/OperatorAuth", {
  failure: OperatorUnauthorized,
  provides: Operator,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

// --- what the routes answer ---

const Time = Schema.String.annotations({ description: "ISO 8601, UTC", examples: ["2025-01-31T09:30:00.000Z"] })
const Usage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  cacheReadTokens: Schema.optional(Schema.Number),
  cacheWriteTokens: Schema.optional(Schema.Number)
})

/** A task's status: `waiting-for-approval` while it is suspended until a person decides. */
export const TaskStatus = Schema.Literal("running", "waiting-for-approval", "ended")

/** A task in a listing. */
export const TaskSummary = Schema.Struct({
  taskId: Schema.String,
  agentId: Schema.String,
  processId: Schema.String,
  status: TaskStatus,
  /** How it ended, once it did. */
  outcome: Schema.optional(Schema.Literal("completed", "failed", "cancelled")),
  createdAt: Time,
  endedAt: Schema.optional(Time),
  /** The W3C trace id it was submitted under, when a tracer listened. */
  traceId: Schema.optional(Schema.String)
})

/** A page of tasks, newest first; `next` is the cursor of the page after it, absent on the last. */
export const TaskPage = Schema.Struct({ tasks: Schema.Array(TaskSummary), next: Schema.optional(Schema.String) })

/** A model turn as journaled: its text, the calls it asked for, its tokens (with the prompt cache's when given). */
export const TurnView = Schema.Struct({
  step: Schema.Number,
  at: Schema.optional(Time),
  text: Schema.optional(Schema.String),
  toolCalls: Schema.Array(Schema.Struct({ id: Schema.String, name: Schema.String })),
  finishReason: Schema.String,
  usage: Usage
})

/**
 * How a call came out: `pending` (no answer yet), `succeeded`, `failed` (`failure` names the kind), `timed-out`,
 * `outcome-unknown` (interrupted after it started, or found started and unanswered when the task was taken back),
 * `denied` (a person or the expiry refused it), `reused` (an earlier outcome of the same idempotent call).
 */
export const CallOutcome = Schema.Literal(
  "pending",
  "succeeded",
  "failed",
  "timed-out",
  "outcome-unknown",
  "denied",
  "reused"
)

/** A call as journaled: when it started and ended, how, and its answer. */
export const CallView = Schema.Struct({
  toolCallId: Schema.String,
  name: Schema.String,
  arguments: Schema.String,
  deadlineAt: Time,
  startedAt: Schema.optional(Time),
  endedAt: Schema.optional(Time),
  durationMillis: Schema.optional(Schema.Number),
  outcome: CallOutcome,
  /** The failure's kind (`TimedOut`, `HandlerFailed`, ...) when it failed. */
  failure: Schema.optional(Schema.String),
  /** The error text the model read, when it failed. */
  error: Schema.optional(Schema.String),
  value: Schema.optional(Schema.Unknown)
})

/** An approval a task asked for, and its decision: who gave it, when, why. */
export const ApprovalView = Schema.Struct({
  toolCallId: Schema.String,
  toolName: Schema.String,
  input: Schema.Unknown,
  decision: Schema.Literal("pending", "approved", "denied"),
  reason: Schema.optional(Schema.String),
  askedAt: Schema.optional(Time),
  expiresAt: Time,
  decidedBy: Schema.optional(Schema.String),
  decidedAt: Schema.optional(Time)
})

/**
 * A task as a timeline from its journal: its turns, calls and approvals, while it runs and once it ended (until the
 * retention sweep forgets it, `keepEndedTasks`), and its final event once it ended.
 */
export const TaskView = Schema.Struct({
  ...TaskSummary.fields,
  prompt: Schema.String,
  tools: Schema.Array(Schema.String),
  /** The model's tokens: the final event's once it ended, else the journaled turns' sum. */
  usage: Usage,
  turns: Schema.Array(TurnView),
  calls: Schema.Array(CallView),
  approvals: Schema.Array(ApprovalView),
  /** The tasks its `exec_agent` calls started. */
  children: Schema.Array(Schema.Struct({ taskId: Schema.String, agentId: Schema.String, status: TaskStatus })),
  /** The final event (`TaskCompleted` or `TaskFailed`), once it ended. */
  final: Schema.optional(Schema.Unknown)
})

/** An approval waiting for a person, named as it is decided: at the root task of a tree (`a1/r1` for a child's). */
export const PendingApprovalView = Schema.Struct({
  taskId: Schema.String,
  toolCallId: Schema.String,
  agentId: Schema.String,
  toolName: Schema.String,
  input: Schema.Unknown,
  askedAt: Schema.optional(Time),
  expiresAt: Time
})

/** A decision on an approval; `reason` is what the model reads of a denial. */
export const Decision = Schema.Struct({
  decision: Schema.Literal("approve", "deny"),
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(2000)))
})

/** The decision as journaled. */
export const Decided = Schema.Struct({
  taskId: Schema.String,
  toolCallId: Schema.String,
  decision: Schema.Literal("approved", "denied"),
  decidedBy: Schema.String,
  decidedAt: Time
})

/** Why a task is cancelled; the task's end (`TaskCancelled`) says it, with the operator's name. */
export const Cancel = Schema.Struct({ reason: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))) })

/** A served process of an agent, as the platform holds it. */
export const ProcessView = Schema.Struct({
  processId: Schema.String,
  lastHeartbeatAt: Time,
  /** Heard from within 3 heartbeat intervals: its tools are offered to models. */
  live: Schema.Boolean,
  /** It watches for tasks to run (`WatchAssignments`). */
  watching: Schema.Boolean,
  tools: Schema.Array(Schema.String),
  manifestBytes: Schema.Number,
  manifestHash: Schema.String
})

const Held = Schema.Struct({ held: Schema.Number, max: Schema.Number })

/** An agent: its processes, connections, tools, and what it holds against its limits. */
export const AgentView = Schema.Struct({
  agentId: Schema.String,
  processes: Schema.Array(ProcessView),
  /** Its open WebSocket connections to this platform process. */
  connections: Schema.Number,
  /** The tools its tasks' models are offered now. */
  tools: Schema.Array(Schema.String),
  tasks: Held,
  promptBytes: Held,
  manifestBytes: Held
})

// --- the routes ---

const taskId = HttpApiSchema.param("taskId", Schema.String)
const toolCallId = HttpApiSchema.param("toolCallId", Schema.String)
const isoTime = Schema.String.annotations({ description: "ISO 8601, or epoch milliseconds" })

/** A Server-Sent Events stream: its events' ids resume it (`Last-Event-ID`). */
const EventStream = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" }))
  .annotations({
    description: "Server-Sent Events: each has an id (send the last one as Last-Event-ID to resume), the event's " +
      "_tag as its name, and its JSON as its data"
  })
const LastEventId = Schema.Struct({ "last-event-id": Schema.optional(Schema.String) })

const tasks = HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.get("listTasks", "/tasks")
      .setUrlParams(Schema.Struct({
        agent: Schema.optional(Schema.String),
        status: Schema.optional(TaskStatus),
        since: Schema.optional(isoTime),
        until: Schema.optional(isoTime),
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 200)))
      }))
      .addSuccess(TaskPage)
      .addError(OperatorBadRequest)
      .annotate(OpenApi.Summary, "The tasks the journal holds, newest first, filtered, a page at a time")
  )
  .add(
    HttpApiEndpoint.get("getTask")`/tasks/${taskId}`
      .addSuccess(TaskView)
      .addError(OperatorNotFound)
      .annotate(OpenApi.Summary, "A task as a timeline from its journal")
  )
  .add(
    HttpApiEndpoint.post("cancelTask")`/tasks/${taskId}/cancel`
      .setPayload(Cancel)
      .addSuccess(TaskSummary, { status: 202 })
      .addError(OperatorNotFound)
      .addError(OperatorConflict)
      .annotate(OpenApi.Summary, "Cancels a task: its running calls are interrupted, its child tasks cancelled, and it ends with TaskCancelled naming the operator (admin)")
  )
  .add(
    HttpApiEndpoint.get("taskEvents")`/tasks/${taskId}/events`
      .setHeaders(LastEventId)
      .addSuccess(EventStream)
      .addError(OperatorNotFound)
      .addError(OperatorBadRequest)
      .annotate(OpenApi.Summary, "A task's events as Server-Sent Events; ids are its event offsets")
  )
  .addError(OperatorNotImplemented)
  .addError(OperatorUnavailable)
  .addError(OperatorForbidden)
  .middleware(OperatorAuth)

const approvals = HttpApiGroup.make("approvals")
  .add(
    HttpApiEndpoint.get("listApprovals", "/approvals")
      .addSuccess(Schema.Struct({ approvals: Schema.Array(PendingApprovalView) }))
      .annotate(OpenApi.Summary, "The approvals waiting for a person, of every agent, the first to expire first")
  )
  .add(
    HttpApiEndpoint.post("decide")`/approvals/${taskId}/${toolCallId}`
      .setPayload(Decision)
      .addSuccess(Decided)
      .addError(OperatorNotFound)
      .addError(OperatorConflict)
      .annotate(OpenApi.Summary, "Approves or denies a call a task waits for (approver); the task goes on")
  )
  .addError(OperatorNotImplemented)
  .addError(OperatorUnavailable)
  .addError(OperatorForbidden)
  .middleware(OperatorAuth)

const agents = HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("listAgents", "/agents")
      .addSuccess(Schema.Struct({ agents: Schema.Array(AgentView) }))
      .annotate(OpenApi.Summary, "Each agent: its processes, connections, tools, and what it holds against its limits")
  )
  .addError(OperatorForbidden)
  .middleware(OperatorAuth)

const events = HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("events", "/events")
      .setUrlParams(Schema.Struct({ agent: Schema.optional(Schema.String) }))
      .setHeaders(LastEventId)
      .addSuccess(EventStream)
      .addError(OperatorBadRequest)
      .annotate(OpenApi.Summary, "Every task's events as Server-Sent Events; ids resume the stream")
  )
  .addError(OperatorForbidden)
  .middleware(OperatorAuth)

const operator = HttpApiGroup.make("operator")
  .add(
    HttpApiEndpoint.get("whoAmI", "/operator")
      .addSuccess(Schema.Struct({ name: Schema.String, role: Schema.Literal(...operatorRoles) }))
      .annotate(OpenApi.Summary, "The operator the token names: their name and role (what a client may offer them)")
  )
  .middleware(OperatorAuth)

const meta = HttpApiGroup.make("meta").add(
  HttpApiEndpoint.get("openApi", "/openapi.json")
    .addSuccess(Schema.Unknown)
    .annotate(OpenApi.Summary, "This document (no token needed)")
)

/** The operator API: its routes under `/api/v1`, and their Schemas. */
export class OperatorApi extends HttpApi.make("operator")
  .add(tasks)
  .add(approvals)
  .add(agents)
  .add(events)
  .add(meta)
  .add(operator)
  .prefix(prefix)
  .annotate(OpenApi.Title, "agent-tools platform: operator API")
  .annotate(OpenApi.Version, "1")
  .annotate(
    OpenApi.Description,
    "Read the platform's tasks, agents and events; decide approvals; cancel tasks. Every route but this " +
      "document takes an operator token (Authorization: Bearer); its role says what it may do."
  )
{}
