/**
 * The package as a user gets it: `npm run build`, `npm pack`, `npm install` of the tarball alone into a
 * fresh folder. There `npm ls` is clean and the install stays small; `import("agent-tools")` loads none
 * of the heavy packages (recorded by a `module.register` hook); a script importing "agent-tools"
 * typechecks (tsc, nodenext) and runs an agent with the scripted model; a missing optional peer fails
 * with the text naming it; once the optional peers the entries need are installed, each entry runs a
 * small example; and the bundled CLI (the `bin`) answers MCP over stdio, its worker threads included.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile, spawn } from "node:child_process"
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { delimiter, dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { initialize } from "./support/mcpHttp.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
// `npm`, and the `#!/usr/bin/env node` of the bin, find this node first.
const env = { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}` }

/** Runs a command to its end; its stdout, or a rejection with its stderr. */
const run = (command: string, args: ReadonlyArray<string>, cwd: string, more: Record<string, string> = {}) =>
  new Promise<string>((resolve, reject) =>
    execFile(command, args, { cwd, env: { ...env, ...more }, timeout: 240_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      error === null ? resolve(stdout) : reject(new Error(`${command} ${args.join(" ")}: ${error.message}\n${stdout}\n${stderr}`))
    )
  )

/**
 * The README's example (examples/quickstart.ts) as a user writes it against the installed package:
 * imported by name, then run, its types checked on the way (not `any`).
 */
const script = readFileSync(join(root, "examples/quickstart.ts"), "utf8")
  .replace(`from "../src/index.js"`, `from "agent-tools"`) + `
const result = await Effect.runPromise(main)
// The types came with the package: not \`any\`.
// @ts-expect-error the output is a string
const wrong: number = result.output
void wrong
console.log(JSON.stringify({ output: result.output, value: result.toolCalls[0]?.result.value }))
`

/**
 * A tool of the consumer's whose body runs on a worker thread (`worker: import.meta.url`), run from the installed
 * package: its workers load the package's worker entry. The module is loaded by the workers too: only the main
 * thread runs the call.
 */
const workerScript = `
import { Effect, Schema } from "effect"
import { isMainThread } from "node:worker_threads"
import { Invocation, Tool } from "agent-tools"

export const square = Tool.make("square", {
  description: "Squares a number.",
  input: { n: Schema.Number },
  output: Schema.Number,
  timeout: "20 seconds",
  worker: import.meta.url
}, ({ n }) => n * n)

if (isMainThread) {
  const result = await Effect.runPromise(Invocation.run(square, { n: 7 }))
  console.log(JSON.stringify({ value: result.value, error: result.error }))
}
`

/** Records the package of every module loaded from node_modules (a `module.register` hook), then imports the root. */
const hooks = `
import { appendFileSync } from "node:fs"
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  const found = /node_modules\\/((?:@[^/]+\\/)?[^/]+)/.exec(resolved.url)
  if (found !== null) appendFileSync(process.env.LOADED, found[1] + "\\n")
  return resolved
}
`
const rootImport = `
import { register } from "node:module"
register(new URL("./hooks.mjs", import.meta.url))
const started = performance.now()
await import("agent-tools")
console.log(JSON.stringify({ millis: Math.round(performance.now() - started) }))
`

/** What the root must not load (`agent-tools`'s own light entry; these come through the other entries). */
const heavy = /^(@modelcontextprotocol\/|ws$|pg$|better-sqlite3$|@effect\/sql-(pg|sqlite-node)|@effect\/cluster|@effect\/ai|@effect\/opentelemetry|@effect\/rpc|ajv$)/

/** Optional peers missing: SQLite (loaded by `layerSql`) and the MCP SDK (the `mcp` entry); each error names the package. */
const missingPeers = `
import { Effect, Layer } from "effect"
import { Journal } from "agent-tools"
const sqlite = await Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(Journal.layerSql({ filename: "j.sqlite" })))))
let mcp = ""
try { await import("agent-tools/mcp") } catch (error) { mcp = String(error.message) }
console.log(JSON.stringify({ sqlite: sqlite.message, mcp }))
`

/** Each entry, with its optional peers installed: a small example of it. */
const entries = `
import { ConfigProvider, Effect, Layer, Schema } from "effect"
import { Agent, LanguageModel, Tool, Toolkit } from "agent-tools"
import * as Cluster from "agent-tools/cluster"
import * as EffectAi from "agent-tools/effect-ai"
import { Mcp } from "agent-tools/mcp"
import { PlatformServer } from "agent-tools/platform"
import { Protocol } from "agent-tools/protocol"
import { Model } from "agent-tools/providers"
import { PlatformClient, Serve } from "agent-tools/serve"

const echo = Tool.make("echo", { description: "Echoes text.", input: { text: Schema.String }, timeout: "5 seconds" },
  ({ text }) => Effect.succeed(text))
const toolkit = await Effect.runPromise(Toolkit.make(echo))
const agent = Agent.make({ tools: [echo], instructions: "Answer." })
const providers = await Effect.runPromise(Agent.run(agent, "hi").pipe(
  Effect.provide(Model.layer("scripted", { script: [{ text: "scripted: hello" }] }))))
const platform = PlatformClient.layerTest.pipe(
  Layer.provideMerge(PlatformServer.layerHandlers({ tokens: PlatformServer.parseTokens("tok:agent-1") }).pipe(
    Layer.provide(LanguageModel.layerScripted([{ toolCalls: [{ name: "echo", arguments: { text: "served" } }] }, { text: "done" }])))))
const served = await Effect.runPromise(Effect.scoped(Effect.flatMap(Serve.make(toolkit, { agentId: "agent-1" }),
  (serving) => serving.runTask("echo served"))).pipe(
    Effect.provide(platform),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["PLATFORM_TOKEN", "tok"]])))))
console.log(JSON.stringify({
  providers: providers.output,
  served,
  mcp: Mcp.describe(echo).entry.name,
  protocol: Schema.decodeUnknownSync(Protocol.TaskFailed)({ _tag: "TaskFailed", taskId: "t", reason: "r" }).reason,
  cluster: typeof Cluster.layer,
  effectAi: typeof EffectAi.layer
}))
`

/** The JSON a script printed last (its log lines come before it). */
const lastJson = (output: string): any => JSON.parse(output.trim().split("\n").at(-1) ?? "null")

/** The bytes under a folder. */
const sizeOf = (path: string): number => {
  const stat = lstatSync(path)
  if (!stat.isDirectory()) return stat.size
  return readdirSync(path).reduce((total, entry) => total + sizeOf(join(path, entry)), 0)
}

/** MCP over stdio from a spawned program: send a message, wait for the answer with an id. */
const stdioClient = (command: string, args: ReadonlyArray<string>, cwd: string) => {
  const child = spawn(command, args, { cwd, env: { ...env, LOG_LEVEL: "" }, stdio: "pipe" })
  const seen: Array<{ id?: unknown; result?: any; error?: unknown }> = []
  let buffer = ""
  let stderr = ""
  child.stderr.on("data", (chunk) => (stderr += String(chunk)))
  child.stdout.on("data", (chunk) => {
    buffer += String(chunk)
    const lines = buffer.split("\n")
    buffer = lines.pop() ?? ""
    for (const line of lines) if (line.trim() !== "") seen.push(JSON.parse(line))
  })
  const send = (message: unknown) => child.stdin.write(`${JSON.stringify(message)}\n`)
  const answer = async (id: number) => {
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline) {
      const found = seen.find((message) => message.id === id)
      if (found !== undefined) return found
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    throw new Error(`no answer to ${id} within 30 s; stderr: ${stderr}`)
  }
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve))
  return { child, send, answer, exited, stderr: () => stderr }
}

describe("the package", () => {
  it("builds, packs and installs; a script typechecks and runs against it; its bin serves MCP over stdio", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-pack-"))
    try {
      await run("npm", ["run", "build"], root)
      // No scripts: the build just ran, and `prepare` would patch the project's TypeScript again.
      const packed = JSON.parse(
        await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", dir], root)
      ) as Array<{ filename: string; files: Array<{ path: string }> }>
      const files = packed[0]!.files.map((f) => f.path)
      for (
        const expected of [
          "package.json",
          "dist/lib/index.js",
          "dist/lib/index.d.ts",
          "dist/lib/internal/worker/toolWorker.js",
          "dist/cli/agent-tools.mjs",
          "dist/cli/reports.worker.mjs",
          "dist/console/console.js"
        ]
      ) {
        assert.include(files, expected)
      }
      assert.deepStrictEqual(files.filter((f) => !f.startsWith("dist/") && f !== "package.json" && f !== "README.md"), [])
      assert.deepStrictEqual(files.filter((f) => f.includes(".test.")), [])

      const consumer = join(dir, "consumer")
      mkdirSync(consumer)
      writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }))
      // No install scripts: better-sqlite3's fetches a prebuilt binary, and nothing here opens SQLite.
      await run("npm", [
        "install",
        join(dir, packed[0]!.filename),
        "--prefer-offline",
        "--no-audit",
        "--no-fund",
        "--ignore-scripts"
      ], consumer)
      // Installed alone: a clean tree, a small folder, a light root.
      await run("npm", ["ls"], consumer)
      const megabytes = sizeOf(join(consumer, "node_modules")) / 1e6
      writeFileSync(join(consumer, "hooks.mjs"), hooks)
      writeFileSync(join(consumer, "root.mjs"), rootImport)
      const loadedFile = join(consumer, "loaded.txt")
      writeFileSync(loadedFile, "")
      const { millis } = lastJson(await run(process.execPath, ["root.mjs"], consumer, { LOADED: loadedFile }))
      const loaded = [...new Set(readFileSync(loadedFile, "utf8").split("\n").filter((name) => name !== ""))].sort()
      console.log(`installed alone: node_modules ${megabytes.toFixed(1)} MB; import("agent-tools") ${millis} ms, ` +
        `packages loaded: ${loaded.join(", ")}`)
      assert.isAtMost(megabytes, 120)
      assert.deepStrictEqual(loaded.filter((name) => heavy.test(name)), [])
      writeFileSync(join(consumer, "missing.mjs"), missingPeers)
      const missing = lastJson(await run(process.execPath, ["missing.mjs"], consumer))
      assert.include(missing.sqlite, "needs the package @effect/sql-sqlite-node")
      assert.include(missing.sqlite, "npm install @effect/sql-sqlite-node better-sqlite3")
      assert.include(missing.mcp, "@modelcontextprotocol/sdk")

      writeFileSync(join(consumer, "main.ts"), script)
      writeFileSync(
        join(consumer, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: "NodeNext",
            moduleResolution: "NodeNext",
            strict: true,
            skipLibCheck: true,
            types: [],
            outDir: "out"
          },
          files: ["main.ts"]
        })
      )
      await run(process.execPath, [tsc, "-p", "."], consumer)
      const printed = JSON.parse(await run(process.execPath, ["out/main.js"], consumer))
      assert.deepStrictEqual(printed, { output: "Lyon: 21 C", value: { city: "Lyon", celsius: 21 } })

      // The optional peers the entries need (SQLite's native build left out: no install scripts): each entry runs.
      const versions = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).devDependencies as Record<string, string>
      const peers = ["@modelcontextprotocol/sdk", "@effect/sql-pg", "@effect/ai"].map((name) => `${name}@${versions[name]}`)
      await run("npm", ["install", ...peers, "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts"], consumer)
      await run("npm", ["ls"], consumer)
      writeFileSync(join(consumer, "entries.mjs"), entries)
      assert.deepStrictEqual(lastJson(await run(process.execPath, ["entries.mjs"], consumer)), {
        providers: "scripted: hello",
        served: "done",
        mcp: "echo",
        protocol: "r",
        cluster: "function",
        effectAi: "function"
      })

      // A tool of the app's own on a worker thread: the package ships the workers' entry.
      writeFileSync(join(consumer, "worker.mjs"), workerScript)
      assert.deepStrictEqual(JSON.parse(await run(process.execPath, ["worker.mjs"], consumer)), { value: 49 })

      // The bin, as an MCP client spawns it: initialize, then a tool on the worker threads.
      const mcp = stdioClient(join(consumer, "node_modules", ".bin", "agent-tools"), ["mcp"], consumer)
      try {
        mcp.send(initialize)
        const initialized = await mcp.answer(1)
        assert.strictEqual(initialized.result?.serverInfo?.name, "agent-tools", mcp.stderr())
        mcp.send({ jsonrpc: "2.0", method: "notifications/initialized" })
        mcp.send({
          jsonrpc: "2.0",
          id: 2,
          method: "tools/call",
          params: { name: "digest_report", arguments: { text: "report", rounds: 10 } }
        })
        const digested = await mcp.answer(2)
        assert.notStrictEqual(digested.result?.isError, true, JSON.stringify(digested))
        assert.strictEqual(digested.result?.structuredContent?.rounds, 10, JSON.stringify(digested))
        mcp.child.stdin.end()
        assert.strictEqual(await mcp.exited, 0, mcp.stderr())
      } finally {
        mcp.child.kill("SIGKILL")
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 300_000)
})
