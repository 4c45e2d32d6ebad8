/**
 * `agent-tools/serve`: a process that serves its tools to the platform (`Serve`: registration,
 * heartbeat, deliveries at least once, deduplicated, inside deadlines; tasks submitted and followed)
 * through its client (`PlatformClient`, WebSocket and in-process).
 */
export * as PlatformClient from "../PlatformClient.js"
export * as Serve from "../Serve.js"
