/**
 * The console's client: sign-in with an operator token (checked with the API, kept in `sessionStorage`), then
 * the pages by the location's hash: `#/tasks`, `#/task/<id>`, `#/approvals`, `#/agents`. Leaving a page aborts
 * its streams and timers.
 */
import { agentsPage } from "./agents.js"
import { ApiError, call, forgetToken, storedToken, storeToken, whenUnauthorized } from "./api.js"
import { approvalsPage } from "./approvals.js"
import { el, labelled, link } from "./dom.js"
import { taskPage } from "./task.js"
import { tasksPage } from "./tasks.js"
import type { Me } from "./types.js"

const main = document.getElementById("main")!
const top = document.getElementById("top")!
let traceUrl: string | null = null
let me: Me | undefined
let page: AbortController | undefined

const signIn = (problem?: string) => {
  page?.abort()
  me = undefined
  top.replaceChildren(el("strong", { text: "agent-tools console" }))
  const token = el("input", { attrs: { type: "password", autocomplete: "off", required: "" } })
  const status = el("p", { class: "error", attrs: { role: "alert" }, text: problem ?? "" })
  const submit = async (event: Event) => {
    event.preventDefault()
    try {
      const found = await call<Me>("/operator", { token: token.value.trim() })
      storeToken(token.value.trim())
      me = found
      route()
    } catch (error) {
      status.textContent = error instanceof ApiError ? error.message : String(error)
    }
  }
  main.replaceChildren(
    el("h1", { text: "Sign in" }),
    el("form", { on: { submit: (event) => void submit(event) } }, labelled("Operator token", token, "token"), " ",
      el("button", { text: "Sign in", attrs: { type: "submit" } })),
    el("p", { text: "The token stays in this tab (sessionStorage) and is sent only to this platform's API." }),
    status
  )
  token.focus()
}

const header = (who: Me) =>
  top.replaceChildren(
    el("strong", { text: "agent-tools console" }),
    el("nav", { attrs: { "aria-label": "Pages" } }, link("#/tasks", "Tasks"), link("#/approvals", "Approvals"), link("#/agents", "Agents")),
    el("span", { class: "who", text: `${who.name} (${who.role})` }),
    el("button", { text: "Sign out", attrs: { type: "button" }, on: { click: () => (forgetToken(), signIn()) } })
  )

const route = () => {
  if (me === undefined) return signIn()
  page?.abort()
  page = new AbortController()
  header(me)
  const context = { root: main, me, traceUrl, signal: page.signal }
  const hash = location.hash.replace(/^#\/?/, "")
  if (hash.startsWith("task/")) taskPage(context, decodeURIComponent(hash.slice("task/".length)))
  else if (hash === "approvals") approvalsPage(context)
  else if (hash === "agents") agentsPage(context)
  else tasksPage(context)
}

const start = async () => {
  whenUnauthorized(() => {
    forgetToken()
    signIn("The operator token was refused: sign in again.")
  })
  window.addEventListener("hashchange", route)
  try {
    const config = (await (await fetch("/console/config.json", { credentials: "omit" })).json()) as { traceUrl: string | null }
    traceUrl = config.traceUrl
  } catch {
    traceUrl = null
  }
  const token = storedToken()
  if (token === null) return signIn()
  try {
    me = await call<Me>("/operator")
    route()
  } catch {
    signIn()
  }
}

void start()
