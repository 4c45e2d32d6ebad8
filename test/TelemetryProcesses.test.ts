/**
 * One trace across OS processes (design: Observability): a serving process spawned with the
 * standard OTEL_* variables submits a task to the platform (this process, exporting as "platform"),
 * whose call it then runs; an OTLP/HTTP receiver here gets both processes' spans, linked. Real
 * processes: the slow project.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { LanguageModel, PlatformServer, Telemetry, Timing } from "../src/index.js"
import { startReceiver } from "./support/otlpReceiver.js"
import { resultsText } from "./support/platform.js"

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
})
