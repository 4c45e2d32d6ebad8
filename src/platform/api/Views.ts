/**
 * What the journal holds, as the operator API shows it (OperatorApi.ts): a task's summary and its timeline,
 * an approval waiting for a person, the cursor of a listing, the times a query gives. Plain functions of
 * the journal's records (Journal.ts), so that any platform whose reads go through a `Journal` (the embedded
 * one, a cluster's runner on PostgreSQL) shows them the same.
 */
import type * as Journal from "../../Journal.js"
import type { TaskStatus as Status, TaskSummary, TaskView } from "./OperatorApi.js"
import { OperatorBadRequest } from "./OperatorApi.js"

type Summary = typeof TaskSummary.Type
type View = typeof TaskView.Type
type Mutable<T> = { -readonly [K in keyof T]: T[K] }

const iso = (millis: number): string => new Date(millis).toISOString()

/** The API's status of a journaled one. */
export const statusOf = (status: "running" | "suspended" | "ended"): typeof Status.Type =>
  status === "suspended" ? "waiting-for-approval" : status

/** The journal's status of the API's. */
export const journalStatus = (status: typeof Status.Type): "running" | "suspended" | "ended" =>
  status === "waiting-for-approval" ? "suspended" : status

/** JSON text as a value; text that is not JSON as itself. */
const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** The trace id of a W3C `traceparent` (`00-<trace id>-<span id>-<flags>`). */
const traceIdOf = (traceparent: string | undefined): string | undefined => traceparent?.split("-")[1]

/** A task in a listing. */
export const summaryView = (task: Journal.TaskSummary): Summary => {
  const final = task.final === undefined ? undefined : parsed(task.final) as { readonly _tag?: unknown }
  const summary: Mutable<Summary> = {
    taskId: task.taskId,
    agentId: task.agentId,
    processId: task.processId,
    status: statusOf(task.status),
    createdAt: iso(task.createdAt)
  }
  if (final?._tag === "TaskCompleted") summary.outcome = "completed"
  if (final?._tag === "TaskFailed") summary.outcome = "failed"
  if (final?._tag === "TaskCancelled") summary.outcome = "cancelled"
  if (task.endedAt !== undefined) summary.endedAt = iso(task.endedAt)
  const traceId = traceIdOf(task.traceparent)
  if (traceId !== undefined) summary.traceId = traceId
  return summary
}

/** How a journaled call came out (OperatorApi.ts, `CallOutcome`). */
const outcomeOf = (call: Journal.JournaledCall): View["calls"][number]["outcome"] => {
  if (call.result === undefined) return "pending"
  const kind = call.outcome ?? (call.result.success ? "Succeeded" : "Unclassified")
  switch (kind) {
    // An outcome no handler was asked for here: an earlier outcome of the same idempotent call.
    case "Succeeded":
      return call.startedAt === undefined ? "reused" : "succeeded"
    case "TimedOut":
    case "DeadlinePassed":
      return "timed-out"
    case "OutcomeUnknown":
    case "Interrupted":
      return "outcome-unknown"
    case "Denied":
      return "denied"
    default:
      return "failed"
  }
}

/** A journaled call as the timeline shows it. */
const callView = (call: Journal.JournaledCall & { readonly toolCallId: string }): View["calls"][number] => {
  const view: Mutable<View["calls"][number]> = {
    toolCallId: call.toolCallId,
    name: call.name,
    arguments: call.arguments,
    deadlineAt: iso(call.deadlineAt),
    outcome: outcomeOf(call)
  }
  if (call.startedAt !== undefined) view.startedAt = iso(call.startedAt)
  if (call.endedAt !== undefined) view.endedAt = iso(call.endedAt)
  if (call.startedAt !== undefined && call.endedAt !== undefined) view.durationMillis = call.endedAt - call.startedAt
  if (call.result?.failure !== undefined) {
    view.failure = call.outcome ?? call.result.failure._tag
    if (call.result.error !== undefined) view.error = call.result.error
  } else if (call.result !== undefined) {
    view.value = call.result.value
  }
  return view
}

/** A journaled approval as the timeline shows it. */
const approvalView = (approval: Journal.Approval): View["approvals"][number] => {
  const view: Mutable<View["approvals"][number]> = {
    toolCallId: approval.toolCallId,
    toolName: approval.toolName,
    input: parsed(approval.input),
    decision: approval.decision,
    expiresAt: iso(approval.expiresAt)
  }
  if (approval.reason !== undefined) view.reason = approval.reason
  if (approval.askedAt !== undefined) view.askedAt = iso(approval.askedAt)
  if (approval.decidedBy !== undefined) view.decidedBy = approval.decidedBy
  if (approval.decidedAt !== undefined) view.decidedAt = iso(approval.decidedAt)
  return view
}

/** The tokens of a task: its final event's once it ended, else its journaled turns' sum. */
const usageOf = (record: Journal.TaskRecord, final: unknown): View["usage"] => {
  const ended = final as { readonly _tag?: unknown; readonly usage?: View["usage"] } | undefined
  if (ended?._tag === "TaskCompleted" && ended.usage !== undefined) return ended.usage
  const sum = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 }
  for (const { turn } of record.turns) {
    sum.inputTokens += turn.usage.inputTokens
    sum.outputTokens += turn.usage.outputTokens
    sum.cacheReadTokens += turn.usage.cacheReadTokens ?? 0
    sum.cacheWriteTokens += turn.usage.cacheWriteTokens ?? 0
  }
  return sum
}

/** A task as a timeline from its journal (OperatorApi.ts, `TaskView`). */
export const taskView = (record: Journal.TaskRecord): View => {
  const final = record.final === undefined ? undefined : parsed(record.final)
  const view: Mutable<View> = {
    ...summaryView(record),
    prompt: record.prompt,
    tools: record.tools,
    usage: usageOf(record, final),
    turns: record.turns.map(({ at, step, turn }) => ({
      step,
      ...(at === undefined ? {} : { at: iso(at) }),
      ...(turn.text === undefined ? {} : { text: turn.text }),
      toolCalls: turn.toolCalls.map((call) => ({ id: call.id, name: call.name })),
      finishReason: turn.finishReason,
      usage: turn.usage
    })),
    calls: record.calls.map(callView),
    approvals: record.approvals.map(approvalView),
    children: record.children.map((child) => ({
      taskId: child.taskId,
      agentId: child.agentId,
      status: statusOf(child.status as "running" | "suspended" | "ended")
    }))
  }
  if (final !== undefined) view.final = final
  return view
}

/**
 * An approval waiting for a person, named as it is decided: a child task's (`a1/c1`, started by its root's
 * `exec_agent` call `c1`) at its root (`a1`), as the call `c1/r1` (design: Agents that call agents).
 */
export const pendingView = (pending: Journal.PendingDecision) => {
  const [root, ...below] = pending.taskId.split("/")
  return {
    taskId: root!,
    toolCallId: [...below, pending.toolCallId].join("/"),
    agentId: pending.agentId,
    toolName: pending.toolName,
    input: parsed(pending.input),
    ...(pending.askedAt === undefined ? {} : { askedAt: iso(pending.askedAt) }),
    expiresAt: iso(pending.expiresAt)
  }
}

/** Where the next page of a listing starts: after its last task (made-at and id), opaque to a client. */
export const cursorOf = (task: Journal.TaskSummary): string =>
  Buffer.from(`${task.createdAt}:${task.taskId}`).toString("base64url")

/** A cursor `cursorOf` gave, or `OperatorBadRequest`. */
export const readCursor = (cursor: string): { readonly createdAt: number; readonly taskId: string } | OperatorBadRequest => {
  const text = Buffer.from(cursor, "base64url").toString("utf8")
  const colon = text.indexOf(":")
  const createdAt = Number(text.slice(0, colon))
  return colon <= 0 || !Number.isSafeInteger(createdAt) || colon === text.length - 1
    ? new OperatorBadRequest({ reason: "the cursor is not one this API gave (use the next of a page as it is)" })
    : { createdAt, taskId: text.slice(colon + 1) }
}

/** A time a query gives (ISO 8601, or epoch milliseconds) in epoch milliseconds, or `OperatorBadRequest`. */
export const readTime = (name: string, text: string | undefined): number | undefined | OperatorBadRequest => {
  if (text === undefined) return undefined
  const millis = /^\d+$/.test(text) ? Number(text) : Date.parse(text)
  return Number.isFinite(millis)
    ? millis
    : new OperatorBadRequest({ reason: `${name} is not a time: give ISO 8601 (2025-01-31T09:30:00Z) or epoch milliseconds` })
}

/** `Last-Event-ID` as an offset, or `OperatorBadRequest`; undefined when absent. */
export const readLastEventId = (text: string | undefined): number | undefined | OperatorBadRequest =>
  text === undefined || text.trim() === ""
    ? undefined
    : /^\d{1,20}$/.test(text.trim())
    ? Number(text.trim())
    : new OperatorBadRequest({ reason: "Last-Event-ID is not an id this API gave (a whole number)" })
