/**
 * One trace across OS processes (design: Observability): a serving process spawned with the
 * standard OTEL_* variables submits a task to the platform (this process, exporting as "platform"),
 * whose call it then runs; an OTLP/HTTP receiver here gets both processes' spans, linked. Real
 * processes: the slow project.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { execFile, spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Invocation, LanguageModel, Telemetry, Timing } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { PlatformServer } from "../src/exports/platform.js"
import { startReceiver } from "./support/otlpReceiver.js"
import { resultsText } from "./support/platform.js"
import { freePort } from "./support/postgres.js"

const call = (id: string, name: string, args: unknown) => ({ id, name, arguments: JSON.stringify(args) })

describe("Telemetry across processes", () => {
  it.live("a task from a serving process in another OS process is one trace: its submit, the platform's run, its call", () =>
    Effect.gen(function*() {
      const r = yield* Effect.acquireRelease(Effect.promise(startReceiver), (r) => Effect.promise(r.close))
      yield* Effect.gen(function*() {
        const platform = yield* Layer.build(
          PlatformServer.layerWebSocket({ port: 0 }).pipe(
            Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
            Layer.provide(Layer.mergeAll(
              LanguageModel.layerScripted([
                { toolCalls: [call("l", "lookup", { id: "ord-1" })] },
                (request) => ({ text: resultsText(request) })
              ]),
              Timing.layer({ redelivery: Schedule.spaced("10 seconds") }),
              Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName: "platform" })
            ))
          )
        )
        const url = yield* Effect.provide(PlatformServer.url, platform)
        const root = fileURLToPath(new URL("..", import.meta.url))
        const stdout = yield* Effect.async<string, Error>((resume) => {
          const child = execFile(process.execPath, ["--import", "tsx", "test/support/serveChild.ts"], {
            cwd: root,
            timeout: 60_000,
            env: {
              ...process.env,
              AGENT_ID: "agent-1",
              PLATFORM_TOKEN: "tok-1",
              PLATFORM_URL: url,
              PROMPT: "go",
              OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
              OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
              OTEL_SERVICE_NAME: "serving"
            }
          }, (error, out) => resume(error ? Effect.fail(error) : Effect.succeed(out)))
          return Effect.sync(() => child.kill())
        })
        assert.include(stdout, "shipped")
      }).pipe(Effect.scoped)
      const find = (service: string, name: string) => {
        const span = r.spans.find((s) => s.service === service && s.name === name)
        assert.isDefined(span, `no ${service} ${name}: ${r.spans.map((s) => `${s.service} ${s.name}`).join(", ")}`)
        return span!
      }
      const submit = find("serving", "serving child: runTask")
      const run = find("platform", "invoke_agent agent-1")
      const platformCall = find("platform", "execute_tool lookup")
      const servedCall = find("serving", "execute_tool lookup")
      for (const span of [run, platformCall, servedCall]) assert.strictEqual(span.traceId, submit.traceId, span.name)
      assert.strictEqual(platformCall.parentSpanId, run.spanId)
      assert.strictEqual(servedCall.parentSpanId, platformCall.spanId)
      console.log(`one trace over two processes: ${r.spans.filter((s) => s.traceId === submit.traceId).length} spans`)
    }).pipe(Effect.scoped), 90_000)

  it.live("an MCP call between two of our processes: `mcp --http` (OTEL_* set) continues the client's trace", () =>
    Effect.gen(function*() {
      const r = yield* Effect.acquireRelease(Effect.promise(startReceiver), (r) => Effect.promise(r.close))
      const port = yield* Effect.promise(freePort)
      const root = fileURLToPath(new URL("..", import.meta.url))
      yield* Effect.gen(function*() {
        yield* Effect.acquireRelease(
          Effect.sync(() =>
            spawn(process.execPath, ["--import", "tsx", "src/main.ts", "mcp", "--http", "--port", String(port)], {
              cwd: root,
              env: {
                ...process.env,
                OTEL_EXPORTER_OTLP_ENDPOINT: r.url,
                OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
                OTEL_SERVICE_NAME: "mcp-server"
              },
              stdio: "ignore"
            })
          ),
          // SIGTERM: the server's exporter sends what it holds as it stops.
          (child) =>
            Effect.async<void>((resume) => {
              child.once("exit", () => resume(Effect.void))
              child.kill("SIGTERM")
            })
        )
        const remote = yield* Mcp.toolkit({ url: `http://127.0.0.1:${port}/mcp`, prefix: "far_" }).pipe(
          Effect.retry(Schedule.spaced("200 millis").pipe(Schedule.upTo("30 seconds")))
        )
        const tool = (yield* remote.tools).find((t) => t.name === "far_lookup_order")!
        const result = yield* Invocation.run(tool, { order_id: "ord-4821" }).pipe(
          Effect.provide(Telemetry.layer({ endpoint: r.url, protocol: "http/json", serviceName: "mcp-client" }))
        )
        assert.isTrue(result.success, result.error)
      }).pipe(Effect.scoped)
      const client = r.spans.find((s) => s.service === "mcp-client" && s.name === "execute_tool far_lookup_order")
      const server = r.spans.find((s) => s.service === "mcp-server" && s.name === "execute_tool lookup_order")
      const names = r.spans.map((s) => `${s.service} ${s.name}`).join(", ")
      assert.isDefined(client, names)
      assert.isDefined(server, names)
      assert.strictEqual(server!.traceId, client!.traceId)
      assert.strictEqual(server!.parentSpanId, client!.spanId)
      console.log(`MCP between two processes: the server's execute_tool is a child of the client's (trace ${client!.traceId})`)
    }).pipe(Effect.scoped), 90_000)
})
