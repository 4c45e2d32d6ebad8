/**
 * MCP over stdio as its clients run it: `src/main.ts mcp` spawned as a child process. When stdin
 * closes it exits at once, code 0; a line over the SDK's limit is logged and exits non-zero. The
 * waits for start-up are generous bounds (a loaded machine starts tsx slowly); what is asserted
 * is the exit after stdin closes. In the slow project: it starts real processes.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { record } from "./support/figures.js"
import { initialize } from "./support/mcpHttp.js"
import { answers, initialized } from "./support/mcpStdio.js"

const root = fileURLToPath(new URL("..", import.meta.url))

/** `node --import tsx src/main.ts mcp`, with its debug log (which says when it serves) on a pipe. */
const spawnMcp = () => {
  const env = { ...process.env, LOG_LEVEL: "debug", ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "" }
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "mcp"], { cwd: root, env, stdio: "pipe" })
  let stderr = ""
  // Whether it said it serves within 120 s (a bound for a loaded machine, not a speed target).
  const serving = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), 120_000)
    child.stderr.on("data", (chunk) => {
      stderr += String(chunk)
      if (stderr.includes("MCP over stdio: serving")) {
        clearTimeout(timer)
        resolve(true)
      }
    })
  })
  // The child may be gone when the test writes its last bytes.
  child.stdin.on("error", () => undefined)
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  /** Milliseconds from now to the child's exit, and its code; "still running" after `millis`. */
  const exitWithin = (millis: number) => {
    const start = Date.now()
    return Promise.race([
      exited.then((code) => ({ code, millis: Date.now() - start })),
      new Promise<"still running">((resolve) => setTimeout(() => resolve("still running"), millis))
    ]).finally(() => child.kill("SIGKILL"))
  }
  const send = (message: unknown) => child.stdin.write(JSON.stringify(message) + "\n")
  return { child, serving, exitWithin, send, stderr: () => stderr, ...answers(child.stdout) }
}

const figures: Array<string> = []

describe("Mcp over stdio: the process, spawned as an MCP client would", () => {
  it("exits, code 0, within a second or two of stdin closing, fresh", async () => {
    const mcp = spawnMcp()
    assert.isTrue(await mcp.serving, mcp.stderr())
    mcp.child.stdin.end()
    const exit = await mcp.exitWithin(3_000)
    assert.notStrictEqual(exit, "still running", mcp.stderr())
    if (exit !== "still running") {
      assert.strictEqual(exit.code, 0, mcp.stderr())
      figures.push(`fresh ${(exit.millis / 1000).toFixed(2)} s`)
    }
  }, 240_000)

  it("exits, code 0, within a second or two of stdin closing, after traffic", async () => {
    const mcp = spawnMcp()
    mcp.send(initialize)
    assert.isDefined((await mcp.answer(1)).result)
    mcp.send(initialized)
    mcp.send({ jsonrpc: "2.0", id: 2, method: "tools/list" })
    const args = { customer_id: "cus-1207" }
    mcp.send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "lookup_customer", arguments: args } })
    assert.isDefined((await mcp.answer(2)).result)
    assert.deepStrictEqual((await mcp.answer(3)).result, {
      content: [{ type: "text", text: "{\"id\":\"cus-1207\",\"name\":\"Ada Moreau\",\"tier\":\"gold\"}" }],
      structuredContent: { id: "cus-1207", name: "Ada Moreau", tier: "gold" }
    })
    mcp.child.stdin.end()
    const exit = await mcp.exitWithin(3_000)
    // Only protocol messages on stdout.
    assert.deepStrictEqual(mcp.noise, [])
    assert.notStrictEqual(exit, "still running", mcp.stderr())
    if (exit !== "still running") {
      assert.strictEqual(exit.code, 0, mcp.stderr())
      figures.push(`after traffic ${(exit.millis / 1000).toFixed(2)} s`)
    }
    record({
      suite: "hostile input",
      measure: "stdio exit after stdin closes",
      value: figures.join(", "),
      expected: "< 3 s, code 0"
    })
  }, 240_000)

  it("a line over the SDK's 10 MiB limit: the reason on stderr and a non-zero exit", async () => {
    const mcp = spawnMcp()
    mcp.send(initialize)
    assert.isDefined((await mcp.answer(1)).result)
    mcp.child.stdin.write(Buffer.alloc(10 * 1024 * 1024 + 1024, "a"))
    const exit = await mcp.exitWithin(10_000)
    assert.notStrictEqual(exit, "still running", mcp.stderr())
    if (exit !== "still running") assert.notStrictEqual(exit.code, 0)
    assert.match(
      mcp.stderr(),
      /level=ERROR .*MCP over stdio failed: ReadBuffer exceeded maximum size of 10485760 bytes; the server stops/
    )
  }, 240_000)
})

