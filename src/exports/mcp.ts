/**
 * `agent-tools/mcp`: the same tools for any MCP client (`Mcp`: stdio and Streamable HTTP servers),
 * and remote MCP servers' tools run through the pipeline (`McpClient`). Needs the package
 * `@modelcontextprotocol/sdk`.
 */
export * as Mcp from "../Mcp.js"
export * as McpClient from "../McpClient.js"
