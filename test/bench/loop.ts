/**
 * Microseconds per agent run: two model turns (three concurrent trivial tool calls, then a final
 * text), runs one after another, the scripted model layer provided once for all runs. Beside it, a
 * hand-written minimal loop doing the same work in this process, and the ratio. Once with tracing
 * disabled, once with the spans on (a tracer installed), once with tracing on and no tracer installed
 * (beside tracing disabled), once exported over OTLP to a receiver here (beside tracing disabled), once
 * with a streaming scripted model (beside the whole-turn one, tracing disabled for both). And the way a user
 * writes it (`--mode=user`, `--mode=fresh`): the scripted model with its default options, tracing as a program
 * has it, one layer for every run, or a new model for each run (made by `LanguageModel.scripted`, given by
 * `Effect.provideService`; beside it a new layer provided to each run, and what `Effect.provide` of that layer
 * costs alone).
 * Run with `npm run bench`.
 */
import { type Context, Effect, Exit, Layer, Scope } from "effect"
import { type AddressInfo } from "node:net"
import { createServer } from "node:http"
import { Agent, LanguageModel, Telemetry, Tool } from "../../src/index.js"
import { report } from "./report.js"
import { add, listeningTracer } from "./tools.js"


const calls: ReadonlyArray<LanguageModel.ToolCall> = [
  { id: "c1", name: "add", arguments: "{\"a\":1,\"b\":2}" },
  { id: "c2", name: "add", arguments: "{\"a\":3,\"b\":4}" },
  { id: "c3", name: "add", arguments: "{\"a\":5,\"b\":6}" }
]

const agent = Agent.make({ tools: [add] })
const model = LanguageModel.layerScripted([{ toolCalls: calls }, { text: "21" }], { repeat: true, keepRequests: false })
// The same script streamed as a provider streams: the text in deltas, `generate` collecting the stream.
const streamedModel = LanguageModel.layerScripted([{ toolCalls: calls }, { text: "21 is the sum of them all" }], {
  repeat: true,
  keepRequests: false,
  streamed: { chunk: 8 }
})

// `--quick`: a few runs, to check the script runs (not a figure).
const quick = process.argv.includes("--quick")
const warmup = quick ? 20 : 3_000
const runs = quick ? 50 : 5_000
const rounds = quick ? 1 : 5

// The hand-written loop does what the agent loop must: a request per turn (instructions, messages,
// tools), JSON.parse and typeof checks of the arguments, the call, a record per call (input, result,
// duration), JSON.stringify of the result into a tool message, usage summed, the second turn.
interface Turn {
  readonly text?: string
  readonly toolCalls: ReadonlyArray<LanguageModel.ToolCall>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
}
const noUsage = { inputTokens: 0, outputTokens: 0 }
const scripted: ReadonlyArray<Turn> = [{ toolCalls: calls, usage: noUsage }, { text: "21", toolCalls: [], usage: noUsage }]
const definitions = [Tool.jsonSchema(add)]
let served = 0
const handModel = (_request: { readonly messages: ReadonlyArray<unknown>; readonly tools: ReadonlyArray<unknown> }): Turn => scripted[served++ % 2]!
const handLoop = (): string => {
  let messages: ReadonlyArray<unknown> = [{ role: "user", text: "add them" }]
  const records: Array<unknown> = []
  const usage = { inputTokens: 0, outputTokens: 0 }
  for (let step = 1; step <= 20; step++) {
    const turn = handModel({ messages, tools: definitions })
    usage.inputTokens += turn.usage.inputTokens
    usage.outputTokens += turn.usage.outputTokens
    if (turn.toolCalls.length === 0) return turn.text ?? ""
    const results: Array<unknown> = []
    for (const call of turn.toolCalls) {
      const startedAt = Date.now()
      const input = JSON.parse(call.arguments)
      if (typeof input !== "object" || input === null || typeof input.a !== "number" || typeof input.b !== "number") {
        throw new Error("invalid input")
      }
      const value = input.a + input.b
      records.push({ id: call.id, name: call.name, input, result: { value }, durationMillis: Date.now() - startedAt })
      results.push({ role: "tool", toolCallId: call.id, content: JSON.stringify(value), isError: false })
    }
    messages = [...messages, { role: "assistant", toolCalls: turn.toolCalls }, ...results]
  }
  throw new Error("too many steps")
}

const timeHand = (): number => {
  const t0 = performance.now()
  for (let i = 0; i < runs; i++) if (handLoop() !== "21") throw new Error("hand loop computed the wrong thing")
  return (performance.now() - t0) * 1000 / runs
}

const timeAgent = (n: number, once: Effect.Effect<Agent.Result<never>, Agent.AgentError, LanguageModel.LanguageModel> = Agent.run(agent, "add them")) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) {
      const result = yield* once
      if (!result.output.startsWith("21") || result.toolCalls.length !== 3) throw new Error("the agent computed the wrong thing")
    }
    return (performance.now() - t0) * 1000 / n
  })

/**
 * A telemetry layer exporting to a receiver in this process that reads and discards each request
 * (its cost is in the figure, as a collector's on the same machine would be), built once.
 */
const telemetryScope = Effect.runSync(Scope.make())
let telemetry: Context.Context<never> | undefined

/**
 * Runs exported to a receiver in this process that reads and discards each request (its cost is in
 * the figure, as a collector's on the same machine would be); the telemetry layer built once.
 */
const exported = (protocol: Telemetry.Protocol) =>
  Effect.gen(function*() {
    if (telemetry === undefined) {
      const server = createServer((request, response) => {
        request.resume()
        request.on("end", () => response.writeHead(200, { "content-type": "application/json" }).end("{}"))
      })
      yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
      // The exporter's end (its scope closed with the bench) is what lets the process end.
      server.unref()
      const { port } = server.address() as AddressInfo
      const layer = Telemetry.layer({ endpoint: `http://127.0.0.1:${port}`, serviceName: "bench", protocol })
      telemetry = yield* Layer.buildWithScope(layer, telemetryScope)
    }
    return yield* Effect.provide(timeAgent(runs), telemetry)
  })

// The way a user writes it: the scripted model with its default options (every request kept for
// `Scripted.requests`; `repeat` only so that one layer serves every run), tracing as a program has it
// (on, no tracer installed); and a new scripted model for each run, as the AI SDK's own benchmark
// builds a new mock model per run.
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ toolCalls: calls }, { text: "21" }]
const userModel = LanguageModel.layerScripted(script, { repeat: true })
// A new model a run the cheap way: `LanguageModel.scripted` makes the model as a value, the run's `model` option gives it.
const freshRun = Effect.suspend(() => Agent.run(agent, "add them", { model: LanguageModel.scripted(script) }))
// One model made once and given in every run's options: what the new model itself costs, beside `freshRun`.
const givenModel = LanguageModel.scripted(script, { repeat: true })
const givenRun = Effect.suspend(() => Agent.run(agent, "add them", { model: givenModel }))
// A new model each run that keeps none of its requests (`keepRequests: false`): what keeping them costs.
const freshUnkeptRun = Effect.suspend(() => Agent.run(agent, "add them", { model: LanguageModel.scripted(script, { keepRequests: false }) }))
// The same value given by `Effect.provideService` around the run: the run's fiber's context changes.
const freshProvidedRun = Effect.suspend(() =>
  Effect.provideService(Agent.run(agent, "add them"), LanguageModel.LanguageModel, LanguageModel.scripted(script)))
// The same through a layer (`Effect.provide` of `layerScripted`): Effect builds the layer each run.
const freshLayerRun = Effect.suspend(() => Effect.provide(Agent.run(agent, "add them"), LanguageModel.layerScripted(script)))
// What Effect's `Effect.provide` of that layer costs around no work at all.
const provideOnly = Effect.suspend(() => Effect.provide(Effect.void, LanguageModel.layerScripted(script)))
const timeProvide = (n: number) =>
  Effect.gen(function*() {
    const t0 = performance.now()
    for (let i = 0; i < n; i++) yield* provideOnly
    return (performance.now() - t0) * 1000 / n
  })

const median = (xs: Array<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const handBaseline = { label: "hand-written loop", run: Effect.sync(timeHand) }
const untraced = Effect.withTracerEnabled(Effect.suspend(() => timeAgent(runs)), false)

// `--tracing=off`: tracing disabled; `on`: a tracer installed, every span made; `no-tracer`: tracing
// on with no tracer installed (no span is made), beside tracing disabled in the same run.
const modes = {
  off: { measure: "tracing disabled", run: untraced, base: handBaseline, target: "<= 50 us/run, ratio <= 15" },
  on: {
    measure: "spans on (a tracer installed)",
    run: Effect.withTracer(Effect.suspend(() => timeAgent(runs)), listeningTracer),
    base: handBaseline,
    target: "<= 100 us/run"
  },
  "no-tracer": {
    measure: "tracing on, no tracer installed",
    run: Effect.suspend(() => timeAgent(runs)),
    base: { label: "tracing disabled", run: untraced },
    target: "ratio <= 1.2"
  },
  otlp: {
    measure: "exported (Telemetry.layer, OTLP/HTTP protobuf to a receiver on 127.0.0.1 that discards)",
    run: Effect.suspend(() => exported("http/protobuf")),
    base: { label: "tracing disabled", run: untraced },
    target: ""
  },
  streamed: {
    measure: "tracing disabled, a streaming scripted model (text in deltas of 8 characters, generate collects the stream)",
    // Warmed each round on the streamed path first (the common warmup runs the whole-turn model).
    run: Effect.withTracerEnabled(
      Effect.provide(Effect.zipRight(Effect.suspend(() => timeAgent(warmup)), Effect.suspend(() => timeAgent(runs))), streamedModel),
      false
    ),
    base: { label: "tracing disabled, the whole-turn scripted model", run: untraced },
    target: "ratio <= 1.2"
  },
  user: {
    measure: "the scripted model with its default options, one layer for every run, tracing on, no tracer installed",
    run: Effect.suspend(() => timeAgent(runs)),
    base: handBaseline,
    target: "<= 15 us/run",
    // Every run of the process (the warmup too) on the one layer, built once.
    layer: userModel
  },
  fresh: {
    measure: "a new scripted model (its default options) made for each run by LanguageModel.scripted and given in the run's options ({ model }), tracing on, no tracer installed",
    run: Effect.zipRight(Effect.suspend(() => timeAgent(warmup, freshRun)), Effect.suspend(() => timeAgent(runs, freshRun))),
    base: handBaseline,
    target: "<= 15 us/run",
    floors: [
      {
        measure: "one scripted model (repeat: true) made once and given in every run's options ({ model })",
        run: Effect.zipRight(Effect.suspend(() => timeAgent(warmup, givenRun)), Effect.suspend(() => timeAgent(runs, givenRun)))
      },
      {
        measure: "a new scripted model each run that keeps none of its requests (keepRequests: false), in the run's options",
        run: Effect.zipRight(Effect.suspend(() => timeAgent(warmup, freshUnkeptRun)), Effect.suspend(() => timeAgent(runs, freshUnkeptRun)))
      },
      {
        measure: "the same model given by Effect.provideService around the run",
        run: Effect.zipRight(Effect.suspend(() => timeAgent(warmup, freshProvidedRun)), Effect.suspend(() => timeAgent(runs, freshProvidedRun)))
      },
      {
        measure: "the same with a new layerScripted provided to each run (Effect.provide: Effect builds the layer each run)",
        run: Effect.zipRight(Effect.suspend(() => timeAgent(warmup, freshLayerRun)), Effect.suspend(() => timeAgent(runs, freshLayerRun)))
      },
      {
        measure: "Effect.provide of that new layer around no work (what Effect's layer building costs each run of the row above)",
        run: Effect.zipRight(Effect.suspend(() => timeProvide(warmup)), Effect.suspend(() => timeProvide(runs)))
      }
    ]
  },
  "otlp-json": {
    measure: "exported (Telemetry.layer, OTLP/HTTP JSON to a receiver on 127.0.0.1 that discards)",
    run: Effect.suspend(() => exported("http/json")),
    base: { label: "tracing disabled", run: untraced },
    target: ""
  }
} as const

const measure = (mode: (typeof modes)[keyof typeof modes]) =>
  Effect.gen(function*() {
    for (let i = 0; i < warmup; i++) handLoop()
    yield* Effect.withTracerEnabled(timeAgent(warmup), false)
    yield* Effect.withTracer(timeAgent(warmup), listeningTracer)
    const base: Array<number> = []
    const measured: Array<number> = []
    const floors = "floors" in mode ? mode.floors : []
    const floor: Array<Array<number>> = floors.map(() => [])
    for (let round = 0; round < rounds; round++) {
      base.push(yield* mode.base.run)
      measured.push(yield* mode.run)
      for (let i = 0; i < floors.length; i++) floor[i]!.push(yield* floors[i]!.run)
    }
    const b = median(base)
    const m = median(measured)
    report({
      bench: "agent loop",
      measure: `Agent.run, 2 turns x 3 concurrent calls, ${mode.measure}`,
      value: `${m.toFixed(1)} us/run`,
      baseline: `${b.toFixed(2)} us/run (${mode.base.label})`,
      ratio: (m / b).toFixed(2),
      target: mode.target
    })
    for (let i = 0; i < floors.length; i++) {
      const f = median(floor[i]!)
      report({
        bench: "agent loop",
        measure: floors[i]!.measure,
        value: `${f.toFixed(1)} us/run`,
        baseline: `${b.toFixed(2)} us/run (${mode.base.label})`,
        ratio: (f / b).toFixed(2),
        target: ""
      })
    }
  })

// One mode per process (`--tracing=off|on|no-tracer|otlp|otlp-json`, `--mode=streamed|user|fresh`), so that one cannot warm or slow the other.
const chosen = process.argv.find((a) => a.startsWith("--tracing=") || a.startsWith("--mode="))?.replace(/^--\w+=/, "") ?? "off"
const mode = modes[chosen as keyof typeof modes]
if (mode === undefined) throw new Error(`unknown mode ${chosen}; one of ${Object.keys(modes).join(", ")}`)

const main = measure(mode).pipe(Effect.provide("layer" in mode ? mode.layer : model), Effect.ensuring(Scope.close(telemetryScope, Exit.void)))

Effect.runPromise(main)
