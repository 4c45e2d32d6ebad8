/**
 * The operator API under `/api/v1`, as the console uses it: the operator token from `sessionStorage` sent as a
 * bearer header (no cookie: a page of another site can make the browser send nothing that acts), JSON reads and
 * decisions, and Server-Sent Events read with `fetch` (an `EventSource` cannot send a header), resumed after a
 * break with `Last-Event-ID`.
 */
const tokenKey = "agent-tools.console.operator-token"

export const storedToken = (): string | null => sessionStorage.getItem(tokenKey)
export const storeToken = (token: string): void => sessionStorage.setItem(tokenKey, token)
export const forgetToken = (): void => sessionStorage.removeItem(tokenKey)

/** An answer of the API that is not a success: its status and the reason it gave. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly tag: string, reason: string) {
    super(`${status} ${tag}: ${reason}`)
  }
}

/** Called when the API answers 401: the token is gone or not known; the console signs out. */
let onUnauthorized: () => void = () => {}
export const whenUnauthorized = (handler: () => void): void => {
  onUnauthorized = handler
}

const headers = (token: string | null, extra: Record<string, string> = {}): Record<string, string> =>
  token === null ? extra : { ...extra, authorization: `Bearer ${token}` }

const failure = async (response: Response): Promise<ApiError> => {
  const text = await response.text()
  try {
    const body = JSON.parse(text) as { _tag?: string; reason?: string; message?: string }
    return new ApiError(response.status, body._tag ?? "Error", body.reason ?? body.message ?? text)
  } catch {
    return new ApiError(response.status, "Error", text)
  }
}

/** A route's JSON answer (`body` sent as JSON with a POST), or its `ApiError`. */
export const call = async <A>(path: string, options: { readonly body?: unknown; readonly token?: string } = {}): Promise<A> => {
  const token = options.token ?? storedToken()
  const response = await fetch(`/api/v1${path}`, {
    method: options.body === undefined ? "GET" : "POST",
    headers: headers(token, options.body === undefined ? {} : { "content-type": "application/json" }),
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
    credentials: "omit",
    cache: "no-store"
  })
  if (response.status === 401 && options.token === undefined) onUnauthorized()
  if (!response.ok) throw await failure(response)
  return (await response.json()) as A
}

/** One Server-Sent Event. */
export interface StreamEvent {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

const parseBlock = (block: string): StreamEvent | undefined => {
  let id: string | undefined
  let event = "message"
  const data: Array<string> = []
  for (const line of block.split(/\r?\n/)) {
    if (line === "" || line.startsWith(":")) continue
    const colon = line.indexOf(":")
    const field = colon < 0 ? line : line.slice(0, colon)
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
    if (field === "id") id = value
    else if (field === "event") event = value
    else if (field === "data") data.push(value)
  }
  return data.length === 0 ? undefined : { id, event, data: data.join("\n") }
}

const pause = (millis: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, millis)
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true })
  })

/** Reads one response's events until it ends; the last id seen. */
const readEvents = async (body: ReadableStream<Uint8Array>, onEvent: (event: StreamEvent) => void, last: string | undefined) => {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return last
    buffer += decoder.decode(value, { stream: true })
    for (let end = buffer.search(/\r?\n\r?\n/); end >= 0; end = buffer.search(/\r?\n\r?\n/)) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "")
      const event = parseBlock(block)
      if (event === undefined) continue
      if (event.id !== undefined) last = event.id
      onEvent(event)
    }
  }
}

/**
 * Follows a stream of the API (`/events`, `/tasks/{id}/events`) until `signal` aborts: each event to `onEvent`,
 * reconnecting after a break from the last id; a 204 (a task's stream past its end) stops it.
 */
export const follow = (path: string, onEvent: (event: StreamEvent) => void, signal: AbortSignal): void => {
  let last: string | undefined
  const run = async () => {
    while (!signal.aborted) {
      try {
        const response = await fetch(`/api/v1${path}`, {
          headers: headers(storedToken(), { accept: "text/event-stream", ...(last === undefined ? {} : { "last-event-id": last }) }),
          credentials: "omit",
          cache: "no-store",
          signal
        })
        if (response.status === 204) return
        if (response.status === 401) return onUnauthorized()
        if (response.ok && response.body !== null) last = await readEvents(response.body, onEvent, last)
      } catch {
        // A break: reconnected below, from the last id.
      }
      await pause(1000, signal)
    }
  }
  void run()
}
