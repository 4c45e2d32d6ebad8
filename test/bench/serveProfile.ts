/**
 * A driver for profiling the serve bench's wire (not run by `npm run bench`): the platform of
 * test/bench/servePlatform.ts in a child process (`--cpu-prof` passed on with PROFILE_DIR), this process
 * serving; wide tasks for a while, then sequential ones. Prints calls/s, p50 and CPU a call of each process.
 */
import { Effect, Layer } from "effect"
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Toolkit } from "../../src/index.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { servingSettings, stampedAdd } from "./servePlatform.js"

const profileDir = process.env.PROFILE_DIR
const seconds = Number(process.env.DURATION ?? 8)
const ticks = 100 // clock ticks a second (/proc/PID/stat)
const cpuOf = (pid: number) => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return ((Number(fields[11]) + Number(fields[12])) / ticks) * 1000 // ms
}
const ownCpu = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

const main = Effect.gen(function*() {
  const child = spawn(process.execPath, [
    ...(profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`]),
    "--import",
    "tsx",
    "test/bench/servePlatform.ts",
    "--wire=rpc"
  ], { cwd: fileURLToPath(new URL("../..", import.meta.url)), stdio: ["pipe", "pipe", "inherit"] })
  const url = yield* Effect.async<string>((resume) => {
    let out = ""
    child.stdout!.on("data", (data) => {
      if (out.includes("\n")) return
      out += String(data)
      if (out.includes("\n")) resume(Effect.succeed(out.split("\n")[0]!.trim()))
    })
  })
  let stamps: Array<number> = []
  const stamped = stampedAdd(() => stamps.push(performance.now()))
  const settings = servingSettings(url)
  const runtime = yield* Layer.toRuntime(Layer.provideMerge(PlatformClient.layer, settings))
  const served = yield* Effect.provide(Serve.makeConfig(yield* Toolkit.make(stamped)), runtime)
  const run = (prompt: string) => Effect.provide(served.runTask(prompt), runtime)
  for (let i = 0; i < 10; i++) yield* run("64x5")
  for (let i = 0; i < 50; i++) yield* run("1x20")
  const measure = (label: string, prompt: string, calls: number) =>
    Effect.gen(function*() {
      const t0 = performance.now()
      const c0 = ownCpu()
      const p0 = cpuOf(child.pid!)
      let n = 0
      const gaps: Array<number> = []
      while (performance.now() - t0 < seconds * 1000) {
        stamps = []
        yield* run(prompt)
        n += calls
        for (let k = 1; k < stamps.length; k++) gaps.push((stamps[k]! - stamps[k - 1]!) * 1000)
      }
      const wall = (performance.now() - t0) / 1000
      gaps.sort((a, b) => a - b)
      console.log(
        `${label}: ${(n / wall).toFixed(0)} calls/s, p50 gap ${gaps[Math.floor(gaps.length / 2)]?.toFixed(0)} us, ` +
          `CPU a call: serving ${((ownCpu() - c0) / n * 1000).toFixed(0)} us, platform ${((cpuOf(child.pid!) - p0) / n * 1000).toFixed(0)} us`
      )
    })
  if (process.env.MODE !== "seq") yield* measure("wide 64x10", "64x10", 640)
  if (process.env.MODE !== "wide") yield* measure("sequential 1x20", "1x20", 20)
  child.stdin!.end()
  yield* Effect.async<void>((resume) => void child.on("exit", () => resume(Effect.void)))
}).pipe(Effect.scoped, Effect.withTracerEnabled(false))

Effect.runPromise(main).then(() => process.exit(0))
