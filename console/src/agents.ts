/**
 * The Agents page: each agent's serving processes (workers) with their last heartbeat, a silent one marked so,
 * its connections, its tools, and what it holds against its limits; read again every 5 seconds.
 */
import { ApiError, call } from "./api.js"
import { el, time } from "./dom.js"
import type { Agent, Held, PageContext } from "./types.js"

const usage = (label: string, held: Held) =>
  el(
    "li",
    {},
    `${label}: ${held.held} of ${held.max} `,
    el("meter", { attrs: { min: "0", max: String(held.max), value: String(held.held), "aria-label": label } })
  )

const agentCard = (agent: Agent) =>
  el(
    "section",
    { class: "card", attrs: { "aria-label": `agent ${agent.agentId}` } },
    el("h2", { text: agent.agentId }),
    el("p", { text: `${agent.connections} open connection(s); tools offered: ${agent.tools.join(", ") || "none"}` }),
    el("ul", {}, usage("tasks", agent.tasks), usage("prompt bytes", agent.promptBytes), usage("manifest bytes", agent.manifestBytes)),
    el(
      "table",
      {},
      el("thead", {}, el("tr", {}, ...["Process", "Last heartbeat", "State", "Tools"].map((name) => el("th", { text: name, attrs: { scope: "col" } })))),
      el(
        "tbody",
        {},
        ...agent.processes.map((process) =>
          el(
            "tr",
            {},
            el("td", { class: "mono", text: process.processId }),
            el("td", {}, time(process.lastHeartbeatAt)),
            el("td", { class: process.live ? "" : "silent", text: process.live ? (process.watching ? "live, watching for tasks" : "live") : "silent" }),
            el("td", { text: process.tools.join(", ") })
          )
        )
      )
    )
  )

export const agentsPage = (context: PageContext): void => {
  const body = el("div")
  const message = el("p", { attrs: { role: "status" } })
  context.root.replaceChildren(el("h1", { text: "Agents" }), message, body)
  const load = async () => {
    try {
      const { agents } = await call<{ agents: ReadonlyArray<Agent> }>("/agents")
      body.replaceChildren(...agents.map(agentCard))
      message.textContent = agents.length === 0 ? "No agent." : ""
    } catch (error) {
      message.textContent = error instanceof ApiError ? error.message : String(error)
    }
  }
  void load()
  const timer = setInterval(() => void load(), 5000)
  context.signal.addEventListener("abort", () => clearInterval(timer), { once: true })
}
