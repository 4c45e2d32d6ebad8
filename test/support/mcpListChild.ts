/**
 * An MCP server over stdio on the SDK's low-level `Server`, with a tool of each result shape, whose
 * tool list changes: it starts with the tools named in argv too, and `add_tool` adds one (with the
 * schemas it is given, or an input schema nested `depth` levels deep; `count` of them, numbered,
 * past 1) and sends `notifications/tools/list_changed`.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError
} from "@modelcontextprotocol/sdk/types.js"

/** The tools added, by name, with schemas of their own when `add_tool` gave them. */
interface Added {
  readonly name: string
  readonly inputSchema?: unknown
  readonly outputSchema?: unknown
}
const added: Array<Added> = process.argv.slice(2).map((name) => ({ name }))
const server = new Server({ name: "list-changing", version: "1.0.0" }, {
  capabilities: { tools: { listChanged: true } }
})
const empty = { type: "object" as const, properties: {} }

/** The fixed tools, and the result each gives. */
const shapes: Record<string, CallToolResult> = {
  mixed: { content: [{ type: "text", text: "a chart" }, { type: "image", data: "AAAA", mimeType: "image/png" }] },
  structured: { content: [{ type: "text", text: "{\"n\":1}" }], structuredContent: { n: 1 } },
  bad_output: { content: [{ type: "text", text: "{\"n\":\"x\"}" }], structuredContent: { n: "x" } },
  failing: { content: [{ type: "text", text: "the quota is spent" }, { type: "text", text: "retry tomorrow" }], isError: true }
}

server.setRequestHandler(ListToolsRequestSchema, () => ({
  tools: [
    {
      name: "add_tool",
      description: "Add a tool.",
      inputSchema: {
        type: "object",
        properties: {
          name: { type: "string" },
          inputSchema: { type: "object" },
          outputSchema: { type: "object" },
          depth: { type: "number" },
          count: { type: "number" }
        },
        required: ["name"],
        additionalProperties: false
      }
    },
    { name: "refused", description: "Answers with a JSON-RPC error.", inputSchema: empty },
    ...Object.keys(shapes).map((name) => ({
      name,
      description: `Answers a ${name} result.`,
      inputSchema: empty,
      ...(name === "bad_output"
        ? { outputSchema: { type: "object" as const, properties: { n: { type: "number" } }, required: ["n"] } }
        : {})
    })),
    ...added.map(({ inputSchema, name, outputSchema }) => ({
      name,
      description: `The tool ${name}.`,
      inputSchema: inputSchema ?? empty,
      ...(outputSchema === undefined ? {} : { outputSchema })
    }))
  ]
}))
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const name = request.params.name
  if (name === "add_tool") {
    const { count, depth, ...tool } = request.params.arguments as unknown as Added & { depth?: number; count?: number }
    const inputSchema = depth === undefined ? tool.inputSchema : nested(depth)
    if (count === undefined) added.push({ ...tool, inputSchema })
    else for (let i = 1; i <= count; i++) added.push({ ...tool, name: `${tool.name}_${i}`, inputSchema })
    await server.sendToolListChanged()
    return { content: [{ type: "text", text: "added" }] }
  }
  if (name === "refused") throw new McpError(ErrorCode.InvalidParams, "refused: not today")
  return shapes[name] ?? { content: [{ type: "text", text: `${name} ran` }] }
})

/** An object schema whose one property is an object schema, `depth` levels down. */
function nested(depth: number): unknown {
  let schema: unknown = { type: "string" }
  for (let i = 0; i < depth; i++) schema = { type: "object", properties: { a: schema } }
  return schema
}

await server.connect(new StdioServerTransport())
