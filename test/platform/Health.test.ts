/**
 * Operable in production (docs: operations), on the embedded platform over a real loopback port:
 * liveness and readiness unauthenticated on the platform's port (not ready while the process drains), the
 * Prometheus text of `--metrics` parsed by a parser of the test's own, its task counters matching the tasks run, and
 * each task's life in the log lines (submitted, started, completed, with its id and agent).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { WebSocket } from "ws"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { Serve } from "../../src/exports/serve.js"
import * as Health from "../../src/platform/Health.js"
import { clientLayer } from "../support/platform.js"

/** One sample of the Prometheus text. */
interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/**
 * The Prometheus text format (0.0.4), strictly: `# HELP` and `# TYPE` lines, then samples of a declared name (a
 * histogram's `_bucket`, `_sum`, `_count`), labels quoted with `\\`, `\"` and `\n` escapes, values numbers. Throws
 * naming the line it cannot read.
 */
const parsePrometheus = (text: string): Array<Sample> => {
  const types = new Map<string, string>()
  const samples: Array<Sample> = []
  const lines = text.split("\n")
  assert.strictEqual(lines.at(-1), "", "the text ends with a line break")
  for (const line of lines.slice(0, -1)) {
    const comment = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line)
    if (comment !== null) {
      if (comment[1] === "TYPE") {
        assert.include(["counter", "gauge", "histogram", "summary", "untyped"], comment[3], line)
        assert.isFalse(types.has(comment[2]!), `a second TYPE for ${comment[2]}`)
        types.set(comment[2]!, comment[3]!)
      }
      continue
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (sample === null) throw new Error(`not a Prometheus line: ${line}`)
    const [, name, labelText, valueText] = sample
    const declared = types.get(name!) ?? types.get(name!.replace(/_(bucket|sum|count)$/, ""))
    assert.isDefined(declared, `${name} has no TYPE before it`)
    const labels: Record<string, string> = {}
    let rest = labelText ?? ""
    while (rest !== "") {
      const label = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)/.exec(rest)
      if (label === null) throw new Error(`labels not readable: ${line}`)
      labels[label[1]!] = label[2]!.replace(/\\(.)/g, (_, c: string) => c === "n" ? "\n" : c)
      rest = rest.slice(label[0].length)
    }
    const value = valueText === "+Inf" ? Infinity : valueText === "-Inf" ? -Infinity : Number(valueText)
    assert.isFalse(Number.isNaN(value) && valueText !== "NaN", `not a number: ${line}`)
    samples.push({ name: name!, labels, value })
  }
  return samples
}

/** The value of the sample named `name` whose labels include `labels` (0 when none). */
const valueOf = (samples: ReadonlyArray<Sample>, name: string, labels: Readonly<Record<string, string>> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)

const lookup = Tool.make("lookup", {
  description: "Looks an order up.",
  input: { orderId: Schema.String },
  output: Schema.String,
  timeout: "10 seconds"
}, ({ orderId }) => Effect.succeed(`order ${orderId}: shipped`))

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [{ id: "l1", name: "lookup", arguments: "{\"orderId\":\"A-1\"}" }] },
  { text: "Order A-1 has shipped." }
]

const get = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return { status: response.status, text: await response.text() }
  })

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-health-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

describe("the platform's health, metrics and task logs", () => {
  it.scopedLive("liveness, readiness (not while draining), the Prometheus text and its task counters, each task's log lines", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      // An agent of this test's own: the metrics' registry is the process's.
      const agentId = `agent-metrics-${Math.random().toString(36).slice(2, 8)}`
      const draining = Health.makeDraining()
      const lines: Array<{ readonly message: string; readonly level: string }> = []
      const collecting = Logger.make(({ logLevel, message }) =>
        void lines.push({ level: logLevel.label, message: Array.isArray(message) ? message.join(" ") : String(message) }))
      const policy = Timing.layer({})
      const platform = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({
            tokens: new Map([["tok-m", agentId]]),
            journal: join(dir, "journal.sqlite")
          })),
          Layer.provide(LanguageModel.layerScripted(script, { perConversation: true })),
          Layer.provide(Layer.mergeAll(
            policy,
            PlatformServer.layerPrometheus,
            Layer.succeed(Health.Draining, draining),
            Logger.replace(Logger.defaultLogger, collecting)
          ))
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, platform)
      const http = url.replace(/^ws:/, "http:").replace(/\/rpc$/, "")

      // Liveness and readiness, no token asked; any other path still says the platform speaks WebSocket.
      assert.deepStrictEqual(yield* get(`${http}/healthz`), { status: 200, text: "{\"live\":true}\n" })
      const ready = yield* get(`${http}/readyz`)
      assert.strictEqual(ready.status, 200, ready.text)
      const checks = JSON.parse(ready.text)
      assert.isTrue(checks.ready)
      assert.isTrue(checks.checks.database.ok)
      assert.isTrue(checks.checks.draining.ok)
      assert.strictEqual((yield* get(`${http}/`)).status, 426)
      yield* draining.set(true)
      const drainingNow = yield* get(`${http}/readyz`)
      assert.strictEqual(drainingNow.status, 503)
      assert.isFalse(JSON.parse(drainingNow.text).checks.draining.ok)
      assert.strictEqual((yield* get(`${http}/healthz`)).status, 200, "a draining process is alive")
      yield* draining.set(false)
      assert.strictEqual((yield* get(`${http}/readyz`)).status, 200)

      const before = parsePrometheus((yield* get(`${http}/metrics`)).text)
      const tasks = 6
      yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
        for (let i = 0; i < tasks; i++) assert.strictEqual(yield* served.runTask(`where is A-1 (${i})?`), "Order A-1 has shipped.")
      }).pipe(Effect.provide(clientLayer({ url, agentId, token: "tok-m" }, policy)), Effect.scoped)

      const scraped = yield* get(`${http}/metrics`)
      assert.strictEqual(scraped.status, 200)
      const after = parsePrometheus(scraped.text)
      const agent = { agent_tools_agent: agentId }
      assert.strictEqual(valueOf(after, "agent_tools_platform_tasks_submitted", agent), tasks)
      assert.strictEqual(valueOf(after, "agent_tools_platform_tasks_started", agent), tasks)
      assert.strictEqual(valueOf(after, "agent_tools_platform_tasks_ended", { ...agent, agent_tools_outcome: "completed" }), tasks)
      assert.strictEqual(valueOf(after, "agent_tools_platform_tasks_ended", { ...agent, agent_tools_outcome: "failed" }), 0)
      assert.strictEqual(valueOf(after, "agent_tools_platform_tasks_open", agent), 0)
      // One call a task, each answered: the latency histogram counted each once, its +Inf bucket too.
      const latency = (samples: ReadonlyArray<Sample>, name: string, labels = {}) =>
        valueOf(samples, `agent_tools_platform_delivery_latency${name}`, labels)
      assert.strictEqual(latency(after, "_count") - latency(before, "_count"), tasks)
      assert.strictEqual(latency(after, "_bucket", { le: "+Inf" }) - latency(before, "_bucket", { le: "+Inf" }), tasks)
      assert.strictEqual(valueOf(after, "agent_tools_platform_deliveries", { agent_tools_delivery: "first" }) -
        valueOf(before, "agent_tools_platform_deliveries", { agent_tools_delivery: "first" }), tasks)

      // Each task's life at INFO, by its id and agent; the serving process's connection opened and closed.
      const info = lines.filter((l) => l.level === "INFO").map((l) => l.message)
      const ids = new Set(info.flatMap((m) => {
        const match = new RegExp(`^task (\\S+) of agent ${agentId}: submitted$`).exec(m)
        return match === null ? [] : [match[1]!]
      }))
      assert.strictEqual(ids.size, tasks, info.join("\n"))
      for (const id of ids) {
        for (const step of ["started", "completed"]) {
          assert.include(info, `task ${id} of agent ${agentId}: ${step}`)
        }
      }
      assert.isTrue(info.some((m) => m.startsWith(`a connection of agent ${agentId} opened from`)), info.join("\n"))
    }), 60_000)

  it.scopedLive("a token the platform does not know is refused and logged, never the token; /metrics is off unless asked", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const collecting = Logger.make(({ message }) => void lines.push(Array.isArray(message) ? message.join(" ") : String(message)))
      const platform = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
          Layer.provide(LanguageModel.layerScripted(script)),
          Layer.provide(Logger.replace(Logger.defaultLogger, collecting))
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, platform)
      const http = url.replace(/^ws:/, "http:").replace(/\/rpc$/, "")
      const refused = yield* Effect.promise(() =>
        new Promise<number>((resolve) => {
          const ws = new WebSocket(url, { headers: { authorization: "Bearer not-a-token-SECRET-9" } })
          ws.on("unexpected-response", (_, response) => resolve(response.statusCode ?? 0))
          ws.on("error", () => resolve(0))
        })
      )
      assert.strictEqual(refused, 401)
      yield* Effect.sleep("100 millis")
      assert.isTrue(lines.some((l) => l.includes("with a token the platform does not know since the last line")), lines.join("\n"))
      assert.isFalse(lines.some((l) => l.includes("SECRET-9")))
      assert.strictEqual((yield* get(`${http}/metrics`)).status, 426)
      // Embedded without a journal: ready, its tasks in memory.
      const ready = yield* get(`${http}/readyz`)
      assert.strictEqual(ready.status, 200)
      assert.strictEqual(JSON.parse(ready.text).checks.database.detail, "none: tasks in memory")
    }), 30_000)
})
