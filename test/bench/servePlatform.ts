/**
 * The platform of the serve benchmark, for running it in a process of its own: a WebSocket on
 * 127.0.0.1 and a scripted model whose task `WxT` asks for T turns of W calls. Prints its URL,
 * then serves until stdin closes.
 */
import { Effect, Layer } from "effect"
import { LanguageModel, PlatformServer } from "../../src/index.js"

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

/** The platform with that model, on a free port. */
export const layer = PlatformServer.layerWebSocket({ port: 0 }).pipe(
  Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "bench"]]), maxSteps: 100_000 })),
  Layer.provide(LanguageModel.layerScripted([script], { repeat: true, keepRequests: false }))
)

if (process.argv[1]?.endsWith("servePlatform.ts")) {
  Effect.gen(function*() {
    const context = yield* Layer.build(layer)
    process.stdout.write(`${yield* Effect.provide(PlatformServer.url, context)}\n`)
    yield* Effect.async<void>((resume) => {
      process.stdin.on("end", () => resume(Effect.void))
      process.stdin.resume()
    })
  }).pipe(Effect.scoped, Effect.withTracerEnabled(false), Effect.runPromise).then(() => process.exit(0))
}
