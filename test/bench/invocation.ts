/**
 * Microseconds per `Invocation.run` of a trivial two-number tool with JSON-text arguments, beside
 * a hand-written baseline doing the least the same job needs (JSON.parse, typeof checks, the
 * call, JSON.stringify), both in this process. Prints the figures and the ratio (target: <= 10).
 * `--variant=async-vs-effect` sets an async body beside the `Effect.succeed` one instead (design: Handler shapes).
 * Run with `npm run bench` (all variants), or `tsx test/bench/invocation.ts --variant=untraced`.
 */
import { Effect, Schema } from "effect"
import * as Invocation from "../../src/Invocation.js"
import * as Tool from "../../src/Tool.js"
import { report } from "./report.js"
import { makeCall } from "../../src/ToolContext.js"
import { add, listeningTracer } from "./tools.js"


// The same tool with a handler that is a program rather than a ready value: it runs in a fiber.
const addGen = Tool.make("add_gen", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) =>
  Effect.gen(function*() {
    return a + b
  }))

// The same tool with an async body (design: Handler shapes): a promise, awaited by a fiber of its own.
const addAsync = Tool.make("add_async", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, async ({ a, b }) => a + b)

const addPlain = (input: { a: number; b: number }) => input.a + input.b

const args = "{\"a\":1,\"b\":2}"
const call = makeCall()
const calls = 200_000
const rounds = 5

const baseline = (): number => {
  let sink = 0
  const t0 = performance.now()
  for (let i = 0; i < calls; i++) {
    const value = JSON.parse(args)
    if (typeof value !== "object" || value === null || typeof value.a !== "number" || typeof value.b !== "number") {
      throw new Error("invalid input")
    }
    sink += JSON.stringify(addPlain(value)).length
  }
  const micros = (performance.now() - t0) * 1000 / calls
  if (sink !== calls) throw new Error("baseline computed the wrong thing")
  return micros
}

const invocation = (tool: typeof add | typeof addGen | typeof addAsync) => Effect.gen(function*() {
  let sink = 0
  const t0 = performance.now()
  for (let i = 0; i < calls; i++) {
    const result = yield* Invocation.run(tool, args)
    sink += result.value as number
  }
  const micros = (performance.now() - t0) * 1000 / calls
  if (sink !== 3 * calls) throw new Error("Invocation.run computed the wrong thing")
  return micros
})

// The Effect.gen handler yielded directly, with no pipeline: what the handler itself costs.
const direct = Effect.gen(function*() {
  let sink = 0
  const t0 = performance.now()
  for (let i = 0; i < calls; i++) sink += yield* addGen.handler({ a: 1, b: 2 }, call)
  const micros = (performance.now() - t0) * 1000 / calls
  if (sink !== 3 * calls) throw new Error("the handler computed the wrong thing")
  return micros
})

const median = (xs: Array<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

// One variant per process (`--variant=`): measured alone, one variant's JIT state cannot slow another's.
const variant = process.argv.find((a) => a.startsWith("--variant="))?.slice("--variant=".length) ?? "untraced"

const variants = {
  untraced: {
    measure: "Invocation.run, Effect.succeed handler, tracing disabled",
    run: Effect.withTracerEnabled(invocation(add), false),
    target: "ratio <= 10"
  },
  "no-tracer": {
    measure: "... tracing on, no tracer installed (no span is made)",
    run: invocation(add),
    target: undefined,
    base: { label: "tracing disabled", run: Effect.withTracerEnabled(invocation(add), false) }
  },
  "parent-span": {
    measure: "... spans on (a tracer installed), inside a parent span",
    run: Effect.withTracer(Effect.withSpan(invocation(add), "bench"), listeningTracer),
    target: undefined
  },
  "root-span": {
    measure: "... spans on (a tracer installed), each call a root span",
    run: Effect.withTracer(invocation(add), listeningTracer),
    target: undefined
  },
  gen: { measure: "... Effect.gen handler (own fiber), tracing disabled", run: Effect.withTracerEnabled(invocation(addGen), false), target: undefined },
  async: {
    measure: "... async body (a promise, no fiber of its own), tracing disabled",
    run: Effect.withTracerEnabled(invocation(addAsync), false),
    target: undefined
  },
  // Against the Effect.succeed body instead of the hand-written baseline: what an async body adds.
  "async-vs-effect": {
    measure: "... async body, beside the Effect.succeed body in the same run",
    run: Effect.withTracerEnabled(invocation(addAsync), false),
    target: undefined,
    base: { label: "Effect.succeed body", run: Effect.withTracerEnabled(invocation(add), false) }
  },
  direct: { measure: "(the Effect.gen handler alone, no pipeline)", run: Effect.withTracerEnabled(direct, false), target: undefined }
} as const

const jsonBaseline = {
  label: "JSON.parse, typeof, call, JSON.stringify",
  run: Effect.sync(baseline)
}

const main = Effect.gen(function*() {
  const chosen: {
    readonly measure: string
    readonly run: Effect.Effect<number>
    readonly target: string | undefined
    readonly base?: { readonly label: string; readonly run: Effect.Effect<number> }
  } = variants[variant as keyof typeof variants]
  if (chosen === undefined) throw new Error(`unknown variant ${variant}; one of ${Object.keys(variants).join(", ")}`)
  const against = chosen.base ?? jsonBaseline
  // Warm up both (JIT) before measuring; alternate the rounds so that both see the same machine.
  yield* against.run
  yield* chosen.run
  const base: Array<number> = []
  const measured: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    base.push(yield* against.run)
    measured.push(yield* chosen.run)
  }
  const b = median(base)
  const m = median(measured)
  report({
    bench: "invocation",
    measure: chosen.measure,
    value: `${m.toFixed(2)} us/call`,
    baseline: `${b.toFixed(2)} us/call (${against.label})`,
    ratio: (m / b).toFixed(1),
    target: chosen.target
  })
})

Effect.runPromise(main)
