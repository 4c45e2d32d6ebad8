/**
 * Runner processes of a cluster on the project's PostgreSQL, and serving processes (in the test's
 * process) connected to them: what the drain, spreading, pruning and outage tests share. A runner is
 * test/support/clusterRunnerChild.ts (its model a script of TURNS calls, each ask appended to the asks file).
 */
import { Context, type Duration, Effect, Layer, Schedule, Schema } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { type Child, startChild } from "./childProcess.js"
import { clientLayer } from "./platform.js"
import * as Pg from "./postgres.js"

/** The serving processes' timings: redelivery every 2 s, reconnects every 200 ms. */
export const policy = Timing.layer({
  redelivery: Schedule.spaced("2 seconds"),
  reconnect: Schedule.spaced("200 millis").pipe(Schedule.intersect(Schedule.recurs(300)))
})

/** A model turn a runner asked for: when, on which runner, for which prompt (spaces as `_`), at which step. */
export interface Ask {
  readonly at: number
  readonly runner: string
  readonly prompt: string
  readonly step: number
}

/** The asks of the file, in order. */
export const readAsks = (file: string): Array<Ask> =>
  readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((line) => {
    const [at, runner, prompt, step] = line.split(" ")
    return { at: Number(at), runner: runner!, prompt: prompt!, step: Number(step) }
  })

/** A temporary folder with an empty asks file, removed with the scope. */
export const asksFile = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "agent-tools-cluster-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const file = join(dir, "asks.txt")
  writeFileSync(file, "")
  return file
})

/** A runner process: its child, its WebSocket URL, its cluster port. */
export interface Runner {
  readonly child: Child
  readonly url: string
  readonly runnerPort: number
}

/**
 * Starts a runner named `name` on `databaseUrl` (on `runnerPort`, or a free port), killed with the scope;
 * `env` added. Waits until it serves.
 */
export const startRunner = (
  name: string,
  databaseUrl: string,
  asks: string,
  env: Record<string, string> = {},
  runnerPort?: number
) =>
  Effect.gen(function*() {
    const port = runnerPort ?? (yield* Effect.promise(() => Pg.freePort()))
    const child = startChild("test/support/clusterRunnerChild.ts", {
      DATABASE_URL: databaseUrl,
      RUNNER_PORT: String(port),
      RUNNER: name,
      ASKS_FILE: asks,
      TURNS: "4",
      ...env
    })
    yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
    const line = yield* Effect.promise(() => child.waitFor("listening:", 120_000))
    if (line === undefined) return yield* Effect.dieMessage(`runner ${name} did not start:\n${child.lines.join("\n")}`)
    return { child, url: line.slice("listening:".length), runnerPort: port } satisfies Runner
  })

/** A runner's readiness URL (`/readyz` beside its WebSocket's path). */
export const readyzOf = (runner: Runner): string => `${runner.url.replace(/^ws/, "http").replace(/\/rpc$/, "")}/readyz`

/**
 * Waits until the runners share the shards out between them: each ready (`/readyz`: it holds some) and their
 * counts summing to `shards` (clusterRunnerChild.ts's 30), so that a task a runner places on its own shards stays
 * there rather than moving with the handover a new runner starts. Dies after `within` ms naming each one's answer.
 */
export const shardsSettled = (runners: ReadonlyArray<Runner>, shards = 30, within = 30_000) =>
  Effect.promise(async () => {
    let last: Array<string> = []
    for (const until = Date.now() + within; Date.now() < until;) {
      last = await Promise.all(runners.map((runner) =>
        fetch(readyzOf(runner), { signal: AbortSignal.timeout(5_000) }).then((r) => r.text(), String)
      ))
      const held = last.map((body) => Number(/"(\d+) of \d+ held"/.exec(body)?.[1] ?? 0))
      if (held.every((n) => n > 0) && held.reduce((a, b) => a + b, 0) === shards) return undefined
      await new Promise((r) => setTimeout(r, 50))
    }
    return last
  }).pipe(Effect.flatMap((last) =>
    last === undefined
      ? Effect.void
      : Effect.dieMessage(`the runners did not share the ${shards} shards within ${within} ms: ${last.join(" | ")}`)
  ))

/** How a counting tool behaves: how long a call takes, its timeout, and where the calls running now are counted. */
export interface Counting {
  readonly millis?: number
  readonly timeout?: Duration.DurationInput
  /** Calls running now, by tool name. */
  readonly running?: Map<string, number>
}

/** A tool `name` that takes `millis` (300) and counts each run of an input (its side effect) in `effects`. */
export const countingTool = (name: string, effects: Map<string, number>, counting: number | Counting = {}) => {
  const { millis = 300, running = new Map<string, number>(), timeout = "60 seconds" } = typeof counting === "number"
    ? { millis: counting }
    : counting
  return Tool.make(name, {
    description: `Works on n at a step (${name}).`,
    input: { n: Schema.Number, step: Schema.Number },
    output: Schema.String,
    timeout
  }, ({ n, step }) =>
    Effect.gen(function*() {
      running.set(name, (running.get(name) ?? 0) + 1)
      yield* Effect.sleep(`${millis} millis`).pipe(Effect.ensuring(Effect.sync(() => running.set(name, running.get(name)! - 1))))
      const key = `${name}:${n}:${step}`
      effects.set(key, (effects.get(key) ?? 0) + 1)
      return `${name} did ${n}.${step}`
    }))
}

/** A serving process of agent-1 (here, in the test's process) on `urls`, its one tool `tool`; its client too. */
export const serving = <T extends Tool.Any>(
  urls: ReadonlyArray<string>,
  tool: T,
  settings: Record<string, string> = {},
  timing: typeof policy = policy
) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const client = Context.get(
      yield* Layer.buildWithScope(clientLayer({ url: urls.join(","), settings }, timing), scope),
      PlatformClient.PlatformClient
    )
    const toolkit = yield* Toolkit.make(tool)
    const serve = yield* Serve.makeConfig(toolkit).pipe(Effect.provideService(PlatformClient.PlatformClient, client))
    return { serve, client }
  }).pipe(Effect.provide(timing))

/** The time of a log line (logfmt's `timestamp=...`, or the pretty logger's `[hh:mm:ss.mmm]` of today), in epoch ms; NaN without one. */
export const timeOf = (line: string): number => {
  const stamp = /timestamp=(\S+)/.exec(line)
  if (stamp !== null) return Date.parse(stamp[1]!)
  const clock = /^\[(\d\d):(\d\d):(\d\d)\.(\d\d\d)\]/.exec(line)
  if (clock === null) return Number.NaN
  const [, h, m, s, ms] = clock.map(Number) as [number, number, number, number, number]
  return new Date().setHours(h, m, s, ms)
}
