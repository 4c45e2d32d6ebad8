// @ts-check
/**
 * `npm run build`: the library as ESM with its `.d.ts` files (tsc, `tsconfig.build.json`, into
 * `dist/lib`), and the CLI bundled by esbuild into `dist/cli`: `agent-tools.mjs` (the package's
 * `bin`, what an MCP client spawns), the demo's worker-thread module, the entry of the workers of
 * tools made with `worker` (`toolWorker.mjs`) and the chunks the commands
 * import when they run, all in that one folder. `--cli` builds the bundle alone. The console's pages (the
 * platform's `--console`), its client bundled by esbuild, go to `dist/console` (console/build.mjs).
 */
import { execFileSync } from "node:child_process"
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import * as esbuild from "esbuild"
import { bundleConsole } from "../console/build.mjs"

const root = fileURLToPath(new URL("..", import.meta.url))
const cliOnly = process.argv.includes("--cli")

/**
 * `src/demo/Backend.ts` points its worker pool at `./reports.worker.ts` beside it; in the bundle the
 * worker module is `reports.worker.mjs`, beside the chunk that starts the pool.
 */
const workerModule = {
  name: "worker-module",
  /** @param {esbuild.PluginBuild} build */
  setup(build) {
    // The pools of tools made with `worker` point at their entry beside them; in the bundle it is `toolWorker.mjs`.
    build.onLoad({ filter: /[\\/]src[\\/]internal[\\/]worker[\\/]pools\.ts$/ }, (args) => {
      const source = readFileSync(args.path, "utf8")
      const from = "import.meta.url.endsWith(\".ts\") ? \"./toolWorker.ts\" : \"./toolWorker.js\""
      if (source.split(from).length !== 2) {
        throw new Error(`${args.path} no longer names its worker entry as ${from} once: update scripts/build.mjs`)
      }
      return { contents: source.replace(from, "\"./toolWorker.mjs\""), loader: "ts" }
    })
    build.onLoad({ filter: /[\\/]src[\\/]demo[\\/]Backend\.ts$/ }, (args) => {
      const source = readFileSync(args.path, "utf8")
      const from = "\"./reports.worker.ts\""
      if (source.split(from).length !== 2) {
        throw new Error(`${args.path} no longer names its worker module as ${from} once: update scripts/build.mjs`)
      }
      return { contents: source.replace(from, "\"./reports.worker.mjs\""), loader: "ts" }
    })
  }
}

rmSync(new URL("../dist/cli", import.meta.url), { recursive: true, force: true })
await esbuild.build({
  absWorkingDir: root,
  entryPoints: {
    "agent-tools": "src/main.ts",
    "reports.worker": "src/demo/reports.worker.ts",
    "toolWorker": "src/internal/worker/toolWorker.ts"
  },
  outdir: "dist/cli",
  outExtension: { ".js": ".mjs" },
  // Beside the entries: the chunk that starts the worker pool finds `./reports.worker.mjs`.
  chunkNames: "[name]-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // A native addon: loaded from node_modules (a dependency of this package), never bundled.
  external: ["better-sqlite3"],
  // The CommonJS dependencies (ajv, ws, ...) call `require`: give the ESM bundle one.
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __createRequire } from \"node:module\";\nconst require = __createRequire(import.meta.url);"
  },
  plugins: [workerModule],
  legalComments: "none",
  logLevel: "warning"
})
// The console's pages, read by the platform from beside its modules (src/platform/api/Console.ts).
rmSync(new URL("../dist/console", import.meta.url), { recursive: true, force: true })
mkdirSync(new URL("../dist/console", import.meta.url), { recursive: true })
for (const [name, bytes] of Object.entries(await bundleConsole())) {
  writeFileSync(new URL(`../dist/console/${name}`, import.meta.url), bytes)
}
// Run as a program when not installed by npm (which makes a `bin` executable itself).
chmodSync(new URL("../dist/cli/agent-tools.mjs", import.meta.url), 0o755)

if (!cliOnly) {
  rmSync(new URL("../dist/lib", import.meta.url), { recursive: true, force: true })
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  execFileSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" })
}
