/** The approve and deny controls of a waiting call, with a reason: shown only to an approver or admin. */
import { ApiError, call } from "./api.js"
import { el, labelled } from "./dom.js"

let controls = 0

/** Approve and deny buttons for `taskId`'s call `toolCallId`; `done` is told the decision as journaled. */
export const decisionControls = (
  taskId: string,
  toolCallId: string,
  done: (said: string) => void
): HTMLElement => {
  const id = `reason-${++controls}`
  const reason = el("input", { attrs: { type: "text", maxlength: "2000", placeholder: "optional" } })
  const status = el("span", { attrs: { role: "status" } })
  const decide = (decision: "approve" | "deny") => async () => {
    status.textContent = "…"
    try {
      const body = reason.value === "" ? { decision } : { decision, reason: reason.value }
      const decided = await call<{ decision: string; decidedBy: string; decidedAt: string }>(
        `/approvals/${encodeURIComponent(taskId)}/${encodeURIComponent(toolCallId)}`,
        { body }
      )
      const said = `${decided.decision} by ${decided.decidedBy} at ${new Date(decided.decidedAt).toLocaleString()}`
      status.textContent = said
      done(said)
    } catch (error) {
      status.textContent = error instanceof ApiError ? error.message : String(error)
      status.className = "error"
    }
  }
  const label = `${toolCallId} of ${taskId}`
  return el(
    "div",
    { class: "decide" },
    labelled("Reason", reason, id),
    el("button", { class: "approve", text: "Approve", attrs: { type: "button", "aria-label": `Approve ${label}` }, on: { click: decide("approve") } }),
    " ",
    el("button", { class: "deny", text: "Deny", attrs: { type: "button", "aria-label": `Deny ${label}` }, on: { click: decide("deny") } }),
    " ",
    status
  )
}
