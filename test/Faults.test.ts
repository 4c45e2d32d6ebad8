/**
 * Faults: a model provider that answers 429, 500, or garbage, against a real HTTP server
 * on 127.0.0.1 speaking each provider's wire format, and a tool that hangs past its deadline. Each
 * fault ends as the contract says: transient ones are retried on `Timing.modelRetry` and the
 * run completes; garbage is a typed, non-retried failure naming the provider and what was wrong;
 * a hanging call ends at its deadline with the timeout text and the run goes on. Never a defect,
 * never a hang, never a lost call.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Exit, Fiber, Layer, Logger, Option, TestClock } from "effect"
import { afterAll } from "vitest"
import { Agent, LanguageModel, Tool } from "../src/index.js"
import { Model } from "../src/exports/providers.js"
import { record } from "./support/figures.js"
import { type FixtureServer, fixture, fixtureServer, type Reply } from "./support/fixtureServer.js"
import { agent, lookupOrder, prompt } from "./support/supportAgent.js"

interface Provider {
  readonly name: "anthropic" | "openai"
  readonly model: string
  readonly key: string
  readonly env: (url: string) => Record<string, string>
  readonly fixtures: { readonly toolCalls: string; readonly text: string; readonly rateLimit: string; readonly server: string }
  /** What is wrong with `{ result, items }` as this API's response. */
  readonly shapeProblems: string
}

const providers: ReadonlyArray<Provider> = [
  {
    name: "anthropic",
    model: "anthropic:claude-sonnet-4-5",
    key: "sk-ant-faults-5f2c9a7e13b4",
    env: (url) => ({ ANTHROPIC_API_KEY: "sk-ant-faults-5f2c9a7e13b4", ANTHROPIC_BASE_URL: url }),
    fixtures: { toolCalls: "response_tool_use", text: "response_text", rateLimit: "error_rate_limit", server: "error_api" },
    shapeProblems: "content: is missing; stop_reason: is missing; usage: is missing"
  },
  {
    name: "openai",
    model: "openai:gpt-4.1",
    key: "sk-faults-8d0e4b6a21c7",
    env: (url) => ({ OPENAI_API_KEY: "sk-faults-8d0e4b6a21c7", OPENAI_BASE_URL: `${url}/v1` }),
    fixtures: { toolCalls: "response_tool_calls", text: "response_text", rateLimit: "error_rate_limit", server: "error_server" },
    shapeProblems: "choices: is missing"
  }
]

/** What the figures add up, over the whole file. */
const tally = { injected: 0, survived: 0, emitted: 0, ended: 0 }

afterAll(() => {
  record({ suite: "faults", measure: "faults injected (429, 5xx, garbage, a hanging tool)", value: tally.injected })
  record({ suite: "faults", measure: "faults survived as the contract says", value: tally.survived, expected: `${tally.injected}` })
  record({ suite: "faults", measure: "lost calls (emitted by the model, no result)", value: tally.emitted - tally.ended, expected: "0" })
  assert.strictEqual(tally.emitted - tally.ended, 0, "lost calls")
})

/** Counts the tool calls of a finished run: each one emitted must have ended with a value or an error text. */
const countCalls = (result: Agent.RunResult) => {
  tally.emitted += result.toolCalls.length
  tally.ended += result.toolCalls.filter((call) => call.result.value !== undefined || call.result.error !== undefined).length
}


const live = (millis: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))
const arrived = (server: FixtureServer, n: number) => Effect.promise(() => server.waitFor(n))

/** The run on the provider's real layer, pointed at the fixture server; the default `Timing`. */
const runOn = (p: Provider, server: FixtureServer) =>
  Agent.run(agent, prompt).pipe(
    Effect.provide(Model.layer(p.model).pipe(
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(p.env(server.url))))))
    ))
  )

/** The run's exit, or "hung" if it has not ended 5 s (real time) after its last request. */
const settle = <A, E>(fiber: Fiber.Fiber<A, E>) =>
  Effect.raceFirst(Fiber.await(fiber), Effect.as(live(5_000), "hung" as const))

for (const p of providers) {
  const reply = (status: number, name: string, headers?: Record<string, string>): Reply => ({
    status,
    body: fixture(`${p.name}/${name}.json`),
    ...(headers === undefined ? {} : { headers })
  })
  const good = JSON.stringify(fixture(`${p.name}/${p.fixtures.text}.json`))

  describe(`faults, ${p.name}`, () => {
    it.scoped("429 with retry-after, then 500, then good turns: retried on modelRetry, the run completes", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([
          reply(429, p.fixtures.rateLimit, { "retry-after": "2" }),
          reply(500, p.fixtures.server),
          reply(200, p.fixtures.toolCalls),
          reply(200, p.fixtures.text)
        ])
        tally.injected += 2
        const fiber = yield* Effect.fork(runOn(p, server))
        yield* arrived(server, 1)
        // The default schedule's first wait (~500 ms) is shorter than retry-after: retry-after wins.
        yield* TestClock.adjust("1999 millis")
        yield* live(50)
        assert.strictEqual(server.received.length, 1, "no retry before retry-after")
        yield* TestClock.adjust("1 milli")
        yield* arrived(server, 2)
        // The second wait is 1 s, jittered to at most 1.2 s.
        yield* TestClock.adjust("1200 millis")
        const exit = yield* settle(fiber)
        assert.notStrictEqual(exit, "hung")
        if (exit === "hung" || Exit.isFailure(exit)) return assert.fail(`the run failed: ${String(exit)}`)
        const result = exit.value
        assert.strictEqual(result.output, "Order ord-4821 has shipped; there is no order ord-0000.")
        assert.strictEqual(server.received.length, 4)
        assert.deepStrictEqual(result.toolCalls.map((call) => call.result.error ?? "ok"), ["ok", "NotFound: no order with id=ord-0000"])
        countCalls(result)
        tally.survived += 2
      }))

    /** Garbage in a 200: a typed failure at once, not retried, naming the provider and the problem. */
    const garbage: ReadonlyArray<readonly [string, Reply, string]> = [
      ["a 200 whose body is not JSON", { status: 200, text: "hello, this is not JSON" }, `${p.name}: HTTP 200 with a body that is not JSON (`],
      ["a 200 with JSON of the wrong shape", { status: 200, body: { result: "ok", items: [1, 2] } }, `${p.name}: unexpected response body: ${p.shapeProblems}`],
      ["a 200 with a truncated JSON body", { status: 200, text: good.slice(0, Math.floor(good.length / 2)) }, `${p.name}: HTTP 200 with a body that is not JSON (`],
      ["a 200 with an empty body", { status: 200, text: "" }, `${p.name}: HTTP 200 with an empty body`],
      ["a 200 with a JSON array", { status: 200, body: [good] }, `${p.name}: unexpected response body: expected a JSON object, got an array`]
    ]
    for (const [name, answer, message] of garbage) {
      it.scoped(`${name}: a typed failure naming the provider, not retried`, () =>
        Effect.gen(function*() {
          const server = yield* fixtureServer([answer, reply(200, p.fixtures.text)])
          tally.injected++
          const fiber = yield* Effect.fork(runOn(p, server))
          yield* arrived(server, 1)
          // Were it retried, this would let the retry go.
          yield* TestClock.adjust("1 minute")
          const exit = yield* settle(fiber)
          if (exit === "hung") return assert.fail("the run hung")
          assert.isTrue(Exit.isFailure(exit) && !Cause.isDie(exit.cause), `a typed failure, not ${String(exit)}`)
          const error = Exit.isFailure(exit) ? Option.getOrThrow(Cause.failureOption(exit.cause)) : undefined
          assert.strictEqual(error?._tag, "ModelError")
          assert.isTrue(error?.message.startsWith(message), `message: ${error?.message}`)
          assert.isFalse(error?._tag === "ModelError" && error.transient, "garbage in a 200 is not transient")
          assert.notInclude(error?.message ?? "", p.key)
          assert.strictEqual(server.received.length, 1, "not retried")
          tally.survived++
        }))
    }

    it.scoped("a 200 whose connection closes mid-body: transient, retried, the run completes", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([{ ...reply(200, p.fixtures.text), cut: true }, reply(200, p.fixtures.text)])
        tally.injected++
        const logs: Array<string> = []
        const fiber = yield* Effect.fork(runOn(p, server).pipe(
          Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logs.push(String(message)))))
        ))
        yield* arrived(server, 1)
        yield* TestClock.adjust("1 second")
        const exit = yield* settle(fiber)
        if (exit === "hung" || Exit.isFailure(exit)) return assert.fail(`the run failed: ${String(exit)}`)
        assert.strictEqual(exit.value.output, "Order ord-4821 has shipped; there is no order ord-0000.")
        assert.strictEqual(server.received.length, 2)
        assert.match(logs.join("\n"), new RegExp(`model request failed \\(${p.name}: HTTP 200: reading the body failed \\(\\w+`))
        tally.survived++
      }))

    it.scoped("a 502 HTML error page: transient, retried, then a typed failure whose message is the page's title", () =>
      Effect.gen(function*() {
        const page: Reply = {
          status: 502,
          headers: { "content-type": "text/html" },
          text: "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        }
        // The default policy: the first request and 4 retries.
        const server = yield* fixtureServer([page, page, page, page, page])
        tally.injected++
        const fiber = yield* Effect.fork(runOn(p, server))
        for (let n = 1; n <= 5; n++) {
          yield* arrived(server, n)
          yield* TestClock.adjust("10 seconds")
        }
        const exit = yield* settle(fiber)
        if (exit === "hung") return assert.fail("the run hung")
        const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
        assert.strictEqual(error?._tag, "ModelError")
        assert.strictEqual(error?.message, `${p.name}: HTTP 502: 502 Bad Gateway (an HTML page)`)
        assert.notInclude(error?.message ?? "", p.key)
        assert.isTrue(error?._tag === "ModelError" && error.transient)
        assert.strictEqual(server.received.length, 5)
        tally.survived++
      }))

    it.scoped("a 502 HTML page, then a good turn: retried, the run completes", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([
          { status: 502, headers: { "content-type": "text/html" }, text: "<html><body>upstream down</body></html>" },
          reply(200, p.fixtures.text)
        ])
        tally.injected++
        const fiber = yield* Effect.fork(runOn(p, server))
        yield* arrived(server, 1)
        yield* TestClock.adjust("1 second")
        const exit = yield* settle(fiber)
        if (exit === "hung" || Exit.isFailure(exit)) return assert.fail(`the run failed: ${String(exit)}`)
        assert.strictEqual(exit.value.output, "Order ord-4821 has shipped; there is no order ord-0000.")
        assert.strictEqual(server.received.length, 2)
        tally.survived++
      }))
  })
}

describe("faults, a tool that hangs past its deadline", () => {
  it.effect("the call ends at its deadline with the timeout text, the handler is interrupted, the run goes on", () =>
    Effect.gen(function*() {
      const handler = { started: 0, finalized: 0 }
      const hang = Tool.make("wait_for_godot", {
        description: "Waits.",
        input: {},
        timeout: "5 seconds"
      }, () =>
        Effect.suspend(() => {
          handler.started++
          return Effect.ensuring(Effect.never, Effect.sync(() => handler.finalized++))
        }))
      const model = LanguageModel.layerScripted([
        { toolCalls: [{ id: "c1", name: "wait_for_godot", arguments: "{}" }, { id: "c2", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" }] },
        (request) => ({
          text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}: ${m.content}`] : []).join("\n")
        })
      ])
      tally.injected++
      const fiber = yield* Effect.fork(Agent.run(Agent.make({ tools: [hang, lookupOrder] }), "wait").pipe(Effect.provide(model)))
      yield* TestClock.adjust("4999 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "still waiting before the deadline")
      assert.deepStrictEqual(handler, { started: 1, finalized: 0 })
      yield* TestClock.adjust("1 milli")
      const result = yield* Fiber.join(fiber)
      assert.deepStrictEqual(handler, { started: 1, finalized: 1 })
      assert.strictEqual(result.toolCalls[0]!.result.error, "wait_for_godot timed out after 5 s; its outcome is unknown")
      assert.strictEqual(result.toolCalls[0]!.durationMillis, 5_000)
      assert.strictEqual(
        result.output,
        "c1: wait_for_godot timed out after 5 s; its outcome is unknown\nc2: {\"id\":\"ord-4821\",\"status\":\"shipped\",\"total\":42}"
      )
      assert.strictEqual(result.steps, 2)
      countCalls(result)
      tally.survived++
    }))
})
