/** MCP tasks kept in a SQLite file, a client following one, and OAuth on the HTTP server. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  TaskStatusNotificationSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Layer, Schema } from "effect"
import { Tool, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"

// #region tasks
/** A report that takes minutes: clients call it as a task and poll for it. */
export const buildReport = Tool.make("build_report", {
  description: "Build the monthly report for a month (YYYY-MM).",
  input: { month: Schema.String },
  output: Schema.Struct({ url: Schema.String }),
  timeout: "10 minutes",
  idempotent: true // run again after a crash, under the same task id
}, ({ month }) => Effect.succeed({ url: `https://reports.example.com/${month}.pdf` }))

export const serveWithTasks = Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(buildReport)
  const server = Mcp.layerHttp(toolkit, {
    port: 8788,
    tokens: new Map([["tok-1", "ide"], ["tok-2", "ci"]]), // each client sees only its own tasks
    tasks: { tools: { build_report: "required" }, ttl: "1 day" }
  })
  return yield* Layer.launch(server.pipe(Layer.provide(Mcp.Tasks.layerSql({ filename: "mcp-tasks.sqlite" }))))
})
// #endregion

// #region client
/** The official client: a task-augmented call, answered at once; then tasks/get until it ends, and tasks/result. */
export const followTask = async (url: string) => {
  const client = new Client({ name: "reports", version: "1.0.0" })
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: "Bearer tok-1" } } }))
  const { task } = await client.request(
    { method: "tools/call", params: { name: "build_report", arguments: { month: "2026-11" }, task: { ttl: 3_600_000 } } },
    CreateTaskResultSchema
  )
  let status = task.status
  while (status === "working" || status === "input_required") {
    await new Promise((resolve) => setTimeout(resolve, task.pollInterval ?? 1000))
    status = (await client.experimental.tasks.getTask(task.taskId)).status
  }
  return client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
}
// #endregion

// #region ask
/** A client that is told each status change, and answers the approvals its tasks wait for. */
export const answerApprovals = async (url: string, approve: (question: string) => Promise<boolean>) => {
  const client = new Client({ name: "reports", version: "1.0.0" }, { capabilities: { elicitation: {} } })
  client.setNotificationHandler(TaskStatusNotificationSchema, ({ params }) => {
    console.log(`task ${params.taskId}: ${params.status}${params.statusMessage ? ` (${params.statusMessage})` : ""}`)
  })
  // "Allow build_report {...}? [y/N]", its task named in _meta["io.modelcontextprotocol/related-task"].
  client.setRequestHandler(ElicitRequestSchema, async ({ params }) => ({
    action: "accept",
    content: { answer: (await approve(params.message)) ? "yes" : "no" }
  }))
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: "Bearer tok-1" } } }))
  return client
}
// #endregion

// #region oauth
/** Access tokens of an OAuth authorization server, for this server's canonical URL, in place of static tokens. */
export const serveWithOAuth = Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(buildReport)
  return yield* Layer.launch(Mcp.layerHttp(toolkit, {
    port: 8788,
    oauth: {
      issuer: "https://auth.example.com",          // its metadata names its JWKS (or give jwksUri)
      resource: "https://mcp.example.com/mcp",      // tokens must carry it as their audience
      scopes: ["mcp"],                              // every request
      toolScopes: { build_report: "reports.build" } // a tools/call of build_report
    }
  }))
})
// #endregion
