/**
 * Delivered tool calls through the platform, a real WebSocket on 127.0.0.1 and Serve, beside a raw
 * `ws` JSON echo in the same run: calls per second with 64 in flight, and sequential round-trip
 * microseconds (p50: the time from one delivered call to the next, in tasks of 20 turns of one
 * call). Three rounds of each: the median round's calls/s, the p50 of every round's gaps. Two
 * topologies: the platform in this process, and (as deployed) in a process of its own. Tracing
 * disabled. Run with `npm run bench`.
 */
import { ConfigProvider, Effect, Layer, Schema } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { WebSocket, WebSocketServer } from "ws"
import { PlatformClient, PlatformServer, Serve, Tool, Toolkit } from "../../src/index.js"
import { report } from "./report.js"
import { argumentsText, layer as platformLayer } from "./servePlatform.js"

const inFlight = 64
const wideTurns = 10 // tasks of 10 turns of 64 calls
const wideTasks = 8
const sequentialTurns = 20 // tasks of 20 turns of one call
const sequentialTasks = 60

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

interface Figures {
  readonly callsPerSecond: number
  readonly sequentialP50: number
}

/** Serve's side: the calls per second of wide tasks, and the gaps between sequential calls. */
const serveRun = (url: string): Effect.Effect<Figures, unknown> => {
  let stamps: Array<number> = []
  // The benchmark's tool, stamping the time each delivered call reaches it.
  const stamped = Tool.make("add", {
    description: "Add two numbers.",
    input: { a: Schema.Number, b: Schema.Number },
    output: Schema.Number,
    timeout: "10 seconds"
  }, ({ a, b }) => {
    stamps.push(performance.now())
    return Effect.succeed(a + b)
  })
  const settings = Layer.setConfigProvider(
    ConfigProvider.fromMap(new Map([["AGENT_ID", "bench"], ["PLATFORM_TOKEN", "tok"], ["PLATFORM_URL", url]]))
  )
  return Effect.gen(function*() {
    const served = yield* Serve.make(yield* Toolkit.make(stamped))
    // Warm-up.
    for (let i = 0; i < 10; i++) yield* served.runTask(`${inFlight}x5`)
    for (let i = 0; i < 100; i++) yield* served.runTask(`1x${sequentialTurns}`)

    // Three rounds of each; the median round's calls/s, the p50 of all rounds' gaps.
    const rates: Array<number> = []
    const gaps: Array<number> = []
    for (let round = 0; round < 3; round++) {
      const t0 = performance.now()
      for (let i = 0; i < wideTasks; i++) yield* served.runTask(`${inFlight}x${wideTurns}`)
      rates.push((inFlight * wideTurns * wideTasks) / ((performance.now() - t0) / 1000))
      for (let i = 0; i < sequentialTasks; i++) {
        stamps = []
        yield* served.runTask(`1x${sequentialTurns}`)
        for (let k = 1; k < stamps.length; k++) gaps.push((stamps[k]! - stamps[k - 1]!) * 1000)
      }
    }
    const callsPerSecond = median(rates)
    return { callsPerSecond, sequentialP50: median(gaps) }
  }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(PlatformClient.layer, settings)))
}

/** The platform in this process. */
const inProcess = Effect.gen(function*() {
  const context = yield* Layer.build(platformLayer)
  return yield* serveRun(yield* Effect.provide(PlatformServer.url, context))
}).pipe(Effect.scoped)

/** The platform in a child process (test/bench/servePlatform.ts). */
const twoProcesses = Effect.acquireUseRelease(
  Effect.sync(() =>
    spawn(process.execPath, ["--import", "tsx", "test/bench/servePlatform.ts"], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      stdio: ["pipe", "pipe", "inherit"]
    })
  ),
  (child) =>
    Effect.flatMap(
      Effect.async<string>((resume) => {
        let out = ""
        child.stdout!.on("data", (data) => {
          out += String(data)
          if (out.includes("\n")) resume(Effect.succeed(out.trim()))
        })
      }),
      serveRun
    ),
  (child) => Effect.sync(() => child.stdin!.end())
)

// The baseline: a ws server echoing JSON, the same message shapes in and out.
const echoRun = () =>
  new Promise<Figures>((resolve) => {
    const server = new WebSocketServer({ host: "127.0.0.1", port: 0 }, () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      const socket = new WebSocket(`ws://127.0.0.1:${port}`)
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
        server.close(() => resolve({ callsPerSecond, sequentialP50: median(gaps) }))
      })
    })
    server.on("connection", (socket) =>
      socket.on("message", (data) => {
        const message = JSON.parse(String(data))
        socket.send(JSON.stringify({ id: message.id, result: { value: 3 } }))
      }))
  })

const main = Effect.gen(function*() {
  const echo = yield* Effect.promise(echoRun)
  const topologies = [
    ["platform in the same process", yield* inProcess],
    ["platform in its own process", yield* twoProcesses]
  ] as const
  for (const [where, figures] of topologies) {
    report({
      bench: "serve",
      measure: `delivered calls, ${inFlight} in flight, ${where}`,
      value: `${figures.callsPerSecond.toFixed(0)} calls/s`,
      baseline: `${echo.callsPerSecond.toFixed(0)} calls/s (raw ws JSON echo)`,
      ratio: `${(echo.callsPerSecond / figures.callsPerSecond).toFixed(1)}x fewer`,
      target: ">= 5,000 calls/s"
    })
    report({
      bench: "serve",
      measure: `sequential round trip p50, ${where}`,
      value: `${figures.sequentialP50.toFixed(0)} us`,
      baseline: `${echo.sequentialP50.toFixed(0)} us (raw ws JSON echo)`,
      ratio: `${(figures.sequentialP50 / echo.sequentialP50).toFixed(1)}x`,
      target: "< 500 us"
    })
  }
}).pipe(Effect.withTracerEnabled(false))

Effect.runPromise(main).then(() => process.exit(0))
