/**
 * Secrets scan (design: Observability): with known secret values (an Anthropic key, an OpenAI key, platform
 * tokens) configured, representative flows run while everything is captured: every log line at
 * every level (annotations, spans and causes included), every span (name, attributes, events,
 * links, exit), whatever reached stdout, stderr or the console, every result and error, and every model request
 * the fixture server received (all but the one header that must carry the key). No secret may
 * appear in any of it, as itself, base64 (any alignment), URL-encoded or cut.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  ConfigProvider,
  Effect,
  Exit,
  HashMap,
  Layer,
  List,
  Logger,
  LogLevel,
  Option,
  Schedule,
  Schema,
  Tracer
} from "effect"
import { inspect } from "node:util"
import { afterAll } from "vitest"
import { Agent, Timing, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Model } from "../src/exports/providers.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { record } from "./support/figures.js"
import { type FixtureServer, fixture, fixtureServer, type Reply } from "./support/fixtureServer.js"
import { mcpClient } from "./support/mcpHttp.js"
import { agent, lookupOrder, prompt } from "./support/supportAgent.js"

const secrets = {
  anthropicKey: "sk-ant-api03-Q7xSECRETanthropic9LmN4pV8rT1wZ6yK3bH5cJ0dF2gA",
  openaiKey: "sk-proj-SECRETopenai4kD9sL2mX7qW1eR5tY8uI3oP6aS0dFzZ",
  platformToken: "ptok-SECRETplatform-9f8e7d6c5b4a3210fedcba",
  /** Bound to another agent: the wrong-token flow uses it. */
  otherToken: "ptok-SECRETother-0a1b2c3d4e5f60718293a4b5"
}

/** Every environment the flows see carries all the secrets. */
const environment = (extra: Record<string, string> = {}) => ({
  ANTHROPIC_API_KEY: secrets.anthropicKey,
  OPENAI_API_KEY: secrets.openaiKey,
  PLATFORM_TOKEN: secrets.platformToken,
  ...extra
})

const settings = (env: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

// ---------------------------------------------------------------------------------------------
// The scanner.

const base64 = (bytes: Buffer) => bytes.toString("base64").replace(/=+$/, "")

/** The base64 text of `secret` wherever it sits in a longer string: one needle per alignment. */
const base64Needles = (secret: string): Array<string> => {
  const needles: Array<string> = []
  const bytes = Buffer.from(secret)
  for (let shift = 0; shift < 3; shift++) {
    const encoded = base64(Buffer.concat([Buffer.alloc(shift, 0x20), bytes]))
    // Drop the groups that mix in the padding before, and the partial group at the end.
    const start = shift === 0 ? 0 : 4
    const end = (shift + bytes.length) % 3 === 0 ? encoded.length : Math.floor((shift + bytes.length) / 3) * 4
    const needle = encoded.slice(start, end)
    needles.push(needle, needle.replace(/\+/g, "-").replace(/\//g, "_"))
  }
  return needles
}

/** The forms a leak could take. */
const formsOf = (secret: string): Array<string> => [
  secret,
  encodeURIComponent(secret),
  ...base64Needles(secret),
  // A leak cut short, or only its end shown.
  secret.slice(0, 20),
  secret.slice(-20)
]

const needles = Object.entries(secrets).flatMap(([name, secret]) => formsOf(secret).map((form) => ({ name, form })))

/** The secrets (and the form) found in `text`. */
const findSecrets = (text: string): Array<string> =>
  needles.filter(({ form }) => text.includes(form)).map(({ form, name }) => `${name} as ${JSON.stringify(form)}`)

// ---------------------------------------------------------------------------------------------
// The capture.

const show = (value: unknown): string =>
  typeof value === "string" ? value : inspect(value, { depth: 12, breakLength: Infinity, maxStringLength: Infinity, maxArrayLength: Infinity })

const showExit = (exit: Exit.Exit<unknown, unknown>): string =>
  Exit.isSuccess(exit) ? `success ${show(exit.value)}` : `failure ${Cause.pretty(exit.cause, { renderErrorCause: true })} ${show(exit.cause)}`

/** What one flow produced. */
class Capture {
  readonly logs: Array<string> = []
  readonly spans: Array<{ name: string; text: Array<string> }> = []
  readonly outcomes: Array<string> = []
  readonly output: Array<string> = []
  readonly servers: Array<{ server: FixtureServer; authHeader: string }> = []

  readonly logger = Logger.make(({ annotations, cause, date, fiberId, logLevel, message, spans }) => {
    this.logs.push([
      date.toISOString(),
      logLevel.label,
      show(fiberId),
      show(message),
      ...[...HashMap.entries(annotations)].map(([k, v]) => `${k}=${show(v)}`),
      ...List.toArray(spans).map((s) => `span=${s.label}`),
      Cause.isEmpty(cause) ? "" : `${Cause.pretty(cause, { renderErrorCause: true })} ${show(cause)}`
    ].join(" "))
  })

  readonly tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) => {
      const text: Array<string> = [name, kind, show(links.map((l) => l.attributes))]
      if (options?.attributes !== undefined) text.push(show(options.attributes))
      this.spans.push({ name, text })
      const attributes = new Map<string, unknown>()
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: `span-${this.spans.length}`,
        traceId: "trace",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end: (_, exit) => {
          text.push(`attributes ${show([...attributes])}`, `exit ${showExit(exit)}`)
        },
        attribute: (key, value) => {
          attributes.set(key, value)
          text.push(`${key}=${show(value)}`)
        },
        event: (eventName, _, eventAttributes) => void text.push(`event ${eventName} ${show(eventAttributes)}`),
        addLinks: (more) => void text.push(`links ${show(more.map((l) => l.attributes))}`)
      }
      return span
    },
    context: (f) => f()
  })

  /** Runs `effect` with everything captured: logs at all levels, spans, stdout and stderr, its exit. */
  run<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<Exit.Exit<A, E>, never, R> {
    // Anything written around Effect's logger: the streams and the console.
    const writes = Effect.acquireRelease(
      Effect.sync(() => {
        const streams = [process.stdout, process.stderr] as const
        const originals = streams.map((stream) => stream.write)
        streams.forEach((stream, i) => {
          stream.write = ((chunk: unknown, ...rest: Array<any>) => {
            this.output.push(String(chunk))
            return originals[i]!.call(stream, chunk as string, ...rest)
          }) as typeof stream.write
        })
        const methods = ["log", "info", "warn", "error", "debug", "trace"] as const
        const consoleOriginals = methods.map((m) => console[m])
        methods.forEach((m, i) => {
          console[m] = (...args: Array<unknown>) => {
            this.output.push(args.map(show).join(" "))
            consoleOriginals[i]!.apply(console, args)
          }
        })
        return () => {
          streams.forEach((stream, i) => (stream.write = originals[i]!))
          methods.forEach((m, i) => (console[m] = consoleOriginals[i]!))
        }
      }),
      (restore) => Effect.sync(restore)
    )
    return Effect.scoped(Effect.zipRight(
      writes,
      effect.pipe(
        Effect.withTracer(this.tracer),
        Logger.withMinimumLogLevel(LogLevel.All),
        Effect.provide(Logger.replace(Logger.defaultLogger, this.logger)),
        Effect.exit,
        Effect.tap((exit) => Effect.sync(() => this.outcomes.push(showExit(exit))))
      )
    ))
  }

  /** A result or error text the flow saw, for the scan. */
  saw(value: unknown): void {
    this.outcomes.push(show(value))
  }

  /** The fixture server's requests, without the header `authHeader` that must carry the key. */
  watch(server: FixtureServer, authHeader: string): FixtureServer {
    this.servers.push({ server, authHeader })
    return server
  }

  requests(): Array<string> {
    return this.servers.flatMap(({ authHeader, server }) =>
      server.received.map((r) => {
        const { [authHeader]: _, ...headers } = r.headers
        return `${r.method} ${r.url} ${show(headers)} ${JSON.stringify(r.body)}`
      })
    )
  }
}

const totals = { logs: 0, spans: 0, requests: 0, outcomes: 0, output: 0, found: 0 }

afterAll(() => {
  record({ suite: "secrets", measure: "log lines searched (all levels)", value: totals.logs })
  record({ suite: "secrets", measure: "spans searched", value: totals.spans })
  record({ suite: "secrets", measure: "model HTTP requests searched (auth header aside)", value: totals.requests })
  record({ suite: "secrets", measure: "results and error texts searched", value: totals.outcomes })
  record({ suite: "secrets", measure: "stdout/stderr/console writes searched", value: totals.output })
  record({ suite: "secrets", measure: "secrets found (raw, base64, URL-encoded, cut)", value: totals.found, expected: "0" })
})

/** Asserts that nothing captured holds a secret, and counts what was searched. */
const assertClean = (capture: Capture) => {
  const requests = capture.requests()
  const places: Array<readonly [string, ReadonlyArray<string>]> = [
    ["log", capture.logs],
    ["span", capture.spans.map((s) => s.text.join(" "))],
    ["request", requests],
    ["outcome", capture.outcomes],
    ["output", capture.output]
  ]
  const found = places.flatMap(([where, texts]) =>
    texts.flatMap((text) => findSecrets(text).map((secret) => `${secret} in a ${where}: ${text.slice(Math.max(0, text.indexOf(secret.split(" as ")[1]!.slice(1, 21)) - 300), text.indexOf(secret.split(" as ")[1]!.slice(1, 21)) + 100)}`)))
  totals.logs += capture.logs.length
  totals.spans += capture.spans.length
  totals.requests += requests.length
  totals.outcomes += capture.outcomes.length
  totals.output += capture.output.length
  totals.found += found.length
  assert.deepStrictEqual(found, [])
}

// ---------------------------------------------------------------------------------------------
// The flows.


const fastRetry = Timing.layer({ modelRetry: Schedule.spaced("10 millis").pipe(Schedule.intersect(Schedule.recurs(4))) })

interface Provider {
  readonly name: "anthropic" | "openai"
  readonly model: string
  readonly key: string
  readonly authHeader: string
  readonly sentKey: (headers: Record<string, string | Array<string> | undefined>) => string | undefined
  readonly baseUrl: (url: string) => Record<string, string>
  readonly fixtures: { readonly toolCalls: string; readonly text: string; readonly server: string; readonly auth: string }
}

const providers: ReadonlyArray<Provider> = [
  {
    name: "anthropic",
    model: "anthropic:claude-sonnet-4-5",
    key: secrets.anthropicKey,
    authHeader: "x-api-key",
    sentKey: (headers) => headers["x-api-key"] as string | undefined,
    baseUrl: (url) => ({ ANTHROPIC_BASE_URL: url }),
    fixtures: { toolCalls: "response_tool_use", text: "response_text", server: "error_api", auth: "error_authentication" }
  },
  {
    name: "openai",
    model: "openai:gpt-4.1",
    key: secrets.openaiKey,
    authHeader: "authorization",
    sentKey: (headers) => (headers.authorization as string | undefined)?.replace(/^Bearer /, ""),
    baseUrl: (url) => ({ OPENAI_BASE_URL: `${url}/v1` }),
    fixtures: { toolCalls: "response_tool_calls", text: "response_text", server: "error_server", auth: "error_authentication" }
  }
]

const modelLayer = (p: Provider, env: Record<string, string>) =>
  Model.layer(p.model).pipe(Layer.provide(settings(env)), Layer.merge(fastRetry))

describe("secrets never reach a log, a span, an error text, a result or a model request", () => {
  it("the scanner finds a secret in each form it looks for", () => {
    const secret = secrets.openaiKey
    for (const text of [
      `key=${secret}`,
      `Basic ${Buffer.from(`user:${secret}`).toString("base64")}`,
      `x${Buffer.from(`ab${secret}cd`).toString("base64url")}`,
      `https://example.com/?k=${encodeURIComponent(secret)}`,
      `${secret.slice(0, 24)}...`,
      `...${secret.slice(-24)}`
    ]) assert.isAbove(findSecrets(text).length, 0, text)
    for (const prefix of ["", "a", "ab", "abc"]) {
      for (const encoding of ["base64", "base64url"] as const) {
        const text = Buffer.from(`${prefix}${secret}!`).toString(encoding)
        assert.isAbove(findSecrets(text).length, 0, `${encoding} after ${prefix.length} bytes`)
      }
    }
    assert.deepStrictEqual(findSecrets("sk-proj-*****zZ <redacted>"), [])
  })

  for (const p of providers) {
    it.live(`${p.name}: a run with a 500 retried, a 401, a garbage 200, and a missing key`, () =>
      Effect.gen(function*() {
        const capture = new Capture()
        const reply = (status: number, name: string): Reply => ({ status, body: fixture(`${p.name}/${name}.json`) })
        const server = capture.watch(
          yield* fixtureServer([
            reply(500, p.fixtures.server),
            reply(200, p.fixtures.toolCalls),
            reply(200, p.fixtures.text),
            reply(401, p.fixtures.auth),
            { status: 200, text: "<html>not json</html>" }
          ]),
          p.authHeader
        )
        const env = environment(p.baseUrl(server.url))
        const ok = yield* capture.run(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(p, env))))
        assert.isTrue(Exit.isSuccess(ok))
        const auth = yield* capture.run(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(p, env))))
        const garbage = yield* capture.run(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(p, env))))
        // The key missing: only the other secrets are set (OpenAI's key is optional with a base URL of one's own).
        const { [p.name === "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY"]: _, ...withoutKey } = environment(
          p.name === "anthropic" ? p.baseUrl(server.url) : {}
        )
        const missing = yield* capture.run(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(p, withoutKey))))
        const tags = [auth, garbage, missing].map((exit) =>
          Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause))?._tag : "success"
        )
        assert.deepStrictEqual(tags, ["ModelAuthError", "ModelError", "MissingApiKey"])
        for (const exit of [auth, garbage, missing]) {
          if (Exit.isFailure(exit)) {
            const error = Option.getOrThrow(Cause.failureOption(exit.cause))
            capture.saw([error.message, String(error), JSON.stringify(error)])
          }
        }
        // The key went out, in the one header that must carry it, and only there.
        assert.strictEqual(server.received.length, 5)
        for (const request of server.received) assert.strictEqual(p.sentKey(request.headers), p.key)
        // The capture saw what it should: the retry's warning, the HTTP client's spans.
        assert.isTrue(capture.logs.some((line) => line.includes("retrying")))
        assert.isTrue(capture.spans.some((s) => s.name.startsWith("http.client")))
        assertClean(capture)
      }).pipe(Effect.scoped))
  }

  it.live("the platform on a real WebSocket: a served task, then a token bound to another agent, then an unknown one", () =>
    Effect.gen(function*() {
      const capture = new Capture()
      const server = capture.watch(
        yield* fixtureServer([
          { status: 200, body: fixture("anthropic/response_tool_use.json") },
          { status: 200, body: fixture("anthropic/response_text.json") }
        ]),
        "x-api-key"
      )
      const flow = Effect.gen(function*() {
        // The platform's tasks run on the Anthropic provider, its key in the platform's environment.
        const context = yield* Layer.build(
          PlatformServer.layerWebSocket({ port: 0 }).pipe(
            Layer.provide(PlatformServer.layerHandlers({
              tokens: new Map([[secrets.platformToken, "agent-1"], [secrets.otherToken, "agent-2"]])
            })),
            Layer.provide(Model.layer("anthropic:claude-sonnet-4-5")),
            Layer.provide(settings(environment({ ANTHROPIC_BASE_URL: server.url })))
          )
        )
        const url = yield* Effect.provide(PlatformServer.url, context)
        const client = (token: string) =>
          PlatformClient.layer.pipe(Layer.provide(settings(environment({ AGENT_ID: "agent-1", PLATFORM_URL: url, PLATFORM_TOKEN: token }))))
        const toolkit = yield* Toolkit.make(lookupOrder)
        const output = yield* Effect.scoped(Effect.flatMap(Serve.makeConfig(toolkit), (served) => served.runTask(prompt))).pipe(
          Effect.provide(client(secrets.platformToken))
        )
        const wrong = yield* Effect.flip(Effect.scoped(Serve.makeConfig(toolkit)).pipe(Effect.provide(client(secrets.otherToken))))
        const unknown = yield* Effect.flip(Effect.scoped(Serve.makeConfig(toolkit)).pipe(Effect.provide(client("ptok-unknown"))))
        return { output, wrong, unknown }
      }).pipe(Effect.scoped)
      const exit = yield* capture.run(flow)
      if (Exit.isFailure(exit)) return assert.fail(Cause.pretty(exit.cause))
      const { output, unknown, wrong } = exit.value
      assert.strictEqual(output, "Order ord-4821 has shipped; there is no order ord-0000.")
      assert.deepStrictEqual([wrong._tag, wrong.message], ["Unauthorized", "the token is not valid for agent agent-1"])
      // What is wrong, and which settings make it right, on each side.
      assert.strictEqual(unknown._tag, "Unauthorized")
      assert.strictEqual(
        unknown.message,
        "missing or unknown platform token: the serving side sends its PLATFORM_TOKEN, which must be one of the " +
          "platform's tokens, read from PLATFORM_TOKENS (or platform --tokens-file) as token:agent pairs, comma-separated"
      )
      capture.saw([String(wrong), JSON.stringify(wrong), String(unknown), JSON.stringify(unknown)])
      assert.strictEqual(server.received.length, 2)
      assert.isTrue(capture.spans.length > 0)
      assertClean(capture)
    }).pipe(Effect.scoped))

  it.live("MCP over HTTP: a tool that asks a model (a 401, then an answer) gives its error text and result", () =>
    Effect.gen(function*() {
      const capture = new Capture()
      const server = capture.watch(
        yield* fixtureServer([
          { status: 401, body: fixture("openai/error_authentication.json") },
          { status: 200, body: fixture("openai/response_text.json") }
        ]),
        "authorization"
      )
      const ask = Tool.make("ask_support", {
        description: "Ask the support agent.",
        input: { question: Schema.String },
        output: Schema.String,
        timeout: "30 seconds"
      }, ({ question }) => Effect.map(Agent.run(Agent.make({ tools: [] }), question), (result) => result.output))
      const flow = Effect.gen(function*() {
        const services = Model.layer("openai:gpt-4.1").pipe(Layer.provide(settings(environment({ OPENAI_BASE_URL: `${server.url}/v1` }))))
        const { client } = yield* mcpClient(yield* Toolkit.make(ask), Layer.orDie(services))
        const failed = yield* Effect.promise(() => client.callTool({ name: "ask_support", arguments: { question: "Where is ord-4821?" } }))
        const answered = yield* Effect.promise(() => client.callTool({ name: "ask_support", arguments: { question: "Where is ord-4821?" } }))
        return { failed, answered }
      }).pipe(Effect.scoped)
      const exit = yield* capture.run(flow)
      if (Exit.isFailure(exit)) return assert.fail(Cause.pretty(exit.cause))
      const { answered, failed } = exit.value
      capture.saw([failed, answered])
      assert.strictEqual(failed.isError, true)
      assert.match((failed.content as Array<{ text: string }>)[0]!.text, /^ModelAuthError: openai: HTTP 401: /)
      // A string output goes out wrapped as { result } (design: MCP).
      assert.strictEqual((answered.content as Array<{ text: string }>)[0]!.text, "{\"result\":\"Order ord-4821 has shipped; there is no order ord-0000.\"}")
      assert.strictEqual(server.received.length, 2)
      assertClean(capture)
    }).pipe(Effect.scoped))
})
