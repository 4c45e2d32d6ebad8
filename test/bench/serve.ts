/**
 * Delivered tool calls through the platform, a real WebSocket on 127.0.0.1 and Serve: calls per
 * second with 64 in flight, and sequential round-trip microseconds (p50: the time from one
 * delivered call to the next, in tasks of 20 turns of one call). The wire in src/ (on
 * `@effect/rpc`'s `RpcServer` and `RpcClient`) beside the wire as it was before (the bench-local
 * copy in test/bench/legacy/) and a raw `ws` JSON echo, in the same run: both wires are set up and
 * warmed, then measured in alternating rounds (five of each; the median round's calls/s, the p50 of
 * every round's gaps). Beside them, two floors measured in the same run: a raw `ws` JSON echo, and an
 * `@effect/rpc` echo (test/bench/rpcEcho.ts: RpcServer and RpcClient on the same socket and framing, no
 * platform), each with its server in this process and, beside the second topology, in a process of
 * its own (loopback between two processes wakes the other one in each system call). Two topologies:
 * the platform in this process, and (as deployed) in a process of its own. Tracing disabled. Run with
 * `npm run bench`.
 */
import { Effect, Layer, type Scope } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { WebSocket, WebSocketServer } from "ws"
import { Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Legacy from "./legacy/Server.js"
import { report } from "./report.js"
import { rpcEcho } from "./rpcEcho.js"
import { argumentsText, layer as platformLayer, servingSettings, stampedAdd, type WireName } from "./servePlatform.js"

const inFlight = 64
const wideTurns = 10 // tasks of 10 turns of 64 calls
const wideTasks = 8
const sequentialTurns = 20 // tasks of 20 turns of one call
const sequentialTasks = 60
const rounds = 5
const wires: ReadonlyArray<WireName> = ["legacy", "rpc"]

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

interface Figures {
  readonly callsPerSecond: number
  readonly sequentialP50: number
}

/** A serving process on `wire` at `url`, warmed: one round of wide tasks, one of sequential ones. */
interface Served {
  readonly wide: Effect.Effect<number, unknown>
  readonly sequential: Effect.Effect<ReadonlyArray<number>, unknown>
}

const serving = (url: string, wire: WireName): Effect.Effect<Served, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    let stamps: Array<number> = []
    const stamped = stampedAdd(() => stamps.push(performance.now()))
    const settings = servingSettings(url)
    const client = wire === "legacy" ? Legacy.layerWith() : PlatformClient.layer
    const runtime = yield* Layer.toRuntime(Layer.provideMerge(client, settings))
    const served = yield* Effect.provide(Serve.makeConfig(yield* Toolkit.make(stamped)), runtime)
    const run = (prompt: string) => Effect.provide(served.runTask(prompt), runtime)
    // Warm-up.
    for (let i = 0; i < 10; i++) yield* run(`${inFlight}x5`)
    for (let i = 0; i < 100; i++) yield* run(`1x${sequentialTurns}`)
    return {
      wide: Effect.gen(function*() {
        const t0 = performance.now()
        for (let i = 0; i < wideTasks; i++) yield* run(`${inFlight}x${wideTurns}`)
        return (inFlight * wideTurns * wideTasks) / ((performance.now() - t0) / 1000)
      }),
      sequential: Effect.gen(function*() {
        const gaps: Array<number> = []
        for (let i = 0; i < sequentialTasks; i++) {
          stamps = []
          yield* run(`1x${sequentialTurns}`)
          for (let k = 1; k < stamps.length; k++) gaps.push((stamps[k]! - stamps[k - 1]!) * 1000)
        }
        return gaps
      })
    }
  })

/** Both wires, each at its platform's URL, measured in alternating rounds. */
const compare = (urls: Record<WireName, string>): Effect.Effect<Record<WireName, Figures>, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const served = { legacy: yield* serving(urls.legacy, "legacy"), rpc: yield* serving(urls.rpc, "rpc") }
    const rates = { legacy: [] as Array<number>, rpc: [] as Array<number> }
    const gaps = { legacy: [] as Array<number>, rpc: [] as Array<number> }
    for (let round = 0; round < rounds; round++) {
      // Each wire goes first in every other round: neither always runs on a heap the other filled.
      for (const wire of round % 2 === 0 ? wires : [...wires].reverse()) {
        rates[wire].push(yield* served[wire].wide)
        gaps[wire].push(...(yield* served[wire].sequential))
      }
    }
    const figures = (wire: WireName): Figures => ({ callsPerSecond: median(rates[wire]), sequentialP50: median(gaps[wire]) })
    return { legacy: figures("legacy"), rpc: figures("rpc") }
  })

/** Both platforms in this process. */
const inProcess = Effect.gen(function*() {
  const url = (wire: WireName) =>
    Effect.flatMap(Layer.build(platformLayer(wire)), (context) => Effect.provide(PlatformServer.url, context))
  return yield* compare({ legacy: yield* url("legacy"), rpc: yield* url("rpc") })
}).pipe(Effect.scoped)

/** A server in a child process of its own (`script` with `args`), until the scope ends: the URL it prints. */
const child = (script: string, args: ReadonlyArray<string>): Effect.Effect<string, never, Scope.Scope> =>
  Effect.flatMap(
    Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, ["--import", "tsx", script, ...args], {
          cwd: fileURLToPath(new URL("../..", import.meta.url)),
          stdio: ["pipe", "pipe", "inherit"]
        })
      ),
      // Its end waited for (a second at most): a child still logging as this process exits would write to a closed pipe.
      (spawned) =>
        Effect.async<void>((resume) => {
          const timer = setTimeout(() => resume(Effect.void), 1_000)
          spawned.once("exit", () => {
            clearTimeout(timer)
            resume(Effect.void)
          })
          spawned.stdin!.end()
        })
    ),
    (spawned) =>
      Effect.async<string>((resume) => {
        let out = ""
        spawned.stdout!.on("data", (data) => {
          out += String(data)
          if (out.includes("\n")) resume(Effect.succeed(out.trim()))
        })
      })
  )

/** Each platform in a child process of its own (test/bench/servePlatform.ts). */
const childPlatform = (wire: WireName) => child("test/bench/servePlatform.ts", [`--wire=${wire}`])

const twoProcesses = Effect.gen(function*() {
  return yield* compare({ legacy: yield* childPlatform("legacy"), rpc: yield* childPlatform("rpc") })
}).pipe(Effect.scoped)

/** The raw echo's server: a ws server echoing JSON, the same message shapes in and out; calls `ready` with its port. */
const echoServer = (ready: (server: WebSocketServer, port: number) => void) => {
  const server: WebSocketServer = new WebSocketServer({ host: "127.0.0.1", port: 0 }, () => {
    const address = server.address()
    ready(server, typeof address === "object" && address !== null ? address.port : 0)
  })
  server.on("connection", (socket) =>
    socket.on("message", (data) => {
      const message = JSON.parse(String(data))
      socket.send(JSON.stringify({ id: message.id, result: { value: 3 } }))
    }))
}

// The baseline: the raw echo, its server in this process, or at `at` (one in a process of its own).
const echoRun = (at?: string) =>
  new Promise<Figures>((resolve) => {
    const client = (server: WebSocketServer | undefined, port: number) => {
      const socket = new WebSocket(at ?? `ws://127.0.0.1:${port}`)
      const waiting = new Map<string, () => void>()
      socket.on("message", (data) => {
        const reply = JSON.parse(String(data))
        waiting.get(reply.id)?.()
        waiting.delete(reply.id)
      })
      const call = (id: string) =>
        new Promise<void>((done) => {
          waiting.set(id, done)
          socket.send(JSON.stringify({ id, name: "add", arguments: argumentsText, deadlineAt: Date.now() + 10_000 }))
        })
      socket.on("open", async () => {
        for (let i = 0; i < 2_000; i++) await call(`w${i}`)
        const t0 = performance.now()
        for (let turn = 0; turn < 160; turn++) {
          await Promise.all(Array.from({ length: inFlight }, (_, i) => call(`x${turn}-${i}`)))
        }
        const callsPerSecond = (inFlight * 160) / ((performance.now() - t0) / 1000)
        const gaps: Array<number> = []
        for (let i = 0; i < 1_000; i++) {
          const start = performance.now()
          await call(`s${i}`)
          gaps.push((performance.now() - start) * 1000)
        }
        socket.close()
        if (server === undefined) resolve({ callsPerSecond, sequentialP50: median(gaps) })
        else server.close(() => resolve({ callsPerSecond, sequentialP50: median(gaps) }))
      })
    }
    if (at === undefined) echoServer(client)
    else client(undefined, 0)
  })

/**
 * The floors with their server in a process of its own, as the platform is in the second topology: each the median
 * of three servers (where the system puts two processes that wake each other moves a round trip by half, run to run).
 */
const floorsApart = Effect.gen(function*() {
  const raws: Array<Figures> = []
  const rpcs: Array<Figures> = []
  for (let i = 0; i < 3; i++) {
    raws.push(yield* Effect.scoped(Effect.flatMap(child("test/bench/serve.ts", ["--raw-echo-server"]), (url) => Effect.promise(() => echoRun(url)))))
    rpcs.push(yield* Effect.scoped(Effect.flatMap(child("test/bench/rpcEcho.ts", ["--serve"]), (url) => rpcEcho(inFlight, argumentsText, url))))
  }
  const medianOf = (figures: ReadonlyArray<Figures>): Figures => ({
    callsPerSecond: median(figures.map((f) => f.callsPerSecond)),
    sequentialP50: median(figures.map((f) => f.sequentialP50))
  })
  return { raw: medianOf(raws), rpc: medianOf(rpcs) }
})

const main = Effect.gen(function*() {
  const echo = yield* Effect.promise(() => echoRun())
  // The floor of the stack the wire is built on: RpcServer and RpcClient on the same socket and framing.
  const rpcFloor = yield* rpcEcho(inFlight, argumentsText)
  // The same floors across two processes, as the platform in its own process is (loopback then wakes the other process).
  const apart = yield* floorsApart
  const topologies = [
    ["platform in the same process", yield* inProcess, undefined],
    ["platform in its own process", yield* twoProcesses, apart]
  ] as const
  for (const [where, { legacy, rpc }, floors] of topologies) {
    const rateApart = floors === undefined ? "" : `; ${floors.raw.callsPerSecond.toFixed(0)} calls/s (raw echo, server in its own process); ` +
      `${floors.rpc.callsPerSecond.toFixed(0)} calls/s (rpc echo, server in its own process)`
    const rateRatioApart = floors === undefined ? "" : `; ${(rpc.callsPerSecond / floors.raw.callsPerSecond).toFixed(2)} of the raw echo apart; ` +
      `${(rpc.callsPerSecond / floors.rpc.callsPerSecond).toFixed(2)} of the rpc echo apart`
    const p50Apart = floors === undefined ? "" : `; ${floors.raw.sequentialP50.toFixed(0)} us (raw echo, server in its own process); ` +
      `${floors.rpc.sequentialP50.toFixed(0)} us (rpc echo, server in its own process)`
    const p50RatioApart = floors === undefined ? "" : `; ${(rpc.sequentialP50 / floors.raw.sequentialP50).toFixed(1)}x the raw echo apart; ` +
      `${(rpc.sequentialP50 / floors.rpc.sequentialP50).toFixed(2)}x the rpc echo apart`
    report({
      bench: "serve",
      measure: `delivered calls, ${inFlight} in flight, ${where}`,
      value: `${rpc.callsPerSecond.toFixed(0)} calls/s`,
      baseline: `${legacy.callsPerSecond.toFixed(0)} calls/s (legacy wire); ${echo.callsPerSecond.toFixed(0)} calls/s (raw ws JSON echo); ` +
        `${rpcFloor.callsPerSecond.toFixed(0)} calls/s (@effect/rpc echo)${rateApart}`,
      ratio: `${(rpc.callsPerSecond / legacy.callsPerSecond).toFixed(2)} of the legacy wire; ` +
        `${(rpc.callsPerSecond / echo.callsPerSecond).toFixed(2)} of the raw echo; ${(rpc.callsPerSecond / rpcFloor.callsPerSecond).toFixed(2)} of the rpc echo${rateRatioApart}`,
      target: ">= 0.5 of the raw echo, or >= 0.67 of the rpc echo"
    })
    report({
      bench: "serve",
      measure: `sequential round trip p50, ${where}`,
      value: `${rpc.sequentialP50.toFixed(0)} us`,
      baseline: `${legacy.sequentialP50.toFixed(0)} us (legacy wire); ${echo.sequentialP50.toFixed(0)} us (raw ws JSON echo); ` +
        `${rpcFloor.sequentialP50.toFixed(0)} us (@effect/rpc echo)${p50Apart}`,
      ratio: `${(rpc.sequentialP50 / legacy.sequentialP50).toFixed(2)}x the legacy wire; ` +
        `${(rpc.sequentialP50 / echo.sequentialP50).toFixed(1)}x the raw echo; ${(rpc.sequentialP50 / rpcFloor.sequentialP50).toFixed(2)}x the rpc echo${p50RatioApart}`,
      target: "<= 5x the raw echo, or <= 1.5x the rpc echo"
    })
  }
}).pipe(Effect.withTracerEnabled(false))

if (process.argv.includes("--raw-echo-server")) {
  // The raw echo's server alone, for a client in another process: prints its URL, serves until stdin closes.
  echoServer((server, port) => {
    process.stdout.write(`ws://127.0.0.1:${port}\n`)
    process.stdin.on("end", () => server.close(() => process.exit(0)))
    process.stdin.resume()
  })
} else {
  Effect.runPromise(main).then(() => process.exit(0))
}
