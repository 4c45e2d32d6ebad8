/** The shop's tools over MCP: stdio, or Streamable HTTP. */
import { Effect, Layer, Schema } from "effect"
import { Content, Tool, ToolContext, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
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

// #region progress
/** Imports rows, saying how far it is and what it skipped: to the MCP client that called it, if any. */
export const importRows = Tool.make("import_rows", {
  description: "Import the rows of a CSV text.",
  input: { csv: Schema.String },
  output: Schema.Struct({ imported: Schema.Number }),
  timeout: "60 seconds"
}, ({ csv }) =>
  Effect.gen(function*() {
    const rows = csv.split("\n").filter((row) => row !== "")
    let imported = 0
    for (const [i, row] of rows.entries()) {
      if (row.split(",").length < 2) yield* ToolContext.log("warning", `row ${i + 1} has one column; skipped`)
      else imported++
      yield* ToolContext.progress(i + 1, rows.length, `row ${i + 1} of ${rows.length}`)
    }
    return { imported }
  }))
// #endregion

// #region content
/** A chart as an image, with a line of text: MCP content rather than JSON. */
export const salesChart = Tool.make("sales_chart", {
  description: "Draw the month's sales as a PNG chart.",
  input: { month: Schema.String },
  output: Content.Items, // a mix; Content.Item for one item
  timeout: "10 seconds"
}, ({ month }) =>
  Effect.succeed([
    Content.text(`sales of ${month}`),
    Content.image({ data: drawChart(month), mimeType: "image/png" }) // bytes, or base64 already
  ]))
// #endregion

/** A stand-in for a real chart: the PNG signature. */
const drawChart = (_month: string): Uint8Array => new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
