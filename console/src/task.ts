/**
 * The Task page: the task's timeline from its journal: its prompt, model turns (tokens, cache reads, text),
 * calls (a virtualised list), approvals with their decisions (and, to an approver, approve and deny), the tasks
 * its `exec_agent` calls started as a tree, its trace id (a link when the console has a trace URL template),
 * and, to an admin, a cancel button. Its event stream reloads it as it goes.
 */
import { ApiError, call, follow } from "./api.js"
import { callList } from "./calls.js"
import { decisionControls } from "./decide.js"
import { debounce, el, labelled, link, textOf, time } from "./dom.js"
import { type Approval, canCancel, canDecide, type PageContext, type TaskView, type Turn, type Usage } from "./types.js"

const tokens = (usage: Usage): string =>
  `${usage.inputTokens} in, ${usage.outputTokens} out` +
  (usage.cacheReadTokens === undefined ? "" : `, ${usage.cacheReadTokens} read from the cache`)

/** The trace id, linked by the template when it makes an http(s) URL; else as text. */
const traceOf = (traceId: string | undefined, template: string | null): Node => {
  if (traceId === undefined) return document.createTextNode("none")
  if (template === null) return el("span", { class: "mono", text: traceId })
  try {
    const url = new URL(template.replaceAll("{traceId}", encodeURIComponent(traceId)))
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http")
    return el("a", { class: "mono trace", text: traceId, attrs: { href: url.href, target: "_blank", rel: "noopener noreferrer" } })
  } catch {
    return el("span", { class: "mono", text: traceId })
  }
}

const turnItem = (turn: Turn) =>
  el(
    "li",
    {},
    el("strong", { text: `Turn ${turn.step}` }),
    " ",
    time(turn.at),
    ` — ${tokens(turn.usage)}; ${turn.finishReason}`,
    turn.toolCalls.length === 0 ? "" : `; asked for ${turn.toolCalls.length} call(s)`,
    turn.text === undefined || turn.text === "" ? "" : el("pre", { class: "model-text", text: turn.text })
  )

const approvalItem = (approval: Approval, taskId: string, context: PageContext, reload: () => void) =>
  el(
    "li",
    { class: "card", attrs: { "data-approval": approval.toolCallId } },
    el("strong", { text: `${approval.toolName} ${approval.toolCallId}: ${approval.decision}` }),
    approval.decidedBy === undefined ? "" : ` by ${approval.decidedBy} `,
    approval.decidedAt === undefined ? "" : time(approval.decidedAt),
    approval.reason === undefined ? "" : ` — ${approval.reason}`,
    el("pre", { text: textOf(approval.input) }),
    el("p", {}, "asked ", time(approval.askedAt), ", expires ", time(approval.expiresAt)),
    approval.decision === "pending" && canDecide(context.me) ? decisionControls(taskId, approval.toolCallId, reload) : ""
  )

/** The children's tree: each child a link, its own children read and shown beneath it (three levels at most). */
const childrenTree = (children: TaskView["children"], depth: number): HTMLElement => {
  const list = el("ul")
  for (const child of children) {
    const item = el("li", {}, link(`#/task/${encodeURIComponent(child.taskId)}`, child.taskId), ` ${child.agentId}, ${child.status}`)
    list.append(item)
    if (depth < 3) {
      void call<TaskView>(`/tasks/${encodeURIComponent(child.taskId)}`).then(
        (view) => view.children.length > 0 && item.append(childrenTree(view.children, depth + 1)),
        () => {}
      )
    }
  }
  return list
}

const cancelControls = (taskId: string, reload: () => void) => {
  const reason = el("input", { attrs: { type: "text", maxlength: "2000", placeholder: "optional" } })
  const status = el("span", { attrs: { role: "status" } })
  const cancel = async () => {
    try {
      await call(`/tasks/${encodeURIComponent(taskId)}/cancel`, { body: reason.value === "" ? {} : { reason: reason.value } })
      status.textContent = "cancelled"
      reload()
    } catch (error) {
      status.textContent = error instanceof ApiError ? error.message : String(error)
    }
  }
  return el("div", { class: "card" }, labelled("Reason to cancel", reason, "cancel-reason"), " ",
    el("button", { class: "cancel", text: "Cancel task", attrs: { type: "button" }, on: { click: () => void cancel() } }), " ", status)
}

/** The answer (or the error) of the task's final event, as text. */
const answerOf = (final: unknown): Node | string => {
  const end = (final ?? {}) as { readonly output?: unknown; readonly reason?: unknown }
  const text = typeof end.output === "string" ? end.output : typeof end.reason === "string" ? end.reason : undefined
  return text === undefined ? "" : el("div", {}, el("h2", { text: "Answer" }), el("pre", { class: "answer", text }))
}

export const taskPage = (context: PageContext, taskId: string): void => {
  const heading = el("h1", { text: `Task ${taskId}` })
  const summary = el("div")
  const calls = callList()
  const rest = el("div")
  const message = el("p", { attrs: { role: "status" } })
  const ended = el("p", { text: "The journal no longer keeps this task's calls and turns: only its end." })
  context.root.replaceChildren(heading, message, summary, el("h2", { text: "Calls" }), ended, calls.element, rest)
  const load = async () => {
    try {
      const view = await call<TaskView>(`/tasks/${encodeURIComponent(taskId)}`)
      const pending = view.approvals.filter((approval) => approval.decision === "pending").length
      summary.replaceChildren(
        el("p", {}, "Agent ", el("strong", { text: view.agentId }), ", status ",
          el("strong", { class: `status-${view.status}`, attrs: { "data-status": view.status }, text: view.outcome === undefined ? view.status : `${view.status} (${view.outcome})` }),
          ", made ", time(view.createdAt), view.endedAt === undefined ? "" : ", ended ", view.endedAt === undefined ? "" : time(view.endedAt)),
        el("p", {}, "Trace ", traceOf(view.traceId, context.traceUrl), `; tokens: ${tokens(view.usage)}; tools: ${view.tools.join(", ")}`),
        el("h2", { text: "Prompt" }),
        el("pre", { class: "prompt", text: view.prompt }),
        view.status !== "ended" && canCancel(context.me) ? cancelControls(taskId, () => void load()) : ""
      )
      calls.update(view.calls)
      ended.hidden = !(view.status === "ended" && view.calls.length === 0)
      rest.replaceChildren(
        el("h2", { text: `Approvals (${pending} waiting)` }),
        el("ul", { class: "approvals" }, ...view.approvals.map((approval) => approvalItem(approval, taskId, context, () => void load()))),
        el("h2", { text: "Model turns" }),
        el("ol", { class: "turns" }, ...view.turns.map(turnItem)),
        el("h2", { text: "Tasks it started" }),
        view.children.length === 0 ? el("p", { text: "none" }) : el("div", { class: "tree" }, childrenTree(view.children, 1)),
        answerOf(view.final),
        view.final === undefined ? "" : el("h2", { text: "End" }),
        view.final === undefined ? "" : el("pre", { class: "final", text: textOf(view.final) })
      )
      message.textContent = ""
    } catch (error) {
      message.textContent = error instanceof ApiError ? error.message : String(error)
    }
  }
  void load()
  follow(`/tasks/${encodeURIComponent(taskId)}/events`, debounce(100, () => void load()), context.signal)
}
