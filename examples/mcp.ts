/** The shop's tools over MCP: stdio, or Streamable HTTP. */
import { Effect, Layer } from "effect"
import { Mcp, Toolkit } from "../src/index.js"
import { issueRefund, lookupOrder } from "./tools.js"

/** Serves over HTTP or stdio until stopped. */
export const serve = (http: boolean) =>
  Effect.gen(function*() {
    const toolkit = yield* Toolkit.make(lookupOrder, issueRefund)
    // #region serve
    if (!http) return yield* Mcp.serveStdio(toolkit)                    // until stdin closes; logs belong on stderr
    return yield* Layer.launch(Mcp.layerHttp(toolkit, { port: 8788 })) // 127.0.0.1, path /mcp, sessions
    // #endregion
  })
