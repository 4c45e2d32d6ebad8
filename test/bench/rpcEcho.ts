/**
 * The floor of the stack the platform's wire is built on: an `@effect/rpc` echo, `RpcServer` and
 * `RpcClient` over the same WebSocket (`ws`, with the platform's socket options) and the same
 * framing (protocol/Framing.ts, through platform/Wire.ts and internal/serve/wire.ts), no platform: a
 * group of one call, `Echo`, whose messages have the raw echo's shapes. Measured as the raw `ws` echo
 * of test/bench/serve.ts is: 64 calls in flight, and sequential round trips (p50).
 * `npx tsx test/bench/rpcEcho.ts` prints its figures alone.
 */
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcClient from "@effect/rpc/RpcClient"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Effect, Schema } from "effect"
import { WebSocketServer } from "ws"
import * as Wire from "../../src/platform/Wire.js"
import * as ClientWire from "../../src/internal/serve/wire.js"

export class EchoRpcs extends RpcGroup.make(
  Rpc.make("Echo", {
    payload: { id: Schema.String, name: Schema.String, arguments: Schema.String, deadlineAt: Schema.Number },
    success: Schema.Struct({ value: Schema.Number })
  })
) {}

const handlers = EchoRpcs.toLayer({ Echo: () => Effect.succeed({ value: 3 }) })

/** The rpc echo's server on a free port of 127.0.0.1: its URL. */
const serve = Effect.gen(function*() {
  const wire = yield* Wire.makeServerFor(EchoRpcs)
  yield* RpcServer.make(EchoRpcs, { disableFatalDefects: true }).pipe(
    Effect.provideService(RpcServer.Protocol, wire.protocol),
    Effect.provide(handlers),
    Effect.interruptible,
    Effect.forkScoped
  )
  const sockets = yield* Effect.acquireRelease(
    Effect.async<WebSocketServer>((resume) => {
      const server: WebSocketServer = new WebSocketServer(
        { host: "127.0.0.1", port: 0, perMessageDeflate: false, allowSynchronousEvents: false },
        () => resume(Effect.succeed(server))
      )
    }),
    (server) => Effect.sync(() => server.close())
  )
  sockets.on("connection", (ws, request) => {
    const connection = wire.connect(request.headers, (frame) => ws.send(frame))
    ws.on("message", (data) => connection.receive(data as Buffer))
    ws.on("close", () => connection.close())
  })
  const address = sockets.address()
  return `ws://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}/rpc`
})

/**
 * The echo's figures: calls/s with `inFlight` in flight, and the sequential round trip's p50 in microseconds;
 * against the server at `at` (one in a process of its own, `--serve`), else one in this process.
 */
export const rpcEcho = (inFlight: number, argumentsText: string, at?: string) =>
  Effect.gen(function*() {
    const url = at ?? (yield* serve)
    const protocol = yield* ClientWire.makeClient({
      urls: [url],
      headers: {},
      maxFrameBytes: 16 * 1024 * 1024,
      maxSendBytes: 2 * 1024 * 1024,
      handshakeTimeout: 10_000
    })
    const client = yield* RpcClient.make(EchoRpcs).pipe(Effect.provideService(RpcClient.Protocol, protocol))
    const call = (id: string) => client.Echo({ id, name: "add", arguments: argumentsText, deadlineAt: Date.now() + 10_000 })
    for (let i = 0; i < 2_000; i++) yield* call(`w${i}`)
    const cpu = () => {
      const { system, user } = process.cpuUsage()
      return system + user
    }
    const t0 = performance.now()
    const c0 = cpu()
    for (let turn = 0; turn < 160; turn++) {
      yield* Effect.forEach(Array.from({ length: inFlight }, (_, i) => `x${turn}-${i}`), call, { concurrency: "unbounded" })
    }
    const callsPerSecond = (inFlight * 160) / ((performance.now() - t0) / 1000)
    const wideCpu = (cpu() - c0) / (inFlight * 160)
    const c1 = cpu()
    const gaps: Array<number> = []
    for (let i = 0; i < 1_000; i++) {
      const start = performance.now()
      yield* call(`s${i}`)
      gaps.push((performance.now() - start) * 1000)
    }
    const sequentialCpu = (cpu() - c1) / 1_000
    gaps.sort((a, b) => a - b)
    return { callsPerSecond, sequentialP50: gaps[Math.floor(gaps.length / 2)]!, wideCpu, sequentialCpu }
  }).pipe(Effect.scoped, Effect.withTracerEnabled(false))

if (process.argv[1]?.endsWith("rpcEcho.ts") && process.argv.includes("--serve")) {
  // The server alone, for a client in another process: prints its URL, serves until stdin closes.
  Effect.gen(function*() {
    process.stdout.write(`${yield* serve}\n`)
    yield* Effect.async<void>((resume) => {
      process.stdin.on("end", () => resume(Effect.void))
      process.stdin.resume()
    })
  }).pipe(Effect.scoped, Effect.withTracerEnabled(false), Effect.runPromise).then(() => process.exit(0))
} else if (process.argv[1]?.endsWith("rpcEcho.ts")) {
  Effect.runPromise(rpcEcho(64, "{\"a\":1,\"b\":2}")).then((figures) => {
    console.log(
      `rpc echo: ${figures.callsPerSecond.toFixed(0)} calls/s at 64 in flight (CPU ${figures.wideCpu.toFixed(0)} us a call), ` +
        `p50 ${figures.sequentialP50.toFixed(0)} us (CPU ${figures.sequentialCpu.toFixed(0)} us a call)`
    )
    process.exit(0)
  })
}
