/**
 * What a provider's server can do to a run, on real HTTP servers on 127.0.0.1 (docs/limits.md, "Model
 * requests"): trickle an answer forever (comments, pings, a byte at a time), keep the connection open after
 * the final event, ask for a wait of years, send a line or an answer too large, or counts that are no counts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, Redacted, Schedule } from "effect"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Agent, LanguageModel, Timing } from "../../src/index.js"
import { Anthropic, OpenAi } from "../../src/exports/providers.js"
import type { LimitOptions } from "../../src/providers/Http.js"
import { sseFixture } from "../support/fixtureServer.js"

/** A server on 127.0.0.1 whose every request `handle` answers; the requests it had. Closed with the scope. */
const server = (handle: (req: IncomingMessage, res: ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly requests: () => number; readonly close: () => void }>((resume) => {
      let requests = 0
      const timers = new Set<NodeJS.Timeout>()
      const s = createServer((req, res) => {
        requests++
        req.resume()
        req.on("end", () => handle(req, res))
      })
      s.listen(0, "127.0.0.1", () =>
        resume(Effect.succeed({
          url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
          requests: () => requests,
          close: () => {
            timers.forEach(clearInterval)
            s.closeAllConnections()
            s.close()
          }
        })))
    }),
    (s) => Effect.sync(() => s.close())
  )

/** Writes `piece` every `millis` until the connection closes. */
const trickle = (res: ServerResponse, piece: string, millis: number) => {
  const timer = setInterval(() => res.write(piece), millis)
  res.on("close", () => clearInterval(timer))
}

const sseHead = (res: ServerResponse) => res.writeHead(200, { "content-type": "text/event-stream" })

type Provider = "openai" | "anthropic"

/** The provider's model on `url`, with `options` (limits). */
const modelAt = (provider: Provider, url: string, options: LimitOptions = {}) =>
  (provider === "openai"
    ? OpenAi.layer({ model: "gpt-4.1", baseUrl: `${url}/v1`, apiKey: Redacted.make("sk-test"), ...options })
    : Anthropic.layer({ model: "claude-sonnet-4-5", baseUrl: url, apiKey: Redacted.make("sk-ant-test"), ...options })).pipe(
      Layer.provide(NodeHttpClient.layer)
    )

/** One request's outcome: the turn, or its failure. */
const ask = (model: Layer.Layer<LanguageModel.LanguageModel>) =>
  Effect.flatMap(LanguageModel.LanguageModel, (m) => m.generate({ messages: [{ _tag: "UserMessage", text: "hi" }], tools: [] })).pipe(
    Effect.either,
    Effect.provide(model)
  )

const seconds = (started: number) => (performance.now() - started) / 1000

for (const provider of ["openai", "anthropic"] as const) {
  describe(`${provider}: an answer that never ends`, () => {
    const keepAlive = provider === "openai" ? ": keep-alive\n\n" : "event: ping\ndata: {\"type\": \"ping\"}\n\n"
    it.scopedLive(`${provider === "openai" ? "SSE comments" : "pings"} trickled: the whole answer is bounded by timeout, and the error says so`, () =>
      Effect.gen(function*() {
        const s = yield* server((_, res) => (sseHead(res), trickle(res, keepAlive, 100)))
        const started = performance.now()
        const out = yield* ask(modelAt(provider, s.url, { timeout: "1 second", idleTimeout: "500 millis" }))
        assert.strictEqual(out._tag, "Left")
        assert.include(out._tag === "Left" ? out.left.message : "", `${provider}: the response did not end within 1 s (timeout)`)
        assert.isBelow(seconds(started), 5)
      }))

    it.scopedLive("one byte at a time: the same bound", () =>
      Effect.gen(function*() {
        const text = sseFixture(`${provider}/stream_text.sse`)
        const s = yield* server((_, res) => {
          sseHead(res)
          let at = 0
          const timer = setInterval(() => at < text.length && res.write(text[at++]!), 50)
          res.on("close", () => clearInterval(timer))
        })
        const out = yield* ask(modelAt(provider, s.url, { timeout: "1 second" }))
        assert.include(out._tag === "Left" ? out.left.message : "", "did not end within 1 s (timeout)")
      }))

    it.scopedLive("silence after the headers: the idle bound fires and says which it is", () =>
      Effect.gen(function*() {
        const s = yield* server((_, res) => (sseHead(res), res.flushHeaders()))
        const out = yield* ask(modelAt(provider, s.url, { timeout: "10 seconds", idleTimeout: "300 millis" }))
        assert.include(out._tag === "Left" ? out.left.message : "", "the stream sent nothing for 300 ms (idleTimeout)")
      }))

    it.scopedLive(`the connection held open after ${provider === "openai" ? "[DONE]" : "message_stop"}: the answer is taken at once, asked once`, () =>
      Effect.gen(function*() {
        const s = yield* server((_, res) => (sseHead(res), res.write(sseFixture(`${provider}/stream_text.sse`))))
        const started = performance.now()
        const out = yield* ask(modelAt(provider, s.url, { timeout: "20 seconds", idleTimeout: "10 seconds" }))
        assert.strictEqual(out._tag, "Right")
        assert.strictEqual(out._tag === "Right" ? out.right.text : "", "Order ord-4821 has shipped; there is no order ord-0000.")
        assert.isBelow(seconds(started), 5)
        assert.strictEqual(s.requests(), 1)
      }))
  })

  describe(`${provider}: sizes and numbers`, () => {
    it.scopedLive("a line past maxLineBytes (no newline in sight) is refused, naming the limit, without reading on", () =>
      Effect.gen(function*() {
        const s = yield* server((_, res) => {
          sseHead(res)
          res.write(`data: {"x":"${"a".repeat(256 * 1024)}`)
          trickle(res, "a".repeat(64 * 1024), 20)
        })
        const out = yield* ask(modelAt(provider, s.url, { maxLineBytes: 64 * 1024 }))
        assert.include(out._tag === "Left" ? out.left.message : "", `${provider}: a line of the response passed 65536 bytes (maxLineBytes); refused unread`)
        assert.isFalse(out._tag === "Left" && out.left._tag === "ModelError" && out.left.transient, "not retried")
      }))

    it.scopedLive("an answer past maxResponseBytes is refused, naming the limit", () =>
      Effect.gen(function*() {
        const line = provider === "openai"
          ? `data: {"choices":[{"index":0,"delta":{"content":"${"b".repeat(1000)}"}}]}\n\n`
          : `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"${"b".repeat(1000)}"}}\n\n`
        const s = yield* server((_, res) => (sseHead(res), trickle(res, line.repeat(32), 5)))
        const out = yield* ask(modelAt(provider, s.url, { maxResponseBytes: 256 * 1024 }))
        assert.include(out._tag === "Left" ? out.left.message : "", `${provider}: the response passed 262144 bytes (maxResponseBytes)`)
      }))

    it.scopedLive("with the defaults, a 9 MB delta is refused (maxLineBytes, 8 MiB)", () =>
      Effect.gen(function*() {
        const s = yield* server((_, res) => {
          sseHead(res)
          res.end(`data: {"x":"${"c".repeat(9 * 1024 * 1024)}"}\n\n`)
        })
        const out = yield* ask(modelAt(provider, s.url))
        assert.include(out._tag === "Left" ? out.left.message : "", "passed 8388608 bytes (maxLineBytes)")
      }))
  })
}

describe("usage that is no count", () => {
  it.scopedLive("negative or 1e999 counts are counted as unknown (0), warned of once", () =>
    Effect.gen(function*() {
      const body = (input: string) =>
        `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop",` +
        `"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":${input},"completion_tokens":1e999}}`
      const bodies = [body("-5"), body("2.5")]
      const s = yield* server((_, res) => res.writeHead(200, { "content-type": "application/json" }).end(bodies.shift()))
      const logs: Array<string> = []
      const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logs.push(String(message))))
      const model = Layer.merge(modelAt("openai", s.url), logger)
      const first = yield* ask(model)
      if (first._tag === "Left") throw first.left
      const second = yield* ask(model)
      assert.deepStrictEqual(first._tag === "Right" ? first.right.usage : undefined, { inputTokens: 0, outputTokens: 0 })
      assert.deepStrictEqual(second._tag === "Right" ? second.right.usage : undefined, { inputTokens: 0, outputTokens: 0 })
      const warned = logs.filter((l) => l.includes("usage counts that are not whole numbers"))
      assert.strictEqual(warned.length, 1)
      assert.include(warned[0]!, "inputTokens: -5, outputTokens: Infinity")
    }))
})

describe("a retry-after of years", () => {
  const cases = [["1000000000 seconds", "1000000000"], ["a date in 2100", "Fri, 01 Jan 2100 00:00:00 GMT"]] as const
  for (const provider of ["openai", "anthropic"] as const) for (const [name, value] of cases) {
    it.scopedLive(`${provider}: retry-after: ${name} fails the turn at once with the status and the wait, over maxRetryAfter`, () =>
      Effect.gen(function*() {
        const s = yield* server((_, res) =>
          res.writeHead(429, { "content-type": "application/json", "retry-after": value })
            .end("{\"error\":{\"message\":\"Rate limit reached\"}}")
        )
        const agent = Agent.make({ tools: [] })
        const error = yield* Effect.flip(Agent.run(agent, "hi")).pipe(
          Effect.provide(Layer.merge(modelAt(provider, s.url), Timing.layer({ modelRetry: Schedule.recurs(4) }))),
          Effect.timeout("5 seconds")
        )
        assert.strictEqual(error._tag, "ModelError")
        assert.include(error.message, `${provider}: HTTP 429: Rate limit reached (retry-after asked for `)
        assert.include(error.message, "over maxRetryAfter's 1 min: not retried)")
        assert.strictEqual(s.requests(), 1)
      }))
  }

  it.scopedLive("a wait within maxRetryAfter is waited, then the request asked again", () =>
    Effect.gen(function*() {
      let n = 0
      const s = yield* server((_, res) =>
        n++ === 0
          ? res.writeHead(429, { "content-type": "application/json", "retry-after": "0.2" }).end("{\"error\":{\"message\":\"slow down\"}}")
          : res.writeHead(200, { "content-type": "text/event-stream" }).end(sseFixture("openai/stream_text.sse"))
      )
      const result = yield* Agent.run(Agent.make({ tools: [] }), "hi").pipe(
        Effect.provide(
          Layer.merge(modelAt("openai", s.url), Timing.layer({ modelRetry: Schedule.recurs(4), maxRetryAfter: Duration.seconds(1) }))
        )
      )
      assert.strictEqual(result.output, "Order ord-4821 has shipped; there is no order ord-0000.")
      assert.strictEqual(s.requests(), 2)
    }))
})
