/**
 * Delivered tool calls through the platform, a real WebSocket on 127.0.0.1 and Serve, beside a raw
 * `ws` JSON echo in the same run: calls per second with 64 in flight, and sequential round-trip
 * microseconds (p50). Tracing disabled. Run with `npm run bench`.
 */
import { ConfigProvider, Effect, Layer } from "effect"
import { WebSocket, WebSocketServer } from "ws"
import { LanguageModel, PlatformClient, PlatformServer, Serve, Toolkit } from "../../src/index.js"
import { report } from "./report.js"
import { add } from "./tools.js"

const inFlight = 64
const wideTurns = 40 // 40 turns of 64 calls
const sequentialCalls = 1_000


const argumentsText = "{\"a\":1,\"b\":2}"
const turnsSoFar = (request: LanguageModel.ModelRequest) =>
  request.messages.reduce((n, m) => n + (m._tag === "AssistantMessage" ? 1 : 0), 0)

// The platform's model: a task asks for `turns` turns of `width` calls, then answers.
let turnStarts: Array<number> = []
const script: LanguageModel.ScriptedTurn = (request) => {
  turnStarts.push(performance.now())
  const [width, turns] = (request.messages[0] as { text: string }).text.split("x").map(Number) as [number, number]
  const turn = turnsSoFar(request)
  if (turn >= turns) return { text: "done" }
  return {
    toolCalls: Array.from({ length: width }, (_, i) => ({ id: `c${turn}-${i}`, name: "add", arguments: argumentsText }))
  }
}

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const platformRun = Effect.gen(function*() {
  const context = yield* Layer.build(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "bench"]]), maxSteps: 100_000 })),
      Layer.provide(LanguageModel.layerScripted([script], { repeat: true, keepRequests: false }))
    )
  )
  const url = yield* Effect.provide(PlatformServer.url, context)
  const settings = Layer.setConfigProvider(
    ConfigProvider.fromMap(new Map([["AGENT_ID", "bench"], ["PLATFORM_TOKEN", "tok"], ["PLATFORM_URL", url]]))
  )
  return yield* Effect.gen(function*() {
    const served = yield* Serve.make(yield* Toolkit.make(add))
    // Warm-up.
    yield* served.runTask(`${inFlight}x5`)
    yield* served.runTask("1x200")

    const t0 = performance.now()
    yield* served.runTask(`${inFlight}x${wideTurns}`)
    const wideSeconds = (performance.now() - t0) / 1000
    const callsPerSecond = (inFlight * wideTurns) / wideSeconds

    turnStarts = []
    yield* served.runTask(`1x${sequentialCalls}`)
    const gaps = turnStarts.slice(1).map((t, i) => (t - turnStarts[i]!) * 1000)
    return { callsPerSecond, sequentialP50: median(gaps) }
  }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(PlatformClient.layer, settings)))
}).pipe(Effect.scoped, Effect.withTracerEnabled(false))

// The baseline: a ws server echoing JSON, the same message shapes in and out.
const echoRun = () =>
  new Promise<{ callsPerSecond: number; sequentialP50: number }>((resolve) => {
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
        for (let turn = 0; turn < wideTurns * 4; turn++) {
          await Promise.all(Array.from({ length: inFlight }, (_, i) => call(`x${turn}-${i}`)))
        }
        const callsPerSecond = (inFlight * wideTurns * 4) / ((performance.now() - t0) / 1000)
        const gaps: Array<number> = []
        for (let i = 0; i < sequentialCalls; i++) {
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
  const platform = yield* platformRun
  report({
    bench: "serve",
    measure: `delivered calls, ${inFlight} in flight (platform + WebSocket + Serve)`,
    value: `${platform.callsPerSecond.toFixed(0)} calls/s`,
    baseline: `${echo.callsPerSecond.toFixed(0)} calls/s (raw ws JSON echo)`,
    ratio: `${(echo.callsPerSecond / platform.callsPerSecond).toFixed(1)}x fewer`,
    target: ">= 5,000 calls/s"
  })
  report({
    bench: "serve",
    measure: "sequential round trip, p50",
    value: `${platform.sequentialP50.toFixed(0)} us`,
    baseline: `${echo.sequentialP50.toFixed(0)} us (raw ws JSON echo)`,
    ratio: `${(platform.sequentialP50 / echo.sequentialP50).toFixed(1)}x`,
    target: "< 500 us"
  })
})

Effect.runPromise(main).then(() => process.exit(0))
