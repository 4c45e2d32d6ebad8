/**
 * OpenTelemetry export (design: Observability), to an OTLP/HTTP receiver of our own on 127.0.0.1
 * that decodes what the exporter really sends: the spans of a run on the GenAI conventions and
 * their parent links, the log lines inside a call joined to its span, the metrics, the variables
 * the CLI reads, and that no content leaves unless it is asked for.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, ConfigProvider, Effect, Either, Layer, Schedule, Schema, Stream } from "effect"
import { Agent, Invocation, LanguageModel, Telemetry, Timing, Tool, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Serve } from "../src/exports/serve.js"
import { mcpServer } from "./support/mcpHttp.js"
import { type ReceivedSpan, type Receiver, startReceiver } from "./support/otlpReceiver.js"
import { clientLayer } from "./support/platform.js"
import { Exporting } from "../src/internal/util/metrics.js"

const receiver = Effect.acquireRelease(Effect.promise(startReceiver), (r) => Effect.promise(r.close))

const lookup = Tool.make("lookup_order", {
  description: "Looks an order up.",
  input: { orderId: Schema.String },
  output: Schema.Struct({ status: Schema.String }),
  timeout: "5 seconds"
}, ({ orderId }) =>
  Effect.gen(function*() {
    yield* Effect.logInfo(`looking the order up (${orderId.length} characters)`)
    return { status: "shipped" }
  }).pipe(Effect.withSpan("lookup in the order book")))

const secretPrompt = "where is order SECRET-PROMPT-42 for jane@example.com"
const agent = Agent.make({ name: "support", instructions: "Answer briefly.", tools: [lookup] })
const model = LanguageModel.layerScripted([
  { toolCalls: [{ id: "call-1", name: "lookup_order", arguments: `{"orderId":"SECRET-ARG-7"}` }], usage: { inputTokens: 12, outputTokens: 5 } },
  { text: "It has shipped.", usage: { inputTokens: 30, outputTokens: 4 } }
])

/** Runs the agent with telemetry exported to `receiver`; the layer's end sends what is pending. */
const runExported = (r: Receiver, captureContent: boolean) =>
  Agent.run(agent, secretPrompt).pipe(
    Effect.provide(Layer.merge(
      model,
      Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName: "support-bot", captureContent })
    )),
    Effect.scoped
  )

describe("Telemetry: OTLP export", () => {
  it.live("a run's spans on the GenAI conventions, in one trace: invoke_agent -> chat, execute_tool -> the handler's span", () =>
    Effect.gen(function*() {
      const r = yield* receiver
      const result = yield* runExported(r, false)
      assert.strictEqual(result.output, "It has shipped.")
      const byName = (name: string) => r.spans.filter((s) => s.name === name)
      const [run] = byName("invoke_agent support")
      assert.isDefined(run, `spans: ${r.spans.map((s) => s.name).join(", ")}`)
      assert.strictEqual(run!.service, "support-bot")
      assert.isUndefined(run!.parentSpanId)
      assert.deepInclude(run!.attributes, {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted"
      })
      assert.match(String(run!.attributes["gen_ai.conversation.id"]), /^run/)
      const chats = byName("chat scripted")
      assert.strictEqual(chats.length, 2)
      for (const chat of chats) {
        assert.strictEqual(chat.parentSpanId, run!.spanId)
        assert.strictEqual(chat.traceId, run!.traceId)
        assert.strictEqual(chat.attributes["gen_ai.operation.name"], "chat")
        assert.strictEqual(chat.attributes["gen_ai.conversation.id"], run!.attributes["gen_ai.conversation.id"])
      }
      assert.deepInclude(chats[0]!.attributes, { "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5 })
      assert.deepStrictEqual(chats[0]!.attributes["gen_ai.response.finish_reasons"], ["tool_calls"])
      const [call] = byName("execute_tool lookup_order")
      assert.strictEqual(call!.parentSpanId, run!.spanId)
      assert.deepInclude(call!.attributes, {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.id": "call-1",
        "agent_tools.attempt": 1,
        "agent_tools.reused": false,
        "agent_tools.outcome": "success"
      })
      assert.match(String(call!.attributes["agent_tools.deadline"]), /^\d{4}-\d\d-\d\dT/)
      const [handler] = byName("lookup in the order book")
      assert.strictEqual(handler!.parentSpanId, call!.spanId)
      assert.strictEqual(handler!.traceId, run!.traceId)
      // The handler's log line joins its span.
      const line = r.logs.find((l) => String(l.body).includes("looking the order up"))
      assert.isDefined(line, `logs: ${r.logs.map((l) => String(l.body)).join(" | ")}`)
      assert.strictEqual(line!.traceId, run!.traceId)
      assert.strictEqual(line!.spanId, handler!.spanId)
      // The metrics: OpenTelemetry's GenAI client metrics, and ours.
      const metric = (name: string) => r.metrics.filter((m) => m.name === name).flatMap((m) => m.points)
      const tokens = metric("gen_ai.client.token.usage")
      assert.deepStrictEqual(
        tokens.map((p) => [p.attributes["gen_ai.token.type"], p.attributes["gen_ai.request.model"], p.value]).sort(),
        [["input", "scripted", { count: 2, sum: 42 }], ["output", "scripted", { count: 2, sum: 9 }]]
      )
      const durations = metric("gen_ai.client.operation.duration").map((p) => p.value as { count: number })
      assert.deepStrictEqual(durations.map((d) => d.count), [2])
      assert.deepInclude(
        metric("agent_tools.tool.calls").map((p) => [p.attributes["gen_ai.tool.name"], p.attributes["agent_tools.outcome"], p.value]),
        ["lookup_order", "success", 1]
      )
    }).pipe(Effect.scoped), 30_000)

  it.live("no prompt, tool argument, result or model text is exported unless contents are captured; then only the contents", () =>
    Effect.gen(function*() {
      const quiet = yield* receiver
      yield* runExported(quiet, false)
      const sent = quiet.bodies.join("\n")
      assert.isAbove(quiet.spans.length, 3)
      for (const secret of ["SECRET-PROMPT-42", "jane@example.com", "SECRET-ARG-7", "It has shipped", "Answer briefly"]) {
        assert.notInclude(sent, secret, `${secret} was exported without content capture`)
      }
      const loud = yield* receiver
      yield* runExported(loud, true)
      const call = loud.spans.find((s) => s.name === "execute_tool lookup_order")!
      assert.strictEqual(call.attributes["gen_ai.tool.call.arguments"], `{"orderId":"SECRET-ARG-7"}`)
      assert.strictEqual(call.attributes["gen_ai.tool.call.result"], `{"status":"shipped"}`)
      const chat = loud.spans.find((s) => s.name === "chat scripted")!
      assert.include(String(chat.attributes["gen_ai.input.messages"]), "SECRET-PROMPT-42")
      assert.strictEqual(chat.attributes["gen_ai.system_instructions"], "Answer briefly.")
    }).pipe(Effect.scoped), 30_000)

  it.live("an MCP call between two of ours: the server's execute_tool continues the client's trace (traceparent in _meta)", () =>
    Effect.gen(function*() {
      const r = yield* receiver
      const exported = (serviceName: string) => Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName })
      yield* Effect.gen(function*() {
        const port = yield* mcpServer(yield* Toolkit.make(lookup), exported("mcp-server"))
        const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp`, prefix: "far_" })
        const [far] = yield* remote.tools
        const result = yield* Invocation.run(far!, { orderId: "A-1" }).pipe(Effect.provide(exported("mcp-client")))
        assert.deepStrictEqual(result.value, { status: "shipped" })
      }).pipe(Effect.scoped)
      const client = r.spans.find((s) => s.service === "mcp-client" && s.name === "execute_tool far_lookup_order")
      const server = r.spans.find((s) => s.service === "mcp-server" && s.name === "execute_tool lookup_order")
      const handler = r.spans.find((s) => s.service === "mcp-server" && s.name === "lookup in the order book")
      assert.isDefined(client, `spans: ${r.spans.map((s) => `${s.service} ${s.name}`).join(", ")}`)
      assert.isDefined(server, `spans: ${r.spans.map((s) => `${s.service} ${s.name}`).join(", ")}`)
      assert.strictEqual(server!.traceId, client!.traceId)
      assert.strictEqual(server!.parentSpanId, client!.spanId)
      assert.strictEqual(handler!.parentSpanId, server!.spanId)
    }).pipe(Effect.scoped), 30_000)

  it.live("a task over the platform is one trace: the submit -> invoke_agent -> execute_tool -> the serving process's call -> its handler", () =>
    Effect.gen(function*() {
      const r = yield* receiver
      const exported = (serviceName: string) => Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName })
      const policy = Timing.layer({ redelivery: Schedule.spaced("10 seconds") })
      yield* Effect.gen(function*() {
        const platform = yield* Layer.build(
          PlatformServer.layerWebSocket({ port: 0 }).pipe(
            Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
            Layer.provide(Layer.mergeAll(model, policy, exported("platform")))
          )
        )
        const url = yield* Effect.provide(PlatformServer.url, platform)
        const serving = yield* Layer.build(Layer.merge(clientLayer({ url }, policy), exported("serving")))
        const events = yield* Effect.gen(function*() {
          const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
          return yield* Stream.runCollect(served.submitTask(secretPrompt)).pipe(Effect.withSpan("ask support"))
        }).pipe(Effect.provide(serving))
        assert.include(Chunk.toReadonlyArray(events).map((e) => e._tag), "TaskCompleted")
      }).pipe(Effect.scoped)
      const find = (service: string, name: string) => {
        const span = r.spans.find((s) => s.service === service && s.name === name)
        assert.isDefined(span, `no ${service} ${name}: ${r.spans.map((s) => `${s.service} ${s.name}`).join(", ")}`)
        return span!
      }
      const ask = find("serving", "ask support")
      const run = find("platform", "invoke_agent agent-1")
      const platformCall = find("platform", "execute_tool lookup_order")
      const servedCall = find("serving", "execute_tool lookup_order")
      const handler = find("serving", "lookup in the order book")
      for (const span of [run, platformCall, servedCall, handler]) assert.strictEqual(span.traceId, ask.traceId, span.name)
      assert.strictEqual(platformCall.parentSpanId, run.spanId)
      assert.strictEqual(servedCall.parentSpanId, platformCall.spanId)
      assert.strictEqual(handler.parentSpanId, servedCall.spanId)
      // The run's span descends from the submit: the ids in between are the protocol's own spans.
      const ancestors = (span: ReceivedSpan): Array<string> => {
        const parent = r.spans.find((s) => s.spanId === span.parentSpanId)
        return parent === undefined ? [] : [parent.name, ...ancestors(parent)]
      }
      assert.include(ancestors(run), "ask support")
      const delivered = r.metrics.filter((m) => m.service === "platform" && m.name === "agent_tools.platform.deliveries")
        .flatMap((m) => m.points)
      assert.deepInclude(delivered.map((p) => [p.attributes["agent_tools.delivery"], p.value]), ["first", 1])
    }).pipe(Effect.scoped), 30_000)

  it.effect("the standard variables: none set exports nothing; a bad one is named, its value not echoed", () =>
    Effect.gen(function*() {
      const withEnv = (env: Record<string, string>) =>
        Layer.build(Telemetry.layerFromEnv()).pipe(
          Effect.scoped,
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
          Effect.either
        )
      assert.isTrue(Either.isRight(yield* withEnv({})))
      // No endpoint, the other variables set: nothing is exported. No exporter is provided (the tracer is Effect's own,
      // and the metrics are not recorded), whatever else is set.
      const quiet = yield* Layer.build(Telemetry.layerFromEnv()).pipe(
        Effect.flatMap((context) =>
          Effect.all({ exporting: Exporting, tracer: Effect.tracer }).pipe(Effect.provide(context))
        ),
        Effect.scoped,
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["OTEL_SERVICE_NAME", "quiet"], ["OTEL_EXPORTER_OTLP_HEADERS", "a=b"]])))
      )
      assert.isFalse(quiet.exporting)
      assert.strictEqual(quiet.tracer, yield* Effect.tracer)
      const badUrl = yield* withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" })
      assert.strictEqual(Either.getLeft(badUrl).pipe((e) => e._tag === "Some" ? String(e.value.message) : ""),
        "OTEL_EXPORTER_OTLP_ENDPOINT is malformed: an http:// or https:// URL, the collector's base (e.g. http://localhost:4318)")
      const badHeaders = yield* withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", OTEL_EXPORTER_OTLP_HEADERS: "x-api-key" + "SECRET-KEY-9" })
      const text = Either.getLeft(badHeaders).pipe((e) => e._tag === "Some" ? String(e.value.message) : "")
      assert.include(text, "OTEL_EXPORTER_OTLP_HEADERS is malformed")
      assert.notInclude(text, "SECRET-KEY-9")
      const grpc = yield* withEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })
      assert.include(Either.getLeft(grpc).pipe((e) => e._tag === "Some" ? String(e.value.message) : ""), "grpc is not supported")
      assert.deepStrictEqual(
        Telemetry.parseHeaders("x-api-key=a%20b, x-team=core"),
        Either.right({ "x-api-key": "a b", "x-team": "core" })
      )
    }))

  it.effect("values that cannot be used stop the start, each named: CRLF, a bad header name, 120 KB of headers, garbage attributes, capture=yes", () =>
    Effect.gen(function*() {
      const refusal = (env: Record<string, string>) =>
        Layer.build(Telemetry.layerFromEnv()).pipe(
          Effect.scoped,
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1", ...env })))),
          Effect.flip,
          Effect.map((error) => String(error.message))
        )
      assert.strictEqual(
        yield* refusal({ OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=SECRET%0D%0AX-Evil: 1" }),
        "OTEL_EXPORTER_OTLP_HEADERS is malformed: entry 1 of 1's value holds a control character (a line break?); the form is " +
          "key=value pairs, comma-separated, values percent-encoded (e.g. x-api-key=abc,x-team=a%20b)"
      )
      assert.include(yield* refusal({ OTEL_EXPORTER_OTLP_HEADERS: "ok=1,bad name=2" }), "entry 2 of 2's key is not an HTTP header name")
      assert.include(
        yield* refusal({ OTEL_EXPORTER_OTLP_HEADERS: `x-big=${"a".repeat(120 * 1024)}` }),
        `OTEL_EXPORTER_OTLP_HEADERS is malformed: it holds ${120 * 1024 + 6} characters, over 8192`
      )
      assert.include(yield* refusal({ OTEL_RESOURCE_ATTRIBUTES: "garbage" }), "OTEL_RESOURCE_ATTRIBUTES is malformed: entry 1 of 1 is not key=value")
      assert.strictEqual(
        yield* refusal({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: "yes" }),
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT is malformed: true (or 1) to capture the messages, false (or 0, or unset) not to"
      )
      assert.notInclude(yield* refusal({ OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=SECRET-9%0A" }), "SECRET-9")
    }))
})
