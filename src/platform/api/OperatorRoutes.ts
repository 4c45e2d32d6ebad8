/**
 * The operator API's routes (docs: operations), one `HttpApiBuilder.group` each of OperatorApi.ts's groups, on
 * `Operations` (Operations.ts). Each route checks its role first (`viewer` reads, `approver` also decides,
 * `admin` also cancels): a token whose role is not enough gets 403 naming the role it needs.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as OpenApi from "@effect/platform/OpenApi"
import { Clock, Effect, Layer } from "effect"
import type * as Journal from "../../Journal.js"
import { operatorRoles, type OperatorRole } from "../Options.js"
import { failOnOutage } from "../Outages.js"
import { eventStream } from "./Feeds.js"
import {
  Operator,
  OperatorApi,
  type OperatorAuth,
  OperatorBadRequest,
  OperatorConflict,
  OperatorForbidden,
  OperatorNotFound,
  OperatorNotImplemented,
  OperatorUnavailable
} from "./OperatorApi.js"
import type { Operations } from "./Operations.js"
import * as Views from "./Views.js"

/** The operator's name and role, when the role is `needed` or above; else 403 saying what `doing` needs. */
const requireRole = (needed: OperatorRole, doing: string) =>
  Effect.flatMap(Operator, (operator) =>
    operatorRoles.indexOf(operator.role) >= operatorRoles.indexOf(needed)
      ? Effect.succeed(operator)
      : Effect.fail(
        new OperatorForbidden({
          reason: `the token of ${operator.name} has role ${operator.role}; ${doing} needs role ` +
            operatorRoles.slice(operatorRoles.indexOf(needed)).join(" or ")
        })
      ))

/** The journal the reads go through, or 501 saying the platform keeps none. */
const journalOf = (operations: Operations) =>
  operations.journal === undefined
    ? Effect.fail(
      new OperatorNotImplemented({
        reason: "this platform keeps no journal (its journal option, PLATFORM_JOURNAL or --journal): its tasks are " +
          "in memory only, and tasks, their timelines and approvals are read from the journal"
      })
    )
    : Effect.succeed(operations.journal)

/**
 * A decision or a cancel that met an outage (the database away, a task's owner stopping): 503, to be tried again,
 * as `PlatformBusy` is for an agent's client.
 */
const unavailableOnOutage = (operation: string) =>
  failOnOutage(operation, (reason) =>
    new OperatorUnavailable({ reason: `the platform cannot complete ${operation} now (${reason}); try again` }))

/** A journal read; its database unreachable is 503. */
const read = <A>(effect: Effect.Effect<A, Journal.JournalUnavailable>) =>
  Effect.mapError(effect, (error) => new OperatorUnavailable({ reason: error.message }))

/** A value `Views` read, or its `OperatorBadRequest` as the failure. */
const valid = <A>(value: A | OperatorBadRequest): Effect.Effect<A, OperatorBadRequest> =>
  value instanceof OperatorBadRequest ? Effect.fail(value) : Effect.succeed(value)

const notFound = (taskId: string) =>
  new OperatorNotFound({
    reason: `task ${taskId} is not in the platform's journal: unknown, or ended longer ago than keepEndedTasks`
  })

// --- tasks ---

/** `GET /tasks`: a page of the journal's tasks, newest first, and the cursor of the next. */
const listTasks = (operations: Operations) =>
(
  { urlParams }: {
    readonly urlParams: {
      readonly agent?: string | undefined
      readonly status?: "running" | "waiting-for-approval" | "ended" | undefined
      readonly since?: string | undefined
      readonly until?: string | undefined
      readonly cursor?: string | undefined
      readonly limit?: number | undefined
    }
  }
) =>
  Effect.gen(function*() {
    yield* requireRole("viewer", "reading tasks")
    const journal = yield* journalOf(operations)
    const limit = urlParams.limit ?? 50
    const rows = yield* read(journal.listTasks({
      agentId: urlParams.agent,
      status: urlParams.status === undefined ? undefined : Views.journalStatus(urlParams.status),
      createdSince: yield* valid(Views.readTime("since", urlParams.since)),
      createdUntil: yield* valid(Views.readTime("until", urlParams.until)),
      before: urlParams.cursor === undefined ? undefined : yield* valid(Views.readCursor(urlParams.cursor)),
      // One more than the page: whether there is a next one.
      limit: limit + 1
    }))
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return {
      tasks: page.map(Views.summaryView),
      ...(rows.length > limit && last !== undefined ? { next: Views.cursorOf(last) } : {})
    }
  })

/**
 * `POST /tasks/{taskId}/cancel`: cancels the task (design: Cancelling a task): its running calls are interrupted
 * where they run, its child tasks cancelled, its end `TaskCancelled` naming the operator; then answers it as ended.
 * An ended task is 409; a platform that cannot cancel is 501.
 */
const cancelTask = (operations: Operations) =>
({ path, payload }: { readonly path: { readonly taskId: string }; readonly payload: { readonly reason?: string | undefined } }) =>
  Effect.gen(function*() {
    const operator = yield* requireRole("admin", "cancelling a task")
    const { taskId } = path
    const held = operations.task(taskId)
    const journaled = operations.journal === undefined ? undefined : yield* read(operations.journal.task(taskId))
    const agentId = held?.agentId ?? journaled?.agentId
    if (agentId === undefined) return yield* notFound(taskId)
    if (held?.ended !== undefined || journaled?.status === "ended") {
      return yield* new OperatorConflict({ reason: `task ${taskId} has ended already` })
    }
    if (operations.cancel === undefined) {
      return yield* new OperatorNotImplemented({ reason: "this platform cannot cancel a task" })
    }
    const by = `operator ${operator.name}`
    const reason = payload.reason ?? ""
    // Whole or not at all: a client that goes mid-way must not leave the task half stopped.
    const cancelled = yield* Effect.uninterruptible(operations.cancel(agentId, taskId, by, reason)).pipe(
      Effect.catchTag("UnknownTask", () => Effect.fail(notFound(taskId))),
      unavailableOnOutage("cancelling a task")
    )
    if (!cancelled) return yield* new OperatorConflict({ reason: `task ${taskId} has ended already` })
    const now = yield* Clock.currentTimeMillis
    return Views.summaryView({
      taskId,
      agentId,
      processId: journaled?.processId ?? "",
      status: "ended",
      createdAt: journaled?.createdAt ?? now,
      endedAt: now,
      final: JSON.stringify({ _tag: "TaskCancelled", taskId, by, reason }),
      traceparent: journaled?.traceparent
    })
  })

/** `GET /tasks/{taskId}/events`: its events past `Last-Event-ID`; 204 when it ended and the client has its end. */
const taskEvents = (operations: Operations) =>
({ headers, path }: { readonly path: { readonly taskId: string }; readonly headers: { readonly "last-event-id"?: string | undefined } }) =>
  Effect.gen(function*() {
    yield* requireRole("viewer", "reading a task's events")
    const after = yield* valid(Views.readLastEventId(headers["last-event-id"]))
    const held = operations.task(path.taskId)
    if (held === undefined) {
      return yield* new OperatorNotFound({
        reason: `task ${path.taskId} is not held by this platform process: its events are kept while it runs ` +
          "and for keepEndedTasks after its end (in cluster mode, by the runner that owns it)"
      })
    }
    // An EventSource stops reconnecting on 204: the client has every event, the end included.
    if (held.ended !== undefined && after !== undefined && (held.ended.offset ?? Infinity) <= after) {
      return HttpServerResponse.empty({ status: 204 })
    }
    return yield* eventStream(held.follow, after)
  })

const tasksGroup = (operations: Operations) =>
  HttpApiBuilder.group(OperatorApi, "tasks", (handlers) =>
    handlers
      .handle("listTasks", listTasks(operations))
      .handle("getTask", ({ path }) =>
        Effect.gen(function*() {
          yield* requireRole("viewer", "reading a task")
          const record = yield* read((yield* journalOf(operations)).task(path.taskId))
          return record === undefined ? yield* notFound(path.taskId) : Views.taskView(record)
        }))
      .handle("cancelTask", cancelTask(operations))
      .handle("taskEvents", taskEvents(operations)))

// --- approvals ---

/** `POST /approvals/{taskId}/{toolCallId}`: the decision, by the operator, the way an agent's goes. */
const decide = (operations: Operations) =>
(
  { path, payload }: {
    readonly path: { readonly taskId: string; readonly toolCallId: string }
    readonly payload: { readonly decision: "approve" | "deny"; readonly reason?: string | undefined }
  }
) =>
  Effect.gen(function*() {
    const operator = yield* requireRole("approver", "deciding an approval")
    const { taskId, toolCallId } = path
    const journal = yield* journalOf(operations)
    const agentId = operations.task(taskId)?.agentId ?? (yield* read(journal.task(taskId)))?.agentId
    if (agentId === undefined) return yield* notFound(taskId)
    const approved = payload.decision === "approve"
    // Whole or not at all: a client that goes mid-way must not leave the task decided and not going on.
    yield* operations.decide(agentId, { taskId, toolCallId, approved, reason: payload.reason, by: operator.name }).pipe(
      Effect.uninterruptible,
      Effect.catchTags({
        UnknownTask: () => notFound(taskId),
        NoPendingTaskApproval: (error) => new OperatorConflict({ reason: error.message }),
        ApprovalsNeedJournal: (error) => new OperatorNotImplemented({ reason: error.message })
      }),
      unavailableOnOutage("deciding an approval")
    )
    return {
      taskId,
      toolCallId,
      decision: approved ? "approved" as const : "denied" as const,
      decidedBy: operator.name,
      decidedAt: new Date(yield* Clock.currentTimeMillis).toISOString()
    }
  })

/** How many pending approvals a listing gives at most. */
const maxListedApprovals = 1000

const approvalsGroup = (operations: Operations) =>
  HttpApiBuilder.group(OperatorApi, "approvals", (handlers) =>
    handlers
      .handle("listApprovals", () =>
        Effect.gen(function*() {
          yield* requireRole("viewer", "reading approvals")
          const journal = yield* journalOf(operations)
          const pending = yield* read(journal.pendingApprovals(yield* Clock.currentTimeMillis, maxListedApprovals))
          return { approvals: pending.map(Views.pendingView) }
        }))
      .handle("decide", decide(operations)))

// --- agents, events, this document ---

const agentsGroup = (operations: Operations, connections: (agentId: string) => number) =>
  HttpApiBuilder.group(OperatorApi, "agents", (handlers) =>
    handlers.handle("listAgents", () =>
      Effect.zipRight(
        requireRole("viewer", "reading agents"),
        Effect.map(operations.agents(connections), (agents) => ({ agents }))
      )))

const eventsGroup = (operations: Operations) =>
  HttpApiBuilder.group(OperatorApi, "events", (handlers) =>
    handlers.handle("events", ({ headers, urlParams }) =>
      Effect.gen(function*() {
        yield* requireRole("viewer", "reading events")
        const after = yield* valid(Views.readLastEventId(headers["last-event-id"]))
        return yield* eventStream(operations.events(urlParams.agent), after)
      })))

/** The OpenAPI document of every route, made once from their Schemas. */
export const openApiDocument = OpenApi.fromApi(OperatorApi)

const metaGroup = HttpApiBuilder.group(
  OperatorApi,
  "meta",
  (handlers) => handlers.handle("openApi", () => Effect.succeed(openApiDocument))
)

const operatorGroup = HttpApiBuilder.group(
  OperatorApi,
  "operator",
  (handlers) => handlers.handle("whoAmI", () => Effect.map(Operator, ({ name, role }) => ({ name, role })))
)

/**
 * The API with every group's routes on `operations` (`connections` counts an agent's sockets to this platform
 * process), and the security middleware `auth`.
 */
export const layerApi = (
  operations: Operations,
  connections: (agentId: string) => number,
  auth: Layer.Layer<OperatorAuth>
) =>
  HttpApiBuilder.api(OperatorApi).pipe(
    Layer.provide([
      tasksGroup(operations),
      approvalsGroup(operations),
      agentsGroup(operations, connections),
      eventsGroup(operations),
      metaGroup,
      operatorGroup
    ]),
    Layer.provide(auth)
  )
