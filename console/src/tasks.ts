/**
 * The Tasks page: the journal's tasks, newest first, a page at a time (the API's cursor), filtered by agent,
 * status and time on the server; kept live by the platform's event stream (a new task or a status change
 * reloads the page shown); an id typed in the search opens that task.
 */
import { ApiError, call, follow } from "./api.js"
import { debounce, el, labelled, link, time } from "./dom.js"
import type { PageContext, TaskSummary } from "./types.js"

interface Filters {
  agent: string
  status: string
  since: string
  until: string
}

const query = (filters: Filters, cursor: string | undefined): string => {
  const params = new URLSearchParams({ limit: "50" })
  if (filters.agent !== "") params.set("agent", filters.agent)
  if (filters.status !== "") params.set("status", filters.status)
  if (filters.since !== "") params.set("since", new Date(filters.since).toISOString())
  if (filters.until !== "") params.set("until", new Date(filters.until).toISOString())
  if (cursor !== undefined) params.set("cursor", cursor)
  return `/tasks?${params.toString()}`
}

const statusOf = (task: TaskSummary): string => task.outcome === undefined ? task.status : `${task.status} (${task.outcome})`

const row = (task: TaskSummary) =>
  el(
    "tr",
    { attrs: { "data-task": task.taskId } },
    el("td", {}, link(`#/task/${encodeURIComponent(task.taskId)}`, task.taskId)),
    el("td", { text: task.agentId }),
    el("td", { class: `status-${task.status}`, text: statusOf(task) }),
    el("td", {}, time(task.createdAt)),
    el("td", {}, time(task.endedAt))
  )

const filterForm = (filters: Filters, apply: () => void) => {
  const agent = el("input", { attrs: { type: "text", placeholder: "any" } })
  const status = el(
    "select",
    {},
    ...["", "running", "waiting-for-approval", "ended"].map((value) => el("option", { text: value === "" ? "any" : value, attrs: { value } }))
  )
  const since = el("input", { attrs: { type: "datetime-local" } })
  const until = el("input", { attrs: { type: "datetime-local" } })
  const submit = (event: Event) => {
    event.preventDefault()
    Object.assign(filters, { agent: agent.value.trim(), status: status.value, since: since.value, until: until.value })
    apply()
  }
  return el(
    "form",
    { class: "filters", attrs: { "aria-label": "Filter tasks" }, on: { submit } },
    labelled("Agent", agent, "filter-agent"),
    labelled("Status", status, "filter-status"),
    labelled("Made since", since, "filter-since"),
    labelled("until", until, "filter-until"),
    el("button", { text: "Filter", attrs: { type: "submit" } })
  )
}

const searchForm = () => {
  const id = el("input", { attrs: { type: "search", placeholder: "task-…" } })
  return el(
    "form",
    {
      class: "filters",
      attrs: { role: "search" },
      on: {
        submit: (event) => {
          event.preventDefault()
          if (id.value.trim() !== "") location.hash = `#/task/${encodeURIComponent(id.value.trim())}`
        }
      }
    },
    labelled("Task id", id, "search-id"),
    el("button", { text: "Open", attrs: { type: "submit" } })
  )
}

export const tasksPage = (context: PageContext): void => {
  const filters: Filters = { agent: "", status: "", since: "", until: "" }
  // The cursors of the pages before the one shown (undefined: the first page).
  const cursors: Array<string | undefined> = []
  let cursor: string | undefined
  const body = el("tbody")
  const message = el("p", { attrs: { role: "status" } })
  const back = el("button", { text: "Newer", attrs: { type: "button" } })
  const next = el("button", { text: "Older", attrs: { type: "button" } })
  let nextCursor: string | undefined
  const load = async () => {
    try {
      const page = await call<{ tasks: ReadonlyArray<TaskSummary>; next?: string }>(query(filters, cursor))
      body.replaceChildren(...page.tasks.map(row))
      nextCursor = page.next
      next.disabled = nextCursor === undefined
      back.disabled = cursors.length === 0
      message.textContent = page.tasks.length === 0 ? "No task matches." : ""
    } catch (error) {
      message.textContent = error instanceof ApiError ? error.message : String(error)
    }
  }
  back.addEventListener("click", () => {
    cursor = cursors.pop()
    void load()
  })
  next.addEventListener("click", () => {
    if (nextCursor === undefined) return
    cursors.push(cursor)
    cursor = nextCursor
    void load()
  })
  const apply = () => {
    cursors.length = 0
    cursor = undefined
    void load()
  }
  context.root.replaceChildren(
    el("h1", { text: "Tasks" }),
    searchForm(),
    filterForm(filters, apply),
    el(
      "table",
      {},
      el("caption", { class: "skip", text: "Tasks, newest first" }),
      el("thead", {}, el("tr", {}, ...["Task", "Agent", "Status", "Made", "Ended"].map((name) => el("th", { text: name, attrs: { scope: "col" } })))),
      body
    ),
    message,
    el("div", { class: "pager" }, back, next)
  )
  void load()
  // Live: any task's event (a new one, a status change) reloads the page shown, at most about every 150 ms.
  follow("/events", debounce(150, () => void load()), context.signal)
}
