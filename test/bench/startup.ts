/**
 * Start-up, in one run: the median of `--runs` (default 9) of each of
 *   - `node -e 'import("effect")'`, the floor: a process that loads Effect and nothing else;
 *   - `tsx src/main.ts --help`, the CLI from source as `npm start` runs it;
 *   - the bundled CLI (`dist/cli/agent-tools.mjs mcp`, built first) answering an MCP `initialize`
 *     on stdio: what an MCP client waits for before it can list the tools,
 * taken in turns (so that a busy machine slows all three alike), each with its ratio to the floor.
 * Run with `npm run bench` or `tsx test/bench/startup.ts [--runs=N]`.
 */
import { execFileSync, spawn } from "node:child_process"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { initialize } from "../support/mcpHttp.js"
import { report } from "./report.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const runs = Number(process.argv.find((a) => a.startsWith("--runs="))?.slice("--runs=".length) ?? 9)
const tsx = createRequire(import.meta.url).resolve("tsx/cli")
const env = { ...process.env, ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "", OPENAI_BASE_URL: "", LOG_LEVEL: "" }

/** Milliseconds from spawning `node ...args` to its exit (code 0, or it throws). */
const toExit = (args: ReadonlyArray<string>) =>
  new Promise<number>((resolve, reject) => {
    const start = performance.now()
    const child = spawn(process.execPath, args, { cwd: root, env, stdio: ["ignore", "ignore", "pipe"] })
    let stderr = ""
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    child.on("exit", (code) => {
      const millis = performance.now() - start
      if (code === 0) resolve(millis)
      else reject(new Error(`node ${args.join(" ")} exited ${code}: ${stderr}`))
    })
  })

/** Milliseconds from spawning the bundled `mcp` to its answer to `initialize` (sent at once); then its stdin closes. */
const toInitialized = () =>
  new Promise<number>((resolve, reject) => {
    const start = performance.now()
    const child = spawn(process.execPath, ["dist/cli/agent-tools.mjs", "mcp"], { cwd: root, env, stdio: "pipe" })
    let stdout = ""
    let stderr = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`no answer to initialize within 30 s: ${stderr}`))
    }, 30_000)
    child.stderr.on("data", (chunk) => (stderr += String(chunk)))
    child.stdout.on("data", (chunk) => {
      stdout += String(chunk)
      if (!stdout.includes("\n")) return
      const millis = performance.now() - start
      clearTimeout(timer)
      const answer = JSON.parse(stdout.slice(0, stdout.indexOf("\n"))) as { id?: unknown; result?: unknown }
      child.stdin.end()
      if (answer.id === 1 && answer.result !== undefined) resolve(millis)
      else reject(new Error(`not an answer to initialize: ${stdout}`))
    })
    child.stdin.write(`${JSON.stringify(initialize)}\n`)
  })

const measures = {
  floor: () => toExit(["-e", "import(\"effect\")"]),
  help: () => toExit([tsx, "src/main.ts", "--help"]),
  initialize: toInitialized
}

const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = async () => {
  execFileSync(process.execPath, ["scripts/build.mjs", "--cli"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] })
  const times = { floor: [] as Array<number>, help: [] as Array<number>, initialize: [] as Array<number> }
  // A first round of each, not counted: the disk cache, and tsx's cache of compiled files.
  for (const measure of Object.values(measures)) await measure()
  for (let i = 0; i < runs; i++) {
    for (const [name, measure] of Object.entries(measures)) times[name as keyof typeof times].push(await measure())
  }
  const floor = median(times.floor)
  const ms = (millis: number) => `${millis.toFixed(0)} ms`
  report({
    bench: "startup",
    measure: `node -e 'import("effect")' (the floor), median of ${runs}`,
    value: ms(floor)
  })
  report({
    bench: "startup",
    measure: `tsx src/main.ts --help, median of ${runs}`,
    value: ms(median(times.help)),
    baseline: `${ms(floor)} (the floor)`,
    ratio: `${(median(times.help) / floor).toFixed(2)}x`,
    target: "<= 2.5x"
  })
  report({
    bench: "startup",
    measure: `bundled CLI: mcp (stdio) answers initialize, median of ${runs}`,
    value: ms(median(times.initialize)),
    baseline: `${ms(floor)} (the floor)`,
    ratio: `${(median(times.initialize) / floor).toFixed(2)}x`,
    target: "<= 1.5x"
  })
}

main().then(() => process.exit(0), (error) => {
  process.stderr.write(`${String(error)}\n`)
  process.exit(1)
})
