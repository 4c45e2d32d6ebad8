/**
 * `agent-tools/platform`: the platform in one process (`PlatformServer`: agents, tasks, delivery,
 * the WebSocket server); `agent-tools/cluster` runs it on `@effect/cluster` and PostgreSQL.
 */
export * as PlatformServer from "../platform/Server.js"
