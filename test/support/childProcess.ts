/** A child process of the tests (a serving process), its stdout read line by line. */
import * as esbuild from "esbuild"
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

/** A running child: the lines it printed so far, and a wait for one of them. */
export interface Child {
  readonly lines: Array<string>
  readonly process: ChildProcess
  readonly exited: Promise<number | null>
  /** The first line starting with `prefix`; undefined if the child ends or `timeoutMillis` passes first. */
  readonly waitFor: (prefix: string, timeoutMillis: number) => Promise<string | undefined>
}

/**
 * Starts `node --import tsx <script> [args]` in the project's folder with `env` added to this process's; with
 * `stderr`, what it writes there is read into its lines too (else it goes to this process's).
 */
export const startChild = (
  script: string,
  env: Record<string, string>,
  args: ReadonlyArray<string> = [],
  options: { readonly stderr?: boolean } = {}
): Child => startNode(["--import", "tsx", script, ...args], env, options.stderr === true)

/**
 * Bundles `script` (a path from the project's folder) and what it imports into one ESM file in
 * `outDir`, for a test that starts it many times: a process on the bundle starts in a fraction of
 * the time `tsx` needs to load the sources. Native addons (better-sqlite3) and optional modules no
 * test uses (pg-native) stay out; the addon is loaded from the project's node_modules.
 */
export const bundleChild = async (script: string, outDir: string): Promise<string> => {
  const outfile = join(outDir, "child.mjs")
  const fromRoot = createRequire(join(root, "package.json"))
  await esbuild.build({
    absWorkingDir: root,
    entryPoints: [script],
    outfile,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    external: ["pg-native"],
    plugins: [{
      name: "native-from-project",
      setup(build) {
        build.onResolve({ filter: /^better-sqlite3$/ }, (args) => ({ path: fromRoot.resolve(args.path), external: true }))
      }
    }],
    // The CommonJS dependencies call `require`: give the ESM bundle one.
    banner: { js: "import { createRequire as __createRequire } from \"node:module\";\nconst require = __createRequire(import.meta.url);" },
    logLevel: "warning"
  })
  return outfile
}

/** Starts `node <bundle>` (from `bundleChild`) in the project's folder with `env` added to this process's. */
export const startBundled = (bundle: string, env: Record<string, string>): Child => startNode([bundle], env)

const startNode = (args: ReadonlyArray<string>, env: Record<string, string>, stderr = false): Child => {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", stderr ? "pipe" : "inherit"]
  })
  const lines: Array<string> = []
  const listeners = new Set<() => void>()
  let buffer = ""
  child.stdout!.on("data", (chunk) => {
    buffer += String(chunk)
    const parts = buffer.split("\n")
    buffer = parts.pop() ?? ""
    lines.push(...parts)
    for (const listener of listeners) listener()
  })
  // Whole lines only: a line of stderr never splits one of stdout.
  let errors = ""
  child.stderr?.on("data", (chunk) => {
    errors += String(chunk)
    const parts = errors.split("\n")
    errors = parts.pop() ?? ""
    lines.push(...parts)
    for (const listener of listeners) listener()
  })
  // On "close", not "exit": a process's last lines may still be in the pipe when "exit" comes.
  let closed = false
  const exited = new Promise<number | null>((resolve) =>
    child.on("close", (code) => {
      closed = true
      if (buffer !== "") lines.push(buffer)
      buffer = ""
      resolve(code)
      for (const listener of listeners) listener()
    })
  )
  const waitFor = (prefix: string, timeoutMillis: number) =>
    new Promise<string | undefined>((resolve) => {
      const check = () => {
        const line = lines.find((l) => l.startsWith(prefix))
        if (line !== undefined || closed) {
          listeners.delete(check)
          clearTimeout(timer)
          resolve(line)
        }
      }
      const timer = setTimeout(() => {
        listeners.delete(check)
        resolve(undefined)
      }, timeoutMillis)
      listeners.add(check)
      check()
    })
  return { lines, process: child, exited, waitFor }
}
