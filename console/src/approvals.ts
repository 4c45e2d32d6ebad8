/**
 * The Approvals page: every call waiting for a person, of every agent, oldest first; an approver decides each
 * with a reason (keyboard alone: Tab to the reason, the buttons); what was decided here, by whom and when, is
 * listed below. The platform's event stream keeps the inbox current.
 */
import { ApiError, call, follow } from "./api.js"
import { decisionControls } from "./decide.js"
import { debounce, el, link, textOf, time } from "./dom.js"
import { canDecide, type PageContext, type PendingApproval } from "./types.js"

const askedAt = (approval: PendingApproval) => approval.askedAt ?? approval.expiresAt

export const approvalsPage = (context: PageContext): void => {
  const list = el("ul", { class: "inbox" })
  const decided = el("ul", { class: "decided" })
  const message = el("p", { attrs: { role: "status" } })
  context.root.replaceChildren(
    el("h1", { text: "Approvals" }),
    message,
    list,
    el("h2", { text: "Decided here" }),
    decided
  )
  const load = async () => {
    try {
      const { approvals } = await call<{ approvals: ReadonlyArray<PendingApproval> }>("/approvals")
      const oldestFirst = [...approvals].sort((a, b) => askedAt(a).localeCompare(askedAt(b)))
      list.replaceChildren(...oldestFirst.map((approval) =>
        el(
          "li",
          { class: "card", attrs: { "data-approval": `${approval.taskId}/${approval.toolCallId}` } },
          el("strong", { text: `${approval.agentId}: ${approval.toolName}` }),
          " in ",
          link(`#/task/${encodeURIComponent(approval.taskId)}`, approval.taskId),
          ` (call ${approval.toolCallId})`,
          el("pre", { text: textOf(approval.input) }),
          el("p", {}, "asked ", time(approval.askedAt), ", expires ", time(approval.expiresAt)),
          canDecide(context.me)
            ? decisionControls(approval.taskId, approval.toolCallId, (said) => {
              decided.prepend(el("li", {}, `${approval.toolName} ${approval.toolCallId} of ${approval.taskId}: ${said}`))
              void load()
            })
            : ""
        )
      ))
      message.textContent = approvals.length === 0 ? "Nothing waits for a decision." : `${approvals.length} waiting, oldest first.`
    } catch (error) {
      message.textContent = error instanceof ApiError ? error.message : String(error)
    }
  }
  void load()
  follow("/events", debounce(150, () => void load()), context.signal)
}
