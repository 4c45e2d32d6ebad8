/**
 * The `@effect/ai` adapter beside our own provider, on the same fake server: one HTTP server on
 * 127.0.0.1 answers the Chat Completions wire format (a turn with two tool calls, then a text), and
 * the same agent runs through `openai:<model>` (our client) and `openrouter:<model>` (Effect's
 * OpenRouter client through `EffectAi.layer`). Runs one at a time (the model's time is the figure,
 * not concurrency), interleaved in rounds so that neither gets the warmer machine. Run with
 * `npm run bench` or `tsx test/bench/providers.ts [--runs=N]`.
 */
import { ConfigProvider, Effect, Layer, Logger, LogLevel, Schema } from "effect"
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent, Tool } from "../../src/index.js"
import { Model } from "../../src/exports/providers.js"
import { report } from "./report.js"

const runs = Number(process.argv.find((a) => a.startsWith("--runs="))?.slice("--runs=".length) ?? 300)
const fixture = (path: string): string => readFileSync(new URL(`../fixtures/${path}`, import.meta.url), "utf8")
const calls = fixture("openrouter/response_tool_calls.json")
const text = fixture("openrouter/response_text.json")

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: {
    order_id: Schema.String,
    note: Schema.optional(Schema.Struct({ text: Schema.String, flag: Schema.optional(Schema.Boolean) }))
  },
  output: Schema.String,
  timeout: "10 seconds"
}, ({ order_id }) => Effect.succeed(`order ${order_id}`))
const agent = Agent.make({ name: "support", tools: [lookupOrder], instructions: "You are a support agent." })

/** The fake server: a conversation's first request gets the tool calls, its second (it carries tool results) the text. */
const server = await new Promise<{ readonly url: string; readonly close: () => void }>((resolve) => {
  const http = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const second = Buffer.concat(chunks).includes("\"tool\"")
      res.writeHead(200, { "content-type": "application/json" }).end(second ? text : calls)
    })
  })
  http.listen(0, "127.0.0.1", () =>
    resolve({ url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, close: () => http.close() }))
})

const variants = {
  "our OpenAI client (openai:)": {
    model: "openai:gpt-4.1",
    env: { OPENAI_API_KEY: "sk-bench", OPENAI_BASE_URL: server.url }
  },
  "@effect/ai adapter (openrouter:)": {
    model: "openrouter:openai/gpt-4.1",
    env: { OPENROUTER_API_KEY: "sk-or-bench", OPENROUTER_BASE_URL: server.url }
  }
} as const

type Variant = keyof typeof variants

/** Milliseconds of each run of the agent on the variant's model, `n` runs one after another. */
const timeRuns = (variant: Variant, n: number) =>
  Effect.gen(function*() {
    const { env, model } = variants[variant]
    const context = yield* Layer.build(
      Model.layer(model).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))
    )
    const times: Array<number> = []
    for (let i = 0; i < n; i++) {
      const started = performance.now()
      const result = yield* Agent.run(agent, "Check orders ord-4821 and ord-0000").pipe(Effect.provide(context))
      times.push(performance.now() - started)
      if (result.steps !== 2) throw new Error(`${variant}: ${result.steps} steps`)
    }
    return times
  }).pipe(Effect.scoped)

const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

const program = Effect.gen(function*() {
  const names = Object.keys(variants) as Array<Variant>
  // Warm both (modules, connections), not counted.
  for (const name of names) yield* timeRuns(name, 20)
  const times = new Map<Variant, Array<number>>(names.map((name) => [name, []]))
  const rounds = 5
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? names : [...names].reverse()) {
      times.get(name)!.push(...(yield* timeRuns(name, Math.ceil(runs / rounds))))
    }
  }
  const [ours, adapter] = names.map((name) => times.get(name)!)
  const p50 = (values: ReadonlyArray<number>) => percentile(values, 0.5)
  const p99 = (values: ReadonlyArray<number>) => percentile(values, 0.99)
  report({
    bench: "providers",
    measure: "agent run of 2 model turns (2 tool calls, then a text) on a fake Chat Completions server: our OpenAI client p50 / p99",
    value: `${p50(ours!).toFixed(2)} ms / ${p99(ours!).toFixed(2)} ms`
  })
  report({
    bench: "providers",
    measure: "the same run through the @effect/ai adapter (Effect's OpenRouter client) p50 / p99",
    value: `${p50(adapter!).toFixed(2)} ms / ${p99(adapter!).toFixed(2)} ms`,
    baseline: `${p50(ours!).toFixed(2)} ms`,
    ratio: `${(p50(adapter!) / p50(ours!)).toFixed(2)}x`
  })
})

await Effect.runPromise(program.pipe(Logger.withMinimumLogLevel(LogLevel.Warning)))
server.close()
