// @effect-diagnostics globalErrorInEffectFailure:off
/**
 * MCP over HTTP: a client that opens its session's event stream (GET) and never reads it (design: Hostile
 * clients). What the server sends it waits in the server's memory until `maxStreamBufferedBytes`, then the
 * stream is closed; the session goes on, and may open another stream.
 */
import { assert, describe, it } from "@effect/vitest"
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { connect, type Socket } from "node:net"
import { mcpServer, initialize } from "./support/mcpHttp.js"
import { Tool, ToolContext, Toolkit } from "../src/index.js"

const KiB = 1024

/** Logs `lines` lines of `size` characters each: a flood on the session's stream. */
const flood = Tool.make("flood", {
  description: "Logs many long lines.",
  input: {},
  timeout: "30 seconds"
}, () =>
  Effect.gen(function*() {
    const line = "x".repeat(64 * KiB)
    for (let i = 0; i < 512; i++) {
      yield* ToolContext.log("info", `${i} ${line}`)
      if (i % 16 === 15) yield* Effect.sleep("1 millis")
    }
    return "flooded"
  }))

/** A JSON-RPC POST to the session (or none, for `initialize`): its status, its session id and its body. */
const post = (port: number, body: unknown, session?: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(session === undefined ? {} : { "mcp-session-id": session, "mcp-protocol-version": LATEST_PROTOCOL_VERSION })
      },
      body: JSON.stringify(body)
    })
    return { status: response.status, session: response.headers.get("mcp-session-id") ?? undefined, text: await response.text() }
  })

/** A GET of the session's event stream on a raw socket; resolves with its status line, then reads nothing more. */
const openStream = (port: number, session: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly socket: Socket; readonly status: string }>((resume) => {
      const socket = connect(port, "127.0.0.1", () =>
        socket.write(
          `GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\naccept: text/event-stream\r\n` +
            `mcp-session-id: ${session}\r\nmcp-protocol-version: ${LATEST_PROTOCOL_VERSION}\r\n\r\n`
        ))
      socket.once("data", (data) => {
        // The client stops reading: what the server writes now waits in the kernel's buffers, then in the server's.
        socket.pause()
        resume(Effect.succeed({ socket, status: String(data).split("\r\n")[0]! }))
      })
    }),
    ({ socket }) => Effect.sync(() => socket.destroy())
  )

describe("Mcp over HTTP: a client that does not read its stream", () => {
  it.live("its stream is closed once maxStreamBufferedBytes wait for it; the session goes on and opens another", () =>
    Effect.gen(function*() {
      const port = yield* mcpServer(yield* Toolkit.make(flood), undefined, { maxStreamBufferedBytes: 256 * KiB })
      const opened = yield* post(port, initialize)
      assert.strictEqual(opened.status, 200)
      const session = opened.session!
      yield* post(port, { jsonrpc: "2.0", method: "notifications/initialized" }, session)
      yield* post(port, { jsonrpc: "2.0", id: 2, method: "logging/setLevel", params: { level: "info" } }, session)
      const first = yield* openStream(port, session)
      assert.match(first.status, /^HTTP\/1\.1 200/)
      // One stream a session: while the first is open, another is refused.
      const refused = yield* openStream(port, session)
      assert.match(refused.status, /^HTTP\/1\.1 409/)
      // 32 MiB of log lines for a client that reads none: more than the kernel's buffers hold.
      const called = yield* post(port, { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "flood", arguments: {} } }, session)
      assert.strictEqual(called.status, 200)
      assert.include(called.text, "flooded")
      // The first stream was closed by the server: the session opens another.
      const again = yield* openStream(port, session)
      assert.match(again.status, /^HTTP\/1\.1 200/)
    }).pipe(Effect.scoped), 60_000)
})
