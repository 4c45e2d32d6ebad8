/**
 * Elements made from code, never from markup: every text (a model's, a tool's, a prompt's) goes in as a text
 * node, so none of it is ever read as HTML. The console has no `innerHTML` anywhere.
 */
export type Child = Node | string | number | null | undefined | false

export interface Props {
  readonly class?: string
  readonly text?: string
  /** Attributes the console's own code sets (ids, labels, roles); never a text from the platform as `href`. */
  readonly attrs?: Readonly<Record<string, string>>
  readonly on?: Readonly<Record<string, (event: Event) => void>>
}

/** An element with its class, text, attributes, listeners and children (strings become text nodes). */
export const el = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: ReadonlyArray<Child>
): HTMLElementTagNameMap[K] => {
  const node = document.createElement(tag)
  if (props.class !== undefined) node.className = props.class
  if (props.text !== undefined) node.textContent = props.text
  for (const [name, value] of Object.entries(props.attrs ?? {})) node.setAttribute(name, value)
  for (const [name, listener] of Object.entries(props.on ?? {})) node.addEventListener(name, listener)
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    node.append(typeof child === "number" ? String(child) : child)
  }
  return node
}

/** A value shown as text: a string as it is, anything else as indented JSON. */
export const textOf = (value: unknown): string => typeof value === "string" ? value : JSON.stringify(value, null, 2) ?? ""

/** A time as the reader's local time, with the ISO text as its tooltip. */
export const time = (iso: string | undefined): HTMLElement =>
  iso === undefined ? el("span", { text: "—" }) : el("time", { text: new Date(iso).toLocaleString(), attrs: { datetime: iso, title: iso } })

/** A link inside the console (its hash routes). */
export const link = (hash: string, text: string): HTMLAnchorElement => el("a", { text, attrs: { href: hash } })

/** A labelled input: the label's `for` names the input. */
export const labelled = (label: string, input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, id: string) => {
  input.id = id
  return el("label", { attrs: { for: id } }, `${label} `, input)
}

/** Runs `action` once `millis` after its last call. */
export const debounce = (millis: number, action: () => void) => {
  let timer: ReturnType<typeof setTimeout> | undefined
  return () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = setTimeout(() => {
      timer = undefined
      action()
    }, millis)
  }
}
