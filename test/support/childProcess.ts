/** A child process of the tests (a serving process), its stdout read line by line. */
import { type ChildProcess, spawn } from "node:child_process"
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

/** Starts `node --import tsx <script>` in the project's folder with `env` added to this process's. */
export const startChild = (script: string, env: Record<string, string>): Child => {
  const child = spawn(process.execPath, ["--import", "tsx", script], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"]
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
  const exited = new Promise<number | null>((resolve) =>
    child.on("exit", (code) => {
      resolve(code)
      for (const listener of listeners) listener()
    })
  )
  const waitFor = (prefix: string, timeoutMillis: number) =>
    new Promise<string | undefined>((resolve) => {
      const check = () => {
        const line = lines.find((l) => l.startsWith(prefix))
        if (line !== undefined || child.exitCode !== null || child.signalCode !== null) {
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
