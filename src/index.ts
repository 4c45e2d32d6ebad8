/** agent-tools: one tool definition, run by agents, served to a platform, and spoken over MCP. */
export * as Invocation from "./Invocation.js"
export * as RetryPolicy from "./RetryPolicy.js"
export * as Tool from "./Tool.js"
export * as ToolContext from "./ToolContext.js"
export * as Toolkit from "./Toolkit.js"
