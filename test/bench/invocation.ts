/**
 * Microseconds per `Invocation.run` of a trivial two-number tool with JSON-text arguments, beside
 * a hand-written baseline doing the least the same job needs (JSON.parse, typeof checks, the
 * call, JSON.stringify), both in this process. Prints the figures and the ratio (target: <= 10).
 * Run with `npm run bench`.
 */
import { Effect, Schema } from "effect"
import { Invocation, Tool } from "../../src/index.js"

const add = Tool.make("add", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))

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

const addPlain = (input: { a: number; b: number }) => input.a + input.b

const args = "{\"a\":1,\"b\":2}"
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

const invocation = (tool: typeof add | typeof addGen) => Effect.gen(function*() {
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
  for (let i = 0; i < calls; i++) sink += yield* addGen.handler({ a: 1, b: 2 })
  const micros = (performance.now() - t0) * 1000 / calls
  if (sink !== 3 * calls) throw new Error("the handler computed the wrong thing")
  return micros
})

const median = (xs: Array<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = Effect.gen(function*() {
  // Warm up both paths (JIT) before measuring. Tracing is on (Effect's default) unless a line says otherwise.
  baseline()
  yield* invocation(add)
  yield* invocation(addGen)
  const base: Array<number> = []
  const ready: Array<number> = []
  const forked: Array<number> = []
  const bare: Array<number> = []
  for (let round = 0; round < rounds; round++) {
    base.push(baseline())
    ready.push(yield* invocation(add))
    forked.push(yield* invocation(addGen))
    bare.push(yield* direct)
  }
  const b = median(base)
  const r = median(ready)
  const f = median(forked)
  const d = median(bare)
  const untraced: Array<number> = []
  for (let round = 0; round < rounds; round++) untraced.push(yield* Effect.withTracerEnabled(invocation(add), false))
  const u = median(untraced)
  const nested: Array<number> = []
  for (let round = 0; round < rounds; round++) nested.push(yield* Effect.withSpan(invocation(add), "bench"))
  const n = median(nested)
  console.log(`calls per round: ${calls}, rounds: ${rounds} (medians)`)
  console.log(`baseline (JSON.parse + typeof + call + JSON.stringify):   ${b.toFixed(3)} us/call`)
  console.log(`Invocation.run, handler Effect.succeed(a + b):             ${r.toFixed(3)} us/call  ratio ${(r / b).toFixed(2)} (target <= 10)`)
  console.log(`Invocation.run, handler Effect.gen (runs in its own fiber): ${f.toFixed(3)} us/call  ratio ${(f / b).toFixed(2)}`)
  console.log(`Invocation.run, handler Effect.succeed, tracing disabled:    ${u.toFixed(3)} us/call  ratio ${(u / b).toFixed(2)}`)
  console.log(`Invocation.run, handler Effect.succeed, inside a parent span: ${n.toFixed(3)} us/call  ratio ${(n / b).toFixed(2)}`)
  console.log(`  the same Effect.gen handler yielded directly, no pipeline:  ${d.toFixed(3)} us/call`)
})

Effect.runPromise(main)
