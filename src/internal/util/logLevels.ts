/** MCP's log levels (syslog's) and Effect's: one mapping, for a call's log lines and a remote server's. */
import * as LogLevel from "effect/LogLevel"

/** The levels of MCP's log lines, lowest first. */
export type McpLogLevel = "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency"

/** Effect's level for an MCP level. */
export const effectLevels: Record<McpLogLevel, LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  notice: LogLevel.Info,
  warning: LogLevel.Warning,
  error: LogLevel.Error,
  critical: LogLevel.Fatal,
  alert: LogLevel.Fatal,
  emergency: LogLevel.Fatal
}
