/**
 * The acceptance suite every HTTP provider passes, against a real HTTP server on 127.0.0.1 that
 * serves the provider's recorded wire formats (test/fixtures/<provider>/).
 */
import { assert, describe, it } from "@effect/vitest"
import {
  ConfigProvider,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  Schedule,
  Schema,
  TestClock
} from "effect"
import { Agent, Timing, Tool } from "../../src/index.js"
import { Model } from "../../src/exports/providers.js"
import { type FixtureServer, fixture, fixtureServer, type Reply } from "./fixtureServer.js"
import { recordingTracer } from "./recordingTracer.js"

export interface ProviderCase {
  readonly provider: "anthropic" | "openai"
  readonly model: string
  readonly keyVariable: string
  readonly key: string
  /** The environment pointing the provider at the test server. */
  readonly env: (serverUrl: string) => Record<string, string>
  readonly path: string
  /** The key as the request carried it. */
  readonly sentKey: (headers: Record<string, string | Array<string> | undefined>) => string | undefined
  /** Other headers the API requires. */
  readonly requiredHeaders: Record<string, string>
  /** The request's tools, as `{ name, description, parameters }`. */
  readonly toolsOf: (body: any) => Array<unknown>
  readonly fixtures: {
    readonly toolCalls: string
    readonly text: string
    readonly turn2: string
    readonly invalid: string
    readonly rateLimit: string
    readonly server: string
    readonly auth: string
  }
  /** A provider-specific transient status beside 500 (Anthropic's 529), if any. */
  readonly overloaded?: { readonly status: number; readonly fixture: string } | undefined
}

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const Order = Schema.Struct({ id: Schema.String, status: Schema.String, total: Schema.Number })

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: { order_id: Schema.String.annotations({ description: "The order id, like ord-4821" }) },
  output: Order,
  timeout: "10 seconds"
}, ({ order_id }) =>
  order_id === "ord-4821"
    ? Effect.succeed({ id: order_id, status: "shipped", total: 42 })
    : Effect.fail(new NotFound({ message: `no order with id=${order_id}` })))

const agent = Agent.make({ name: "support", tools: [lookupOrder], instructions: "You are a support agent." })
const prompt = "Check orders ord-4821 and ord-0000"

const fastRetry = Timing.layer({ modelRetry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(4))) })

const live = (millis: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))
const arrived = (server: FixtureServer, n: number) => Effect.promise(() => server.waitFor(n))

export const providerSuite = (c: ProviderCase) => {
  const modelLayer = (env: Record<string, string>) =>
    Model.layer(c.model).pipe(
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
      Layer.merge(fastRetry)
    )
  const reply = (status: number, name: string, headers?: Record<string, string>): Reply => ({
    status,
    body: fixture(`${c.provider}/${name}.json`),
    ...(headers === undefined ? {} : { headers })
  })
  const ok = (name: string) => reply(200, name)

  describe(`${c.provider}: requests and a full run`, () => {
    it.scoped("runs two turns with two parallel calls, one failing; requests match the API", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([ok(c.fixtures.toolCalls), ok(c.fixtures.text)])
        const result = yield* Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.env(server.url))))

        assert.strictEqual(result.output, "Order ord-4821 has shipped; there is no order ord-0000.")
        assert.strictEqual(result.steps, 2)
        assert.deepStrictEqual(result.toolCalls.map((call) => [call.name, call.input, call.result.value, call.result.error]), [
          ["lookup_order", { order_id: "ord-4821" }, { id: "ord-4821", status: "shipped", total: 42 }, undefined],
          ["lookup_order", { order_id: "ord-0000" }, undefined, "NotFound: no order with id=ord-0000"]
        ])
        const first = fixture(`${c.provider}/${c.fixtures.toolCalls}.json`)
        const last = fixture(`${c.provider}/${c.fixtures.text}.json`)
        const tokens = (body: any) => body.usage.input_tokens ?? body.usage.prompt_tokens
        const outTokens = (body: any) => body.usage.output_tokens ?? body.usage.completion_tokens
        const cached = (body: any) => body.usage.cache_read_input_tokens ?? body.usage.prompt_tokens_details.cached_tokens
        assert.deepStrictEqual({ ...result.usage, cacheWriteTokens: undefined }, {
          inputTokens: tokens(first) + tokens(last),
          outputTokens: outTokens(first) + outTokens(last),
          cacheReadTokens: cached(first) + cached(last),
          cacheWriteTokens: undefined
        })

        assert.strictEqual(server.received.length, 2)
        for (const request of server.received) {
          assert.strictEqual(request.method, "POST")
          assert.strictEqual(request.url, c.path)
          assert.strictEqual(c.sentKey(request.headers), c.key)
          for (const [name, value] of Object.entries(c.requiredHeaders)) assert.strictEqual(request.headers[name], value)
          assert.deepStrictEqual(c.toolsOf(request.body), [Tool.jsonSchema(lookupOrder)])
        }
        const { tools: _, ...second } = server.received[1]!.body
        assert.deepStrictEqual(second, fixture(`${c.provider}/${c.fixtures.turn2}.json`))
      }))
  })

  describe(`${c.provider}: failures`, () => {
    it.scoped("a 429 with retry-after waits that long, then the run succeeds", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([reply(429, c.fixtures.rateLimit, { "retry-after": "2" }), ok(c.fixtures.text)])
        const fiber = yield* Effect.fork(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.env(server.url)))))
        yield* arrived(server, 1)
        yield* TestClock.adjust("1999 millis")
        yield* live(50)
        assert.strictEqual(server.received.length, 1)
        yield* TestClock.adjust("1 milli")
        yield* arrived(server, 2)
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.output, "Order ord-4821 has shipped; there is no order ord-0000.")
      }))

    it.scoped("500 twice (and Anthropic's 529) are retried and the run succeeds", () =>
      Effect.gen(function*() {
        const transient = [
          reply(500, c.fixtures.server),
          reply(500, c.fixtures.server),
          ...(c.overloaded === undefined ? [] : [reply(c.overloaded.status, c.overloaded.fixture)])
        ]
        const server = yield* fixtureServer([...transient, ok(c.fixtures.text)])
        const fiber = yield* Effect.fork(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.env(server.url)))))
        for (let n = 1; n <= transient.length; n++) {
          yield* arrived(server, n)
          yield* TestClock.adjust("1 second")
        }
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(server.received.length, transient.length + 1)
        assert.strictEqual(result.steps, 1)
      }))

    it.scoped("a 400 fails the run with the typed error carrying the provider's message", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([reply(400, c.fixtures.invalid)])
        const error = yield* Effect.flip(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.env(server.url)))))
        assert.strictEqual(error._tag, "ModelRequestRejected")
        const said = fixture(`${c.provider}/${c.fixtures.invalid}.json`).error.message
        assert.strictEqual(error.message, `${c.provider}: HTTP 400: ${said}`)
        assert.strictEqual(server.received.length, 1)
      }))

    it.scoped("a 401 fails with the typed auth error", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([reply(401, c.fixtures.auth)])
        const error = yield* Effect.flip(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.env(server.url)))))
        assert.strictEqual(error._tag, "ModelAuthError")
        assert.notInclude(error.message, c.key)
      }))

    it.scoped("a missing key fails before any request, naming the variable", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([ok(c.fixtures.text)])
        const env = c.env(server.url)
        const { [c.keyVariable]: _, ...withoutKey } = env
        // For OpenAI the key is optional only with a base URL of one's own: take both away.
        const bare = c.provider === "openai" ? {} : withoutKey
        const error = yield* Effect.flip(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(bare))))
        assert.strictEqual(error._tag, "MissingApiKey")
        assert.include(error.message, c.keyVariable)
        assert.strictEqual(server.received.length, 0)
      }))

    it.scoped("interrupting a run mid-request closes the request", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer(["hang"])
        const fiber = yield* Effect.fork(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.env(server.url)))))
        yield* arrived(server, 1)
        const exit = yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isInterrupted(exit))
        yield* Effect.promise(() => server.waitForClose())
        assert.strictEqual(server.closedEarly(), 1)
      }))

    it.scoped("the key appears in no error, log line or span", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([
          reply(429, c.fixtures.rateLimit, { "retry-after": "0" }),
          reply(401, c.fixtures.auth)
        ])
        const logs: Array<string> = []
        const { spans, tracer } = recordingTracer()
        const fiber = yield* Agent.run(agent, prompt).pipe(
          Effect.provide(modelLayer(c.env(server.url))),
          Effect.flip,
          Effect.withTracer(tracer),
          Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logs.push(String(message))))),
          Effect.fork
        )
        yield* arrived(server, 1)
        yield* TestClock.adjust("1 second")
        const error = yield* Fiber.join(fiber)
        assert.strictEqual(error._tag, "ModelAuthError")
        assert.isAbove(logs.length, 0)
        assert.isTrue(spans.some((s) => s.name.startsWith("http.client")))
        const everything = JSON.stringify({ error, logs, spans: spans.map((s) => [s.name, [...s.attributes]]) })
        assert.notInclude(everything, c.key)
        assert.include(everything, "<redacted>")
        // The key did go out, in the header the API wants.
        assert.strictEqual(c.sentKey(server.received[0]!.headers), c.key)
      }))
  })
}
