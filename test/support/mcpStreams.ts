/**
 * `Mcp.serveStdio` on in-process streams, and the official client on the other ends: the stdio
 * framing of a spawned server without a process. The client's transport records every message it reads.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { PassThrough } from "node:stream"
import { type Toolkit } from "../../src/index.js"
import { Mcp } from "../../src/exports/mcp.js"

/** A client transport over a pair of streams, newline-delimited JSON as the SDK's stdio transports. */
class StreamsTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  readonly received: Array<JSONRPCMessage> = []
  private readonly buffer = new ReadBuffer()
  constructor(private readonly input: PassThrough, private readonly output: PassThrough) {}
  async start() {
    this.input.on("data", (chunk: Buffer) => {
      this.buffer.append(chunk)
      for (let message = this.buffer.readMessage(); message !== null; message = this.buffer.readMessage()) {
        this.received.push(message)
        this.onmessage?.(message)
      }
    })
  }
  async send(message: JSONRPCMessage) {
    this.output.write(serializeMessage(message))
  }
  async close() {
    this.output.end()
    this.onclose?.()
  }
}

/** The toolkit served over stdio framing in this process, and a connected client; both end with the scope. */
export const mcpStdioClient = (
  toolkit: Toolkit.Toolkit<any>,
  options?: Mcp.Options,
  client: Client = new Client({ name: "test", version: "1.0.0" })
) =>
  Effect.gen(function*() {
    const toServer = new PassThrough()
    const toClient = new PassThrough()
    yield* Effect.forkScoped(Mcp.serveStdio(toolkit as Toolkit.Toolkit<never>, { ...options, stdin: toServer, stdout: toClient }))
    const transport = new StreamsTransport(toClient, toServer)
    yield* Effect.acquireRelease(
      Effect.promise(() => client.connect(transport)),
      () => Effect.promise(() => client.close())
    )
    return { client, received: transport.received }
  })
