/**
 * `platform --config FILE` gives the platform the options at the file's top level (docs: configuration, "The
 * platform's agents"), as processes: a platform whose file sets `heartbeatInterval`, a `serve` process that
 * registers with it and logs the interval the platform told it.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))

/** `src/main.ts args` as a process; its output so far, and a wait for a pattern in it. */
const start = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "src/main.ts", ...args], {
    cwd: root,
    env: { ...process.env, ...env }
  })
  let text = ""
  child.stdout?.on("data", (d) => (text += String(d)))
  child.stderr?.on("data", (d) => (text += String(d)))
  const until = (pattern: RegExp, timeoutMillis: number) =>
    new Promise<RegExpExecArray | undefined>((resolve) => {
      const started = Date.now()
      const check = () => {
        const found = pattern.exec(text)
        if (found !== null) return resolve(found)
        if (Date.now() - started > timeoutMillis || child.exitCode !== null) return resolve(undefined)
        setTimeout(check, 50)
      }
      check()
    })
  return { child, until, text: () => text }
}

describe("platform --config: the platform's own options", () => {
  it("heartbeatInterval of the file is the interval the platform gives its serving processes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-config-options-"))
    const running: Array<ChildProcess> = []
    try {
      const file = join(dir, "platform.json")
      writeFileSync(file, JSON.stringify({
        heartbeatInterval: "7 seconds",
        keepEndedTasks: "30 minutes",
        agents: { "agent-1": { tokens: ["tok-agent-1-0123456789"] } }
      }))
      const platform = start(["platform", "--port", "0", "--config", file], { PLATFORM_TOKENS: "" })
      running.push(platform.child)
      const url = (await platform.until(/platform on (ws:\S+),/, 30_000))?.[1]
      assert.isDefined(url, platform.text())
      const serve = start(["serve"], { AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-agent-1-0123456789", PLATFORM_URL: url! })
      running.push(serve.child)
      const registered = await serve.until(/registered \d+ tool\(s\).*heartbeat every (\d+) s \(the platform's interval/, 30_000)
      assert.strictEqual(registered?.[1], "7", serve.text())
    } finally {
      for (const child of running) child.kill("SIGKILL")
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
