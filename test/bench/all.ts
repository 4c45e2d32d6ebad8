/**
 * `npm run bench`: every benchmark, each variant in a process of its own (so that none warms or
 * slows another), then one table of all the figures, printed and written to docs/generated/bench.md.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { readFileSync } from "node:fs"
import { type Row, writeTable } from "./report.js"

const root = fileURLToPath(new URL("../..", import.meta.url))

/**
 * The deploy examples' `NODE_OPTIONS` (V8's young generation for a server, docs/operations.md): the cluster bench's
 * processes, the platforms' and the serving one, run with it, as deployed.
 */
const deployedNodeOptions = /^Environment=NODE_OPTIONS=(.*)$/m.exec(
  readFileSync(new URL("../../examples/deploy/agent-tools-platform.service", import.meta.url), "utf8")
)![1]!
const asDeployed = new Set(["cluster.ts"])
const runs: ReadonlyArray<readonly [string, ...Array<string>]> = [
  ["invocation.ts", "--variant=untraced"],
  ["invocation.ts", "--variant=no-tracer"],
  ["invocation.ts", "--variant=parent-span"],
  ["invocation.ts", "--variant=root-span"],
  ["invocation.ts", "--variant=gen"],
  ["invocation.ts", "--variant=direct"],
  ["invocation.ts", "--variant=async"],
  ["invocation.ts", "--variant=async-vs-effect"],
  ["worker.ts"],
  ["loop.ts", "--tracing=off"],
  ["loop.ts", "--tracing=on"],
  ["loop.ts", "--tracing=no-tracer"],
  ["loop.ts", "--tracing=otlp"],
  ["loop.ts", "--tracing=otlp-json"],
  ["loop.ts", "--mode=streamed"],
  ["loop.ts", "--mode=user"],
  ["loop.ts", "--mode=fresh"],
  ["serve.ts"],
  ["mcp.ts"],
  ["mcpHttp.ts"],
  ["claims.ts"],
  ["journal.ts"],
  ["operator.ts"],
  ["cluster.ts"],
  ["startup.ts"],
  ["providers.ts"]
]

const rows: Array<Row> = []
for (const [file, ...args] of runs) {
  process.stderr.write(`running ${file} ${args.join(" ")}\n`)
  const out = execFileSync(process.execPath, ["--import", "tsx", `test/bench/${file}`, ...args], {
    cwd: root,
    env: { ...process.env, BENCH_JSON: "1", ...(asDeployed.has(file) ? { NODE_OPTIONS: deployedNodeOptions } : {}) },
    encoding: "utf8"
  })
  for (const line of out.split("\n")) if (line.startsWith("{")) rows.push(JSON.parse(line) as Row)
}

const columns = ["bench", "measure", "value", "baseline", "ratio", "target"] as const
const cells = rows.map((row) => columns.map((c) => row[c] ?? ""))
writeTable({
  file: "docs/generated/bench.md",
  title: "Benchmark figures",
  command: "npm run bench",
  explainedIn: "benchmarks.md",
  columns,
  rows: cells
})
