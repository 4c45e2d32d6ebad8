/** Another MCP server's tools beside our own: the package's demo tools, spawned over stdio, for an agent. */
import { Effect, Layer, Stream } from "effect"
import { Agent, Tool, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"

const today = Tool.make("today", { description: "Today's date, YYYY-MM-DD.", input: {}, timeout: "1 second" }, () =>
  new Date().toISOString().slice(0, 10))

/** Connects, runs the agent on `prompt` with the remote tools and a local one, and disconnects. */
export const main = (prompt: string) =>
  Effect.scoped(Effect.gen(function*() {
    // #region connect
    const remote = yield* Mcp.toolkit({
      command: "npx",                     // stdio: the server is a child process, ended with the scope
      args: ["agent-tools", "mcp"],       // or { url: "http://127.0.0.1:8788/mcp", headers } over Streamable HTTP
      prefix: "shop_",                    // shop_lookup_order, shop_issue_refund, ...
      timeout: "30 seconds",              // the default timeout of its tools
      tools: {                            // by the server's names, the options of Tool.make
        issue_refund: { retries: 2, idempotent: true, needsApproval: true },
        lookup_order: { timeout: "5 seconds" }
      }
    })
    // #endregion

    // #region changes
    // The tools change when the server sends notifications/tools/list_changed.
    yield* remote.changes.pipe(
      Stream.runForEach((tools) => Effect.logInfo(`the server lists ${tools.map((t) => t.name).join(", ")}`)),
      Effect.forkScoped
    )
    // #endregion

    // #region agent
    // Read per run: a run keeps the tools it started with, the next one sees a list change.
    const agent = Agent.make({ tools: [today, ...(yield* remote.tools)] })
    return yield* Agent.run(agent, prompt)
    // #endregion
  }))

/** The remote tools and a local one, checked together and served again over MCP. */
export const serveAgain = Effect.scoped(Effect.gen(function*() {
  const remote = yield* Mcp.toolkit({ command: "npx", args: ["agent-tools", "mcp"], prefix: "shop_" })
  // #region serve
  // A clash with a local name, or a name past the limits, is a ManifestError naming the tool and the rule.
  const toolkit = yield* Toolkit.make(today, ...(yield* remote.tools))
  return yield* Layer.launch(Mcp.layerHttp(toolkit, { port: 8789 })) // the server's schemas, as it gave them
  // #endregion
}))
