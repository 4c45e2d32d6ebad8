/**
 * A task's calls as a virtualised list: rows of one height, and only those on screen (and a few either side)
 * in the document, however many calls the task made; a row chosen (click, Enter) shows the call whole below.
 */
import { el, textOf, time } from "./dom.js"
import type { Call } from "./types.js"

const rowHeight = 28
const spare = 8

const describe = (call: Call): string =>
  call.outcome === "failed" ? `${call.failure ?? "failed"}: ${call.error ?? ""}` : call.value === undefined ? "" : textOf(call.value)

const details = (call: Call): ReadonlyArray<Node> => [
  el("h3", { text: `${call.name} ${call.toolCallId}: ${call.outcome}` }),
  el(
    "p",
    {},
    "started ",
    time(call.startedAt),
    ", ended ",
    time(call.endedAt),
    call.durationMillis === undefined ? "" : ` (${call.durationMillis} ms)`,
    ", deadline ",
    time(call.deadlineAt)
  ),
  el("h4", { text: "Arguments" }),
  el("pre", { text: call.arguments }),
  el("h4", { text: call.outcome === "failed" ? "Error" : "Result" }),
  el("pre", { class: "result", text: describe(call) })
]

/** The list's element and its `update`, given the calls as they are now (the rows on screen are made again). */
export const callList = () => {
  let calls: ReadonlyArray<Call> = []
  let chosen: string | undefined
  const inner = el("div", { attrs: { role: "presentation" } })
  const viewport = el("div", { class: "calls", attrs: { role: "listbox", "aria-label": "Calls", tabindex: "-1" } }, inner)
  const detail = el("div", { class: "card", attrs: { "aria-live": "polite" } }, el("p", { text: "Choose a call to see it whole." }))
  const choose = (call: Call) => {
    chosen = call.toolCallId
    detail.replaceChildren(...details(call))
    render()
  }
  const rowOf = (call: Call) =>
    el(
      "button",
      {
        class: "row",
        attrs: {
          type: "button",
          role: "option",
          "aria-selected": String(call.toolCallId === chosen),
          "aria-label": `call ${call.toolCallId} ${call.name} ${call.outcome}`,
          "data-call": call.toolCallId
        },
        on: { click: () => choose(call) }
      },
      el("span", { class: "mono", text: call.toolCallId }),
      el("span", { text: call.name }),
      el("span", { class: `outcome-${call.outcome}`, text: call.outcome }),
      el("span", { text: call.durationMillis === undefined ? "" : `${call.durationMillis} ms` }),
      el("span", { class: "mono", text: describe(call).slice(0, 200) })
    )
  let frame = 0
  const render = () => {
    frame = 0
    const first = Math.max(0, Math.floor(viewport.scrollTop / rowHeight) - spare)
    const last = Math.min(calls.length, Math.ceil((viewport.scrollTop + viewport.clientHeight) / rowHeight) + spare)
    inner.style.height = `${calls.length * rowHeight}px`
    const rows: Array<Node> = []
    for (let index = first; index < last; index++) {
      // Placed through the style object (CSSOM): the page's CSP allows no inline style attribute.
      const row = rowOf(calls[index]!)
      row.style.top = `${index * rowHeight}px`
      rows.push(row)
    }
    inner.replaceChildren(...rows)
  }
  viewport.addEventListener("scroll", () => {
    if (frame === 0) frame = requestAnimationFrame(render)
  })
  return {
    element: el("div", {}, viewport, detail),
    update: (next: ReadonlyArray<Call>) => {
      calls = next
      const shown = calls.find((call) => call.toolCallId === chosen)
      if (shown !== undefined) detail.replaceChildren(...details(shown))
      render()
    }
  }
}
