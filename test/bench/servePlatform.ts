/**
 * The platform of the serve benchmark, for running it in a process of its own: a WebSocket on
 * 127.0.0.1 and a scripted model whose task `WxT` asks for T turns of W calls. Prints its URL,
 * then serves until stdin closes. `--wire=legacy`: on the bench-local copy of the wire as it was
 * before `@effect/rpc` carried it (test/bench/legacy/), the baseline.
 */
import { ConfigProvider, Effect, Layer, Schema } from "effect"
import { LanguageModel, Tool } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import * as Legacy from "./legacy/Server.js"

export const argumentsText = "{\"a\":1,\"b\":2}"

/** The model: a task `WxT` asks for T turns of W calls, then answers. */
export const script: LanguageModel.ScriptedTurn = (request) => {
  const [width, turns] = (request.messages[0] as { text: string }).text.split("x").map(Number) as [number, number]
  let turn = 0
  for (const message of request.messages) if (message._tag === "AssistantMessage") turn++
  if (turn >= turns) return { text: "done" }
  return {
    toolCalls: Array.from({ length: width }, (_, i) => ({ id: `c${turn}-${i}`, name: "add", arguments: argumentsText }))
  }
}

/** The benchmark's tool, `add`, calling `stamp` as each delivered call reaches it. */
export const stampedAdd = (stamp: () => unknown) =>
  Tool.make("add", {
    description: "Add two numbers.",
    input: { a: Schema.Number, b: Schema.Number },
    output: Schema.Number,
    timeout: "10 seconds"
  }, ({ a, b }) => {
    stamp()
    return Effect.succeed(a + b)
  })

/** The serving process's settings: agent `bench`, its token, the platform at `url`. */
export const servingSettings = (url: string) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "bench"], ["PLATFORM_TOKEN", "tok"], ["PLATFORM_URL", url]])))

/** Which wire a benchmarked platform and its client speak. */
export type WireName = "rpc" | "legacy"

/** The platform with that model, on a free port, on `wire`. */
export const layer = (wire: WireName) =>
  (wire === "legacy" ? Legacy.layerWebSocket({ port: 0 }) : PlatformServer.layerWebSocket({ port: 0 })).pipe(
    Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "bench"]]), maxSteps: 100_000 })),
    Layer.provide(LanguageModel.layerScripted([script], { repeat: true, keepRequests: false }))
  )

if (process.argv[1]?.endsWith("servePlatform.ts")) {
  const wire: WireName = process.argv.includes("--wire=legacy") ? "legacy" : "rpc"
  Effect.gen(function*() {
    const context = yield* Layer.build(layer(wire))
    process.stdout.write(`${yield* Effect.provide(PlatformServer.url, context)}\n`)
    yield* Effect.async<void>((resume) => {
      process.stdin.on("end", () => resume(Effect.void))
      process.stdin.resume()
    })
  }).pipe(Effect.scoped, Effect.withTracerEnabled(false), Effect.runPromise).then(() => process.exit(0))
}
