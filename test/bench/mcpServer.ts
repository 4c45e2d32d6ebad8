/**
 * The MCP bench's server (test/bench/mcp.ts): the `add` tool over stdio, `--server=ours` (a Toolkit
 * of `Tool.make` served by `Mcp.serveStdio`, as `src/main.ts mcp` runs it: tracing on, logs on
 * stderr), `--server=untraced` (the same with tracing disabled) or `--server=sdk` (the SDK's
 * `McpServer` with zod, the same input and output schemas).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { Effect, Logger, Schema } from "effect"
import { z } from "zod"
import { Tool, Toolkit } from "../../src/index.js"
import { Mcp } from "../../src/exports/mcp.js"

const server = process.argv.find((arg) => arg.startsWith("--server="))?.slice("--server=".length)

/** Adds two numbers: the bench's tool, written with `Tool.make`. */
const add = Tool.make("add", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))

if (server === "ours" || server === "untraced") {
  Effect.runPromise(Effect.flatMap(Toolkit.make(add), (toolkit) => Mcp.serveStdio(toolkit)).pipe(
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))),
    Effect.withTracerEnabled(server === "ours")
  )).then(() => process.exit(0), () => process.exit(1))
} else if (server === "sdk") {
  const sdk = new McpServer({ name: "sdk-bench", version: "0.1.0" })
  // The same answer as ours: a number goes out as `{ result }`, as text and as structured content.
  sdk.registerTool("add", {
    description: "Add two numbers.",
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { result: z.number() }
  }, ({ a, b }) => {
    const structured = { result: a + b }
    return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured }
  })
  process.stdin.once("end", () => process.exit(0))
  void sdk.connect(new StdioServerTransport())
} else {
  process.stderr.write("usage: mcpServer.ts --server=ours|untraced|sdk\n")
  process.exit(2)
}
