/**
 * MCP over Streamable HTTP, a request's answer and its body (design: Hostile clients): answers written straight to
 * the Node response, and a POST's body read once within its limits (the body limit counted while reading, the shared
 * budget, the depth, the time limit) and parsed, or refused.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import * as Json from "../util/json.js"

/** An answer of ours (not the SDK transport's): its status, headers and text. */
export interface Answer {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export const isAnswer = (value: object): value is Answer => "status" in value && "body" in value

/** A JSON-RPC error with no id, as the SDK's transport answers its own refusals. */
export const jsonRpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { ...headers, "content-type": "application/json" },
  body: JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null })
})

export const textAnswer = (status: number, text: string): Answer => ({ status, headers: { "content-type": "text/plain" }, body: text })

/** Writes `answer` unless the response is gone. */
export const send = (res: ServerResponse, answer: Answer): void => {
  if (res.destroyed || res.headersSent) return
  res.writeHead(answer.status, { ...answer.headers, "content-length": String(Buffer.byteLength(answer.body)) })
  res.end(answer.body)
}

/** The limits a body is read within, the shared budget they count in, and the clock its time limit is kept by. */
export interface BodyLimits {
  readonly maxBodyBytes: number
  readonly maxBodyDepth: number
  readonly maxBufferedBodyBytes: number
  readonly bodyMillis: number
  /** The bytes of the bodies being read that the shared budget counts. */
  bufferedBodyBytes: number
  /** Calls `f` after `millis` by the face's clock (TestClock in tests), unless the returned function is called first. */
  readonly after: (millis: number, f: () => void) => () => void
}

type Body =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "TooDeep" }
  | { readonly _tag: "Busy" }
  | { readonly _tag: "Failed" }

/** The first bytes of every body, which the shared budget does not count: a small request always gets in. */
export const unbudgetedBodyBytes = 64 * 1024

/**
 * Reads the request body into `done`, or TooLarge as soon as more than `maxBodyBytes` arrived (or were declared): a
 * client cannot make the server hold more than the limit. Busy as soon as its bytes past the first
 * `unbudgetedBodyBytes` would take the bodies being read over `maxBufferedBodyBytes` together. TooDeep when its first
 * bytes already nest deeper than `maxBodyDepth` (a body 4 MB deep is refused from its first chunk, not read to the end).
 * The rest of the body is not read; the answer closes the connection. The function returned stops reading and lets go
 * of what it held (its time is up, or the client went away); `done` is not called then.
 */
const readBody = (source: IncomingMessage, limits: BodyLimits, done: (body: Body) => void): () => void => {
  let chunks: Array<Buffer> = []
  let received = 0
  let budgeted = 0
  const stop = () => {
    source.off("data", onData)
    source.off("end", onEnd)
    source.off("error", onError)
    limits.bufferedBodyBytes -= budgeted
    budgeted = 0
    chunks = []
  }
  const refuse = (body: Body) => {
    stop()
    source.pause()
    done(body)
  }
  const onData = (chunk: Buffer) => {
    const before = received
    received += chunk.length
    if (received > limits.maxBodyBytes) return refuse({ _tag: "TooLarge" })
    // Once, with the first bytes that could nest too deep: the scan of a prefix stops where the whole text's would.
    if (before <= 2 * limits.maxBodyDepth && received > 2 * limits.maxBodyDepth) {
      const prefix = Buffer.concat([...chunks, chunk]).toString("utf8")
      if (Json.textDeeperThan(prefix, limits.maxBodyDepth)) return refuse({ _tag: "TooDeep" })
    }
    const more = Math.max(0, received - unbudgetedBodyBytes) - budgeted
    if (more > 0 && limits.bufferedBodyBytes + more > limits.maxBufferedBodyBytes) return refuse({ _tag: "Busy" })
    limits.bufferedBodyBytes += more
    budgeted += more
    chunks.push(chunk)
  }
  const onEnd = () => {
    const text = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8")
    stop()
    done({ _tag: "Read", text })
  }
  const onError = () => {
    stop()
    done({ _tag: "Failed" })
  }
  source.on("data", onData)
  source.once("end", onEnd)
  source.once("error", onError)
  return stop
}

// The unread rest of a refused body is not worth reading: the connection closes after the answer.
export const closing = { connection: "close" } as const

/** What a read body's outcome answers: the parsed body, or the refusal (413, 503, 400). */
const outcome = (body: Body, limits: BodyLimits): { readonly parsedBody: unknown } | Answer => {
  const { maxBodyBytes, maxBodyDepth, maxBufferedBodyBytes } = limits
  switch (body._tag) {
    case "TooLarge":
      return jsonRpcError(413, -32600, `the request body is over the limit of ${maxBodyBytes} bytes`, closing)
    case "TooDeep":
      return jsonRpcError(400, -32700, `Parse error: the body is nested deeper than ${maxBodyDepth} levels`, closing)
    case "Busy":
      return jsonRpcError(
        503,
        -32000,
        `the server holds ${maxBufferedBodyBytes} bytes of request bodies being read already; retry later`,
        { ...closing, "retry-after": "1" }
      )
    case "Failed":
      return jsonRpcError(400, -32700, "Parse error: the body is not JSON")
    case "Read": {
      if (Json.textDeeperThan(body.text, maxBodyDepth)) {
        return jsonRpcError(400, -32700, `Parse error: the body is nested deeper than ${maxBodyDepth} levels`)
      }
      try {
        return { parsedBody: JSON.parse(body.text) as unknown }
      } catch {
        return jsonRpcError(400, -32700, "Parse error: the body is not JSON")
      }
    }
  }
}

/**
 * A POST's body, read once within `maxBodyBytes`, the shared budget and `bodyMillis`, and parsed, into `done`; or the
 * answer that refuses it (413, 503, 408, 400). A declared length that cannot fit is refused before a byte is read. The
 * time limit starts once the bytes that came with the headers are read (most bodies are complete by then: no timer).
 * The response closing first (the client went away) stops the reading, and `done` is not called.
 */
export const readPost = (
  req: IncomingMessage,
  res: ServerResponse,
  limits: BodyLimits,
  done: (read: { readonly parsedBody: unknown } | Answer) => void
): void => {
  const declared = Number(req.headers["content-length"])
  if (declared > limits.maxBodyBytes) {
    return done(jsonRpcError(413, -32600, `the request body is over the limit of ${limits.maxBodyBytes} bytes`, closing))
  }
  if (limits.bufferedBodyBytes + declared - unbudgetedBodyBytes > limits.maxBufferedBodyBytes) {
    return done(outcome({ _tag: "Busy" }, limits))
  }
  let cancelTimer: (() => void) | undefined
  let finished = false
  const finish = () => {
    finished = true
    clearImmediate(startTimer)
    cancelTimer?.()
    res.off("close", onClose)
  }
  const stop = readBody(req, limits, (body) => {
    finish()
    done(outcome(body, limits))
  })
  const onClose = () => {
    finish()
    stop()
  }
  res.once("close", onClose)
  const startTimer = setImmediate(() => {
    if (finished) return
    cancelTimer = limits.after(limits.bodyMillis, () => {
      if (finished) return
      finish()
      stop()
      done(jsonRpcError(408, -32600, `the request body did not arrive within ${limits.bodyMillis} ms`, closing))
    })
  })
}
