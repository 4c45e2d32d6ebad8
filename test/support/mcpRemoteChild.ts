/** The remote tools over MCP stdio, in a child process; `exit` ends the process in the middle of its call. */
import { Effect, Logger } from "effect"
import { Tool, Toolkit } from "../../src/index.js"
import { Mcp } from "../../src/exports/mcp.js"
import { makeSeen, remoteTools } from "./mcpRemoteTools.js"

const exit = Tool.make("exit", { description: "Ends the server in the middle of the call.", input: {}, timeout: "10 seconds" }, () =>
  Effect.async<never>(() => {
    setTimeout(() => process.exit(3), 20)
  }))

const toolkit = Effect.runSync(Toolkit.make(...remoteTools(makeSeen()), exit))

// Only protocol messages on stdout.
Effect.runPromise(Mcp.serveStdio(toolkit).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, Logger.none)))).then(
  () => process.exit(0),
  () => process.exit(1)
)
