/**
 * `npm run soak`: the reliability suite's long versions (more cases, more rounds, the full load),
 * then one table of the figures the tests recorded (test/support/figures.ts), printed and written to
 * docs/generated/soak.md. Exits non-zero if any test failed.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { writeTable } from "./bench/report.js"
import type { Figure } from "./support/figures.js"

/** The test files that record figures. */
export const files = [
  "test/Hostile.test.ts",
  "test/Idempotency.test.ts",
  "test/Faults.test.ts",
  "test/Secrets.test.ts",
  "test/platform/Crash.test.ts",
  "test/AgentCrash.test.ts",
  "test/platform/Shutdown.test.ts",
  "test/platform/Retention.test.ts",
  "test/platform/Restart.test.ts",
  "test/platform/Load.test.ts",
  "test/platform/ClusterOutage.test.ts",
  "test/platform/WebSocket.test.ts",
  "test/platform/HostileWire.test.ts",
  "test/platform/Tenants.test.ts",
  "test/Security.test.ts",
  "test/Serve.test.ts",
  "test/McpHttpLimits.test.ts",
  "test/McpStdio.test.ts",
  "test/McpHostileServer.test.ts",
  "test/McpHttpAttacks.test.ts"
]

const root = fileURLToPath(new URL("..", import.meta.url))
const dir = mkdtempSync(join(tmpdir(), "agent-tools-soak-"))
const figuresFile = join(dir, "figures.ndjson")
const startedAt = Date.now()
const run = spawnSync(process.execPath, [join(root, "node_modules/vitest/vitest.mjs"), "run", ...files, "--testTimeout=1800000", "--hookTimeout=600000"], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, SOAK: "1", FIGURES_FILE: figuresFile }
})

let figures: Array<Figure> = []
try {
  figures = readFileSync(figuresFile, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Figure)
} catch {
  // No test recorded a figure.
}
rmSync(dir, { recursive: true, force: true })

const columns = ["suite", "measure", "value", "expected"] as const
const cells = figures.map((f) => columns.map((c) => String(f[c] ?? "")))
const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1)
writeTable({
  file: "docs/generated/soak.md",
  title: "Soak figures",
  command: "npm run soak",
  explainedIn: "reliability.md",
  note: `The run took ${minutes} min; ` +
    `${run.status === 0 ? "every test passed" : `some tests failed (exit ${run.status ?? "signal"})`}.`,
  columns,
  rows: cells
})
process.exit(run.status ?? 1)
