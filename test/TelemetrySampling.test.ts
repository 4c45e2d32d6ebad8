/**
 * Trace sampling (design: Observability): `OTEL_TRACES_SAMPLER=parentbased_traceidratio` with a ratio of 0.1 over
 * 200 platform tasks (a platform and a serving process, each exporting to an OTLP receiver of the test's own)
 * exports about a tenth of the task traces, each whole; the database's spans only when asked for; the variables'
 * bad values named.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either, Layer, Schedule, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Telemetry, Timing, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Serve } from "../src/exports/serve.js"
import { traceIdSampled } from "../src/internal/util/sampling.js"
import { type Receiver, startReceiver } from "./support/otlpReceiver.js"
import { clientLayer } from "./support/platform.js"

const receiver = Effect.acquireRelease(Effect.promise(startReceiver), (r) => Effect.promise(r.close))

const lookup = Tool.make("lookup_order", {
  description: "Looks an order up.",
  input: { orderId: Schema.String },
  output: Schema.String,
  timeout: "5 seconds"
}, ({ orderId }) => Effect.succeed(`${orderId} shipped`).pipe(Effect.withSpan("lookup in the order book")))

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [{ id: "c1", name: "lookup_order", arguments: `{"orderId":"A-1"}` }] },
  { text: "It has shipped." }
]

/** `tasks` tasks through a platform (journaled: the database's spans exist) and a serving process, both exporting. */
const runTasks = (r: Receiver, tasks: number, options: Partial<Telemetry.Options>) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-sampling-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const exported = (serviceName: string) => Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName, ...options })
    const policy = Timing.layer({ redelivery: Schedule.spaced("10 seconds") })
    yield* Effect.gen(function*() {
      const platform = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({
            tokens: new Map([["tok-1", "agent-1"]]),
            journal: join(dir, "journal.sqlite")
          })),
          Layer.provide(Layer.mergeAll(LanguageModel.layerScripted(script, { perConversation: true }), policy, exported("platform")))
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, platform)
      const serving = yield* Layer.build(Layer.merge(clientLayer({ url }, policy), exported("serving")))
      yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
        for (let i = 0; i < tasks; i++) {
          // Each task a trace of its own, from the submitter's span.
          yield* served.runTask(`where is A-1 (${i})?`).pipe(Effect.withSpan("ask support", { root: true }))
        }
      }).pipe(Effect.provide(serving))
    }).pipe(Effect.scoped)
  }).pipe(Effect.scoped)

describe("Telemetry: trace sampling", () => {
  it.live("parentbased_traceidratio 0.1 over 200 tasks: about a tenth of the task traces, each whole, no database span", () =>
    Effect.gen(function*() {
      const r = yield* receiver
      const tasks = 200
      yield* runTasks(r, tasks, { sampler: { name: "parentbased_traceidratio", ratio: 0.1 } })
      const asks = r.spans.filter((s) => s.name === "ask support")
      const traces = new Set(asks.map((s) => s.traceId))
      // 200 draws at 0.1: 20 expected; below 5 or over 40 has a chance under one in a million.
      assert.isAtLeast(traces.size, 5)
      assert.isAtMost(traces.size, 40)
      for (const traceId of traces) {
        const spans = r.spans.filter((s) => s.traceId === traceId)
        const names = spans.map((s) => `${s.service} ${s.name}`)
        // Whole: the submit, the platform's run and call, the serving process's call and its handler.
        for (
          const name of [
            "serving ask support",
            "platform invoke_agent agent-1",
            "platform execute_tool lookup_order",
            "serving execute_tool lookup_order",
            "serving lookup in the order book"
          ]
        ) assert.include(names, name, traceId)
      }
      // Every span exported, whichever process, is of a trace the ratio sampled, whose root was exported.
      const roots = new Set(r.spans.filter((s) => s.parentSpanId === undefined).map((s) => s.traceId))
      for (const span of r.spans) {
        assert.isTrue(traceIdSampled(span.traceId, 0.1), `${span.service} ${span.name} of an unsampled trace`)
        assert.isTrue(roots.has(span.traceId), `${span.service} ${span.name}: its trace's root was not exported`)
      }
      assert.isFalse(r.spans.some((s) => s.name.startsWith("sql.")), "a database span was exported")
    }).pipe(Effect.scoped), 120_000)

  it.live("the database's spans are exported when asked for; always_off exports no span", () =>
    Effect.gen(function*() {
      const on = yield* receiver
      yield* runTasks(on, 2, { databaseSpans: true })
      assert.isTrue(on.spans.some((s) => s.name === "sql.execute"), on.spans.map((s) => s.name).join(", "))
      const off = yield* receiver
      yield* runTasks(off, 2, { sampler: { name: "always_off" } })
      assert.strictEqual(off.spans.length, 0)
      assert.isAbove(off.metrics.length + off.logs.length, 0, "metrics and logs go on")
    }).pipe(Effect.scoped), 60_000)

  it.effect("OTEL_TRACES_SAMPLER and its argument: read, or a bad value named", () =>
    Effect.gen(function*() {
      const read = (vars: Record<string, string>) =>
        Effect.either(Effect.withConfigProvider(Telemetry.samplerFromEnv, ConfigProvider.fromMap(new Map(Object.entries(vars)))))
      assert.deepStrictEqual(yield* read({}), Either.right({ name: "parentbased_always_on" }))
      assert.deepStrictEqual(
        yield* read({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" }),
        Either.right({ name: "parentbased_traceidratio", ratio: 0.1 })
      )
      assert.deepStrictEqual(yield* read({ OTEL_TRACES_SAMPLER: "traceidratio" }), Either.right({ name: "traceidratio", ratio: 1 }))
      const bad = yield* read({ OTEL_TRACES_SAMPLER: "jaeger_remote" })
      assert.isTrue(Either.isLeft(bad) && bad.left.message.startsWith("OTEL_TRACES_SAMPLER is malformed: one of always_on"))
      const ratio = yield* read({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "10%" })
      assert.isTrue(Either.isLeft(ratio) && ratio.left.message.includes("OTEL_TRACES_SAMPLER_ARG"))
    }))
})
