/**
 * An MCP server over stdio whose tool list changes (the SDK's low-level `Server`): it starts with the
 * tools named in argv, and `add_tool` adds one and sends `notifications/tools/list_changed`.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"

const names = [...process.argv.slice(2)]
const server = new Server({ name: "list-changing", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } })
const empty = { type: "object" as const, properties: {}, additionalProperties: false }

server.setRequestHandler(ListToolsRequestSchema, () => ({
  tools: [
    {
      name: "add_tool",
      description: "Add a tool.",
      inputSchema: { type: "object", properties: { name: { type: "string" } }, required: ["name"], additionalProperties: false }
    },
    ...names.map((name) => ({ name, description: `The tool ${name}.`, inputSchema: empty }))
  ]
}))
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  if (request.params.name === "add_tool") {
    names.push(String(request.params.arguments?.name))
    await server.sendToolListChanged()
    return { content: [{ type: "text", text: "added" }] }
  }
  return { content: [{ type: "text", text: `${request.params.name} ran` }] }
})

await server.connect(new StdioServerTransport())
