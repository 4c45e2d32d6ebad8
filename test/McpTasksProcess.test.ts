/**
 * Durable MCP tasks across a real crash: `agent-tools mcp --http --journal <file>` spawned, two tasks of 5 s tools
 * created with the official client, the server SIGKILLed mid-call and started again on the same file. The same
 * task ids answer, once the killed server's hold on them lapsed: the idempotent tool's completes with its side
 * effect once (under its task id), the other's fails, its outcome unknown. The same on PostgreSQL (the tests' own server; its URL in `MCP_JOURNAL`, where a
 * password belongs). The waits for start-up are generous bounds; in the slow project (real processes).
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema, CreateTaskResultSchema, type GetTaskResult } from "@modelcontextprotocol/sdk/types.js"
import { spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { startPostgres } from "./support/postgres.js"

const root = fileURLToPath(new URL("..", import.meta.url))

/** Where the tasks are kept: a file given as `--journal`, or a URL given as `MCP_JOURNAL`. */
type Journal = { readonly file: string } | { readonly url: string }

/** `src/main.ts mcp --http` on `journal`, and the port it said it listens on (within 120 s, for a loaded machine). */
const startServer = (journal: Journal, effects: string) => {
  const { MCP_TOKENS: _tokens, MCP_JOURNAL: _journal, ...inherited } = process.env
  const env = {
    ...inherited,
    LOG_LEVEL: "info",
    MCP_TASK_EFFECTS: effects,
    ANTHROPIC_API_KEY: "",
    OPENAI_API_KEY: "",
    ...("url" in journal ? { MCP_JOURNAL: journal.url } : {})
  }
  const args = [
    "--import", "tsx", "src/main.ts", "mcp", "--http", "--port", "0", "--tools", "test/fixtures/mcpTaskTools.ts",
    ...("file" in journal ? ["--journal", journal.file] : [])
  ]
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: "pipe" })
  let output = ""
  const port = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no port within 120 s:\n${output}`)), 120_000)
    const onData = (chunk: unknown) => {
      output += String(chunk)
      const found = /127\.0\.0\.1:(\d+)\/mcp/.exec(output)
      if (found !== null) {
        clearTimeout(timer)
        resolve(Number(found[1]))
      }
    }
    child.stdout.on("data", onData)
    child.stderr.on("data", onData)
    child.on("exit", () => reject(new Error(`the server exited:\n${output}`)))
  })
  return { child, port, output: () => output }
}

const connect = async (port: number) => {
  const client = new Client({ name: "crash-test", version: "1.0.0" })
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)))
  return client
}

const createTask = async (client: Client, name: string) =>
  (await client.request({ method: "tools/call", params: { name, arguments: {}, task: {} } }, CreateTaskResultSchema)).task.taskId

/**
 * `tasks/get` every 200 ms until the task leaves `working` (120 s at most: the killed server's leases lapse 10 s
 * after its last renewal, and then the tool takes 5 s).
 */
const settled = async (client: Client, taskId: string): Promise<GetTaskResult> => {
  for (let i = 0; i < 600; i++) {
    const task = await client.experimental.tasks.getTask(taskId)
    if (task.status !== "working") return task
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`task ${taskId} still working after 120 s`)
}

/**
 * Two tasks created on a server on `journal`, the server SIGKILLed mid-call, started again on it: the same task
 * ids answer; the idempotent tool's completes with its side effect once, the other's fails, outcome unknown.
 */
const crashAndResume = async (journal: Journal, dir: string) => {
  const effects = join(dir, "effects.txt")
  const first = startServer(journal, effects)
  const client1 = await connect(await first.port)
  const slow = await createTask(client1, "slow_write")
  const once = await createTask(client1, "once_write")
  assert.strictEqual((await client1.experimental.tasks.getTask(slow)).status, "working")
  // Mid-call: the tools write after 5 s; the kill comes before.
  await new Promise((resolve) => setTimeout(resolve, 500))
  first.child.kill("SIGKILL")
  await new Promise((resolve) => first.child.once("exit", resolve))
  assert.isFalse(existsSync(effects), "no effect before the kill")
  const second = startServer(journal, effects)
  try {
    const client2 = await connect(await second.port)
    const slowTask = await settled(client2, slow)
    assert.strictEqual(slowTask.status, "completed", second.output())
    const result = await client2.experimental.tasks.getTaskResult(slow, CallToolResultSchema)
    assert.deepStrictEqual(result.structuredContent, { result: "slow_write done" })
    const onceTask = await settled(client2, once)
    assert.strictEqual(onceTask.status, "failed")
    assert.include(onceTask.statusMessage ?? "", "its outcome is unknown")
    assert.deepStrictEqual(readFileSync(effects, "utf8").trim().split("\n"), [`slow_write:${slow}`])
    await client2.close()
    return second.output()
  } finally {
    second.child.kill("SIGKILL")
  }
}

describe("Mcp tasks across a killed server process", () => {
  it("the same task ids: the idempotent tool's completes with its effect once, the other's fails, outcome unknown", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-crash-"))
    await crashAndResume({ file: join(dir, "tasks.sqlite") }, dir)
  }, 300_000)

  it("on PostgreSQL (MCP_JOURNAL a postgres:// URL): the same, the tasks kept in the database", async () => {
    const dir = mkdtempSync(join(tmpdir(), "mcp-tasks-crash-pg-"))
    const pg = await startPostgres()
    try {
      const output = await crashAndResume({ url: pg.url }, dir)
      // Kept in the database, its URL logged without the password.
      assert.include(output, `tasks in postgres://***:***@127.0.0.1:${pg.port}/`)
      assert.notInclude(output, pg.password)
    } finally {
      await pg.stop()
    }
  }, 300_000)
})
