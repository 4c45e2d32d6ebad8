/**
 * A real HTTP server on 127.0.0.1 for provider tests: it answers each request with the next
 * scripted reply (status, headers, body) and records what it received, headers and JSON body.
 * A reply of "hang" never answers, so a test can see the client close the socket. A reply with
 * `text` sends it verbatim (garbage, HTML, an empty body) instead of `body` as JSON.
 */
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import type { AddressInfo } from "node:net"

export interface Reply {
  readonly status: number
  readonly headers?: Record<string, string>
  readonly body?: unknown
  /** Sent as is, instead of `body` as JSON. */
  readonly text?: string
  /** Announce the whole body, send half of it, then close the connection. */
  readonly cut?: boolean
  /** Server-sent events (a recorded stream), sent as `text/event-stream`, one write per event. */
  readonly sse?: string
  /** With `sse`: send this many events, then close the connection. */
  readonly cutAfterEvents?: number
  /** With `sse`: send this many events, then nothing more (the connection stays open). */
  readonly holdAfterEvents?: number
  /** Binary frames (AWS event stream messages), one write each, with `headers` giving the content type. */
  readonly frames?: ReadonlyArray<Uint8Array>
}

/** A recorded stream's text (test/fixtures/<path>). */
export const sseFixture = (path: string): string => readFileSync(new URL(`../fixtures/${path}`, import.meta.url), "utf8")

export interface Received {
  readonly method: string
  readonly url: string
  readonly headers: IncomingHttpHeaders
  readonly body: any
  /** The body as it came, for a test that checks a signature over its bytes. */
  readonly raw: string
}

export interface FixtureServer {
  readonly url: string
  readonly received: Array<Received>
  /** Requests whose socket closed before a reply was sent. */
  readonly closedEarly: () => number
  /** Resolves once `n` requests have arrived. */
  readonly waitFor: (n: number) => Promise<void>
  readonly waitForClose: () => Promise<void>
}

/** A fixture file's JSON (test/fixtures/<path>). */
export const fixture = (path: string): any =>
  JSON.parse(readFileSync(new URL(`../fixtures/${path}`, import.meta.url), "utf8"))

/** Starts the server for the scope of the test; `replies` are used in order. */
export const fixtureServer = (replies: ReadonlyArray<Reply | "hang">) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ server: Server; api: FixtureServer }>((resolve) => {
        const received: Array<Received> = []
        const waiters: Array<() => void> = []
        let closedEarly = 0
        let next = 0
        const notify = () => waiters.splice(0).forEach((wake) => wake())
        const server = createServer((req, res) => {
          let data = ""
          req.on("data", (chunk) => (data += chunk))
          req.on("end", () => {
            received.push({
              method: req.method ?? "",
              url: req.url ?? "",
              headers: req.headers,
              body: data === "" ? undefined : JSON.parse(data),
              raw: data
            })
            const reply = replies[next++]
            notify()
            if (reply === undefined) {
              res.writeHead(500, { "content-type": "application/json" }).end("{\"error\":{\"message\":\"no reply left\"}}")
            } else if (reply === "hang") {
              res.on("close", () => {
                closedEarly++
                notify()
              })
            } else if (reply.frames !== undefined) {
              res.writeHead(reply.status, reply.headers)
              for (const frame of reply.frames) res.write(frame)
              res.end()
            } else if (reply.sse !== undefined) {
              res.writeHead(reply.status, { "content-type": "text/event-stream", "cache-control": "no-cache", ...reply.headers })
              const events = reply.sse.split("\n\n").filter((e) => e.trim() !== "").map((e) => `${e}\n\n`)
              const upTo = reply.cutAfterEvents ?? reply.holdAfterEvents
              for (const event of upTo === undefined ? events : events.slice(0, upTo)) res.write(event)
              if (reply.cutAfterEvents !== undefined) res.write("", () => res.destroy())
              else if (reply.holdAfterEvents === undefined) res.end()
            } else {
              const text = reply.text ?? JSON.stringify(reply.body)
              if (reply.cut === true) {
                const length = String(Buffer.byteLength(text))
                res.writeHead(reply.status, { "content-type": "application/json", "content-length": length, ...reply.headers })
                res.write(text.slice(0, Math.floor(text.length / 2)), () => res.destroy())
              } else {
                res.writeHead(reply.status, { "content-type": "application/json", ...reply.headers })
                res.end(text)
              }
            }
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          const until = (ready: () => boolean) =>
            new Promise<void>((wake) => {
              const check = () => (ready() ? wake() : waiters.push(check))
              check()
            })
          resolve({
            server,
            api: {
              url: `http://127.0.0.1:${port}`,
              received,
              closedEarly: () => closedEarly,
              waitFor: (n) => until(() => received.length >= n),
              waitForClose: () => until(() => closedEarly > 0)
            }
          })
        })
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ api }) => api))
