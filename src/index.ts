/**
 * agent-tools: one tool definition, run by agents, served to a platform, and spoken over MCP. The
 * root holds what every app uses (tools, toolkits, the pipeline, the agent loop, the scripted model,
 * hooks, the journal and dedupe stores); the rest comes through its own entry, loading its own
 * packages: `agent-tools/providers`, `agent-tools/effect-ai`, `agent-tools/mcp`, `agent-tools/serve`,
 * `agent-tools/protocol`, `agent-tools/platform` and `agent-tools/cluster`.
 */
export * as Agent from "./Agent.js"
export * as Builtins from "./Builtins.js"
export * as Content from "./Content.js"
export * as Hooks from "./Hooks.js"
export * as Idempotency from "./Idempotency.js"
export * as Ids from "./Ids.js"
export * as Invocation from "./Invocation.js"
export * as Journal from "./Journal.js"
export * as LanguageModel from "./LanguageModel.js"
export * as Sampling from "./Sampling.js"
export * as Telemetry from "./Telemetry.js"
export * as Timing from "./Timing.js"
export * as Tool from "./Tool.js"
export * as ToolContext from "./ToolContext.js"
export * as ToolResult from "./ToolResult.js"
export * as Toolkit from "./Toolkit.js"
export * as UserPrompt from "./UserPrompt.js"
export * as WorkerPool from "./WorkerPool.js"
export * as Cost from "./Cost.js"
export * as RateLimit from "./RateLimit.js"
export * as Guardrail from "./Guardrail.js"
export * as Session from "./Session.js"
