/**
 * Google Gemini, Amazon Bedrock and OpenRouter through the `@effect/ai` adapter
 * (src/providers/EffectAi.ts), each against a real HTTP server on 127.0.0.1 that answers in the
 * provider's documented wire format (test/fixtures/<provider>/): a run with two tool calls and a final
 * text; the tools sent in the provider's strict form; a 429 retried after its `retry-after`; an auth
 * failure named; Bedrock's request signed (AWS Signature Version 4) with the documented headers.
 */
import { assert, describe, it } from "@effect/vitest"
import { EventStreamCodec } from "@smithy/eventstream-codec"
import { fromUtf8, toUtf8 } from "@smithy/util-utf8"
import { Chunk, ConfigProvider, Effect, Either, Fiber, Layer, Schedule, Schema, Stream, TestClock } from "effect"
import { createHash, createHmac } from "node:crypto"
import { Agent, LanguageModel, Timing, Tool } from "../../src/index.js"
import { Model } from "../../src/exports/providers.js"
import * as StrictSchema from "../../src/providers/StrictSchema.js"
import { fixture, fixtureServer, type Received, type Reply, sseFixture } from "../support/fixtureServer.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const notes: Array<unknown> = []

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: {
    order_id: Schema.String,
    note: Schema.optional(Schema.Struct({ text: Schema.String, flag: Schema.optional(Schema.Boolean) }))
  },
  output: Schema.Struct({ id: Schema.String, status: Schema.String }),
  timeout: "10 seconds"
}, ({ note, order_id }) => {
  notes.push(note)
  return order_id === "ord-4821"
    ? Effect.succeed({ id: order_id, status: "shipped" })
    : Effect.fail(new NotFound({ message: `no order with id=${order_id}` }))
})

const agent = Agent.make({ name: "support", tools: [lookupOrder], instructions: "You are a support agent." })
const prompt = "Check orders ord-4821 and ord-0000"
const answer = "Order ord-4821 has shipped; there is no order ord-0000."

const fastRetry = Timing.layer({ modelRetry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(4))) })
const modelLayer = (model: string, env: Record<string, string>) =>
  Model.layer(model).pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))),
    Layer.merge(fastRetry)
  )

interface Case {
  readonly provider: "google" | "bedrock" | "openrouter"
  readonly model: string
  readonly env: (url: string) => Record<string, string>
  readonly path: string
  readonly calls: string
  readonly text: string
  readonly rateLimit: Reply
  readonly auth: Reply
  /** The tools as the request carried them: `{ name, parameters }`. */
  readonly toolsOf: (body: any) => Array<{ readonly name: string; readonly parameters: unknown }>
  /** The tool results the second request carried back: `[call id or name, text]`. */
  readonly resultsOf: (body: any) => Array<readonly [string, string]>
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number }
  /** The second call's note, as the tool got it. */
  readonly notes: ReadonlyArray<unknown>
}

const cases: ReadonlyArray<Case> = [
  {
    provider: "google",
    model: "google:gemini-2.5-flash",
    env: (url) => ({ GEMINI_API_KEY: "AIza-test-key", GEMINI_BASE_URL: url }),
    path: "/v1beta/models/gemini-2.5-flash:generateContent",
    calls: "google/response_function_calls.json",
    text: "google/response_text.json",
    rateLimit: { status: 429, body: fixture("google/error_rate_limit.json"), headers: { "retry-after": "2" } },
    auth: { status: 401, body: fixture("google/error_authentication.json") },
    toolsOf: (body) =>
      // One tool object or a list of them (the client sends the first).
      [body.tools].flat().flatMap((tool: any) =>
        tool.functionDeclarations.map((f: any) => ({ name: f.name, parameters: f.parameters }))
      ),
    resultsOf: (body) =>
      body.contents.flatMap((content: any) => content.parts)
        .filter((part: any) => part.functionResponse !== undefined)
        .map((part: any) => [part.functionResponse.name, JSON.stringify(part.functionResponse.response)] as const),
    usage: { inputTokens: 82 + 160, outputTokens: 31 + 17 },
    notes: [undefined, undefined]
  },
  {
    provider: "bedrock",
    model: "bedrock:anthropic.claude-sonnet-4-5-20250929-v1:0",
    env: (url) => ({
      AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
      AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
      AWS_SESSION_TOKEN: "session-token-example",
      AWS_REGION: "us-west-2",
      AWS_ENDPOINT_URL_BEDROCK_RUNTIME: url
    }),
    path: "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/converse",
    calls: "bedrock/response_tool_use.json",
    text: "bedrock/response_text.json",
    rateLimit: {
      status: 429,
      body: fixture("bedrock/error_throttling.json"),
      headers: { "retry-after": "2", "x-amzn-errortype": "ThrottlingException" }
    },
    auth: {
      status: 403,
      body: fixture("bedrock/error_authentication.json"),
      headers: { "x-amzn-errortype": "UnrecognizedClientException" }
    },
    toolsOf: (body) => body.toolConfig.tools.map((tool: any) => ({ name: tool.toolSpec.name, parameters: tool.toolSpec.inputSchema.json })),
    resultsOf: (body) =>
      body.messages.flatMap((message: any) => message.content)
        .filter((block: any) => block.toolResult !== undefined)
        .map((block: any) => [block.toolResult.toolUseId, JSON.stringify(block.toolResult.content)] as const),
    usage: { inputTokens: 82 + 190, outputTokens: 51 + 17 },
    notes: [undefined, undefined]
  },
  {
    provider: "openrouter",
    model: "openrouter:openai/gpt-4.1",
    env: (url) => ({ OPENROUTER_API_KEY: "sk-or-v1-test", OPENROUTER_BASE_URL: url }),
    path: "/chat/completions",
    calls: "openrouter/response_tool_calls.json",
    text: "openrouter/response_text.json",
    rateLimit: { status: 429, body: fixture("openrouter/error_rate_limit.json"), headers: { "retry-after": "2" } },
    auth: { status: 401, body: fixture("openrouter/error_authentication.json") },
    toolsOf: (body) => body.tools.map((tool: any) => ({ name: tool.function.name, parameters: tool.function.parameters })),
    resultsOf: (body) =>
      body.messages.filter((message: any) => message.role === "tool")
        .map((message: any) => [message.tool_call_id, message.content] as const),
    usage: { inputTokens: 82 + 160, outputTokens: 51 + 17 },
    // The model's nulls for the fields it left out are taken out again: the tool's Schema has them optional.
    notes: [undefined, { text: "urgent" }]
  }
]

const live = (millis: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))

for (const c of cases) {
  describe(`${c.provider} through @effect/ai`, () => {
    it.scoped("a run: two tool calls (one failing) then a final text; tools in the provider's strict form", () =>
      Effect.gen(function*() {
        notes.length = 0
        const server = yield* fixtureServer([
          { status: 200, body: fixture(c.calls) },
          { status: 200, body: fixture(c.text) }
        ])
        const result = yield* Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.model, c.env(server.url))))
        assert.strictEqual(result.output, answer)
        assert.strictEqual(result.steps, 2)
        assert.deepStrictEqual(result.toolCalls.map((call) => [call.name, call.result.value, call.result.error]), [
          ["lookup_order", { id: "ord-4821", status: "shipped" }, undefined],
          ["lookup_order", undefined, "NotFound: no order with id=ord-0000"]
        ])
        assert.deepStrictEqual(notes, c.notes)
        assert.deepStrictEqual(result.usage, c.usage)

        assert.strictEqual(server.received.length, 2)
        const form = StrictSchema.strictForm(c.provider, Tool.jsonSchema(lookupOrder))
        assert.isTrue(Either.isRight(form))
        for (const request of server.received) {
          assert.strictEqual(request.method, "POST")
          assert.strictEqual(request.url, c.path)
          const [sent] = c.toolsOf(request.body)
          assert.strictEqual(sent?.name, "lookup_order")
          if (c.provider === "google") {
            // Gemini's own spelling (upper-case types) of our form: no additionalProperties, no $ref.
            assert.notMatch(JSON.stringify(sent!.parameters), /additionalProperties|\$ref|"const"/)
            assert.deepStrictEqual(Object.keys((sent!.parameters as any).properties), ["order_id", "note"])
          } else {
            assert.deepStrictEqual(sent!.parameters, Either.isRight(form) ? form.right.parameters : undefined)
          }
        }
        // The results went back, each with its call, the failure as its text.
        const results = c.resultsOf(server.received[1]!.body)
        assert.strictEqual(results.length, 2)
        assert.include(results[0]![1], "shipped")
        assert.include(results[1]![1], "no order with id=ord-0000")
      }))

    it.scoped("a 429 waits for its retry-after, then the run succeeds", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([c.rateLimit, { status: 200, body: fixture(c.text) }])
        const fiber = yield* Effect.fork(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.model, c.env(server.url)))))
        yield* Effect.promise(() => server.waitFor(1))
        yield* TestClock.adjust("1999 millis")
        yield* live(50)
        assert.strictEqual(server.received.length, 1)
        yield* TestClock.adjust("1 milli")
        yield* Effect.promise(() => server.waitFor(2))
        const result = yield* Fiber.join(fiber)
        assert.strictEqual(result.output, answer)
      }))

    it.scoped("bad credentials fail the run with the typed auth error, the provider's words in it", () =>
      Effect.gen(function*() {
        const server = yield* fixtureServer([c.auth])
        const error = yield* Effect.flip(Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(c.model, c.env(server.url)))))
        assert.strictEqual(error._tag, "ModelAuthError")
        // OpenRouter's client keeps the status of a failure, not its body: the provider's words are not there to give.
        const said = c.provider === "openrouter" ? "" : `: ${(c.auth.body as any).error?.message ?? (c.auth.body as any).message}`
        assert.strictEqual(error.message, `${c.provider}: HTTP ${c.auth.status}${said}`)
        assert.strictEqual(server.received.length, 1)
      }))
  })
}

describe("bedrock's request signature", () => {
  /** AWS Signature Version 4, computed here from the request as the server got it (the documented algorithm). */
  const signature = (request: Received, secret: string, date: string, region: string, signed: ReadonlyArray<string>) => {
    const url = new URL(request.url, "http://x")
    // Services other than S3 sign each path segment encoded once more.
    const path = url.pathname.split("/").map((segment) => encodeURIComponent(segment)).join("/")
    const headers = signed.map((name) => `${name}:${String(request.headers[name]).trim()}\n`).join("")
    const hash = (text: string) => createHash("sha256").update(text, "utf8").digest("hex")
    const canonical = ["POST", path, url.search.slice(1), headers, signed.join(";"), hash(request.raw)].join("\n")
    const scope = `${date.slice(0, 8)}/${region}/bedrock/aws4_request`
    const toSign = ["AWS4-HMAC-SHA256", date, scope, hash(canonical)].join("\n")
    const hmac = (key: string | Buffer, text: string) => createHmac("sha256", key).update(text, "utf8").digest()
    let key = hmac(`AWS4${secret}`, date.slice(0, 8))
    for (const part of [region, "bedrock", "aws4_request"]) key = hmac(key, part)
    return createHmac("sha256", key).update(toSign, "utf8").digest("hex")
  }

  it.scoped("Authorization (AWS4-HMAC-SHA256, its credential scope, signed headers, a signature that checks), X-Amz-Date, X-Amz-Security-Token", () =>
    Effect.gen(function*() {
      const bedrock = cases.find((c) => c.provider === "bedrock")!
      const server = yield* fixtureServer([{ status: 200, body: fixture(bedrock.text) }])
      const env = bedrock.env(server.url)
      yield* Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(bedrock.model, env)))
      const request = server.received[0]!
      const date = String(request.headers["x-amz-date"])
      assert.match(date, /^\d{8}T\d{6}Z$/)
      assert.strictEqual(request.headers["x-amz-security-token"], env.AWS_SESSION_TOKEN)
      const authorization = String(request.headers.authorization)
      const match = /^AWS4-HMAC-SHA256 Credential=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(authorization)
      assert.isNotNull(match, authorization)
      assert.strictEqual(match![1], `AKIDEXAMPLE/${date.slice(0, 8)}/us-west-2/bedrock/aws4_request`)
      const signed = match![2]!.split(";")
      for (const name of ["host", "x-amz-date", "x-amz-security-token"]) assert.include(signed, name)
      assert.strictEqual(match![3], signature(request, env.AWS_SECRET_ACCESS_KEY!, date, "us-west-2", signed))
      // The secret itself never goes out.
      assert.notInclude(JSON.stringify(request.headers), env.AWS_SECRET_ACCESS_KEY!)
    }))

  it.effect("a missing credential fails before any request, naming the variable", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.run(agent, prompt).pipe(Effect.provide(modelLayer("bedrock:some-model", { AWS_ACCESS_KEY_ID: "AKIDEXAMPLE" })))
      )
      assert.strictEqual(error._tag, "MissingApiKey")
      assert.include(error.message, "AWS_SECRET_ACCESS_KEY")
    }))
})

/** Bedrock's recorded stream events in the AWS event stream framing its `ConverseStream` answers with. */
const eventStream = (path: string): Reply => {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  const events = fixture(path) as Array<[string, unknown]>
  return {
    status: 200,
    headers: { "content-type": "application/vnd.amazon.eventstream" },
    frames: events.map(([type, payload]) =>
      codec.encode({
        headers: {
          ":event-type": { type: "string", value: type },
          ":content-type": { type: "string", value: "application/json" },
          ":message-type": { type: "string", value: "event" }
        },
        body: fromUtf8(JSON.stringify(payload))
      })
    )
  }
}

const streamed: Record<Case["provider"], { readonly path: string; readonly calls: Reply; readonly text: Reply }> = {
  google: {
    path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    calls: { status: 200, sse: sseFixture("google/stream_function_calls.sse") },
    text: { status: 200, sse: sseFixture("google/stream_text.sse") }
  },
  bedrock: {
    path: "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/converse-stream",
    calls: eventStream("bedrock/stream_tool_use.json"),
    text: eventStream("bedrock/stream_text.json")
  },
  openrouter: {
    path: "/chat/completions",
    calls: { status: 200, sse: sseFixture("openrouter/stream_tool_calls.sse") },
    text: { status: 200, sse: sseFixture("openrouter/stream_text.sse") }
  }
}

for (const c of cases.filter((c) => c.provider !== "bedrock")) {
  it.scoped(`${c.provider} streamed through @effect/ai: the text in deltas, the calls, the answer`, () =>
    Effect.gen(function*() {
      notes.length = 0
      const { calls, path, text } = streamed[c.provider]
      const server = yield* fixtureServer([calls, text])
      const events = Chunk.toReadonlyArray(
        yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(Effect.provide(modelLayer(c.model, c.env(server.url))))
      )
      const done = events[events.length - 1]!
      assert.strictEqual(done._tag, "Done")
      if (done._tag !== "Done") return
      assert.strictEqual(done.result.output, answer)
      assert.deepStrictEqual(done.result.toolCalls.map((call) => call.result.error ?? "ok"), ["ok", "NotFound: no order with id=ord-0000"])
      assert.deepStrictEqual(notes, c.notes)
      assert.deepStrictEqual(done.result.usage, c.usage)
      // The last turn's text came in the deltas the server sent, in order.
      const deltas = events.filter((e) => e._tag === "TextDelta").map((e) => e._tag === "TextDelta" ? e.text : "")
      assert.deepStrictEqual(deltas.slice(-3), ["Order ord-4821 ", "has shipped; there is ", "no order ord-0000."])
      assert.deepStrictEqual(server.received.map((r) => r.url), [path, path])
    }))
}

describe("bedrock streamed", () => {
  const bedrock = cases.find((c) => c.provider === "bedrock")!

  it.scoped("ConverseStream through the adapter's stream: the text in deltas and each call as they come; no usage (Effect's client ends the turn before Bedrock's metadata event)", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([streamed.bedrock.calls])
      const parts = yield* Effect.flatMap(LanguageModel.LanguageModel, (model) =>
        Stream.runCollect(model.stream({ messages: [{ _tag: "UserMessage", text: prompt }], tools: [Tool.jsonSchema(lookupOrder)] }))
      ).pipe(Effect.provide(modelLayer(bedrock.model, bedrock.env(server.url))))
      assert.deepStrictEqual(Chunk.toReadonlyArray(parts).map((part) => {
        switch (part._tag) {
          case "TextDelta":
            return `text ${part.text}`
          case "ToolCall":
            return `call ${part.call.id} ${part.call.arguments}`
          case "Usage":
            return `usage ${part.usage.inputTokens}/${part.usage.outputTokens}`
          case "Finish":
            return `finish ${part.finishReason}`
          default:
            return part._tag
        }
      }), [
        "text I'll look up ",
        "text both orders.",
        "call tooluse_kZJMlvQmRJ6eAyJE5GIl7Q {\"order_id\":\"ord-4821\"}",
        "call tooluse_8Nf3xGqjT1mPzA0bWc4YbQ {\"order_id\":\"ord-0000\"}",
        "usage 0/0",
        "finish tool_calls"
      ])
      assert.deepStrictEqual(server.received.map((r) => r.url), [streamed.bedrock.path])
    }))

  it.scoped("a watched run asks Converse for whole answers: the usage is counted, the answer's parts told after it", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([{ status: 200, body: fixture(bedrock.calls) }, { status: 200, body: fixture(bedrock.text) }])
      const events = Chunk.toReadonlyArray(
        yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(Effect.provide(modelLayer(bedrock.model, bedrock.env(server.url))))
      )
      const done = events[events.length - 1]!
      assert.strictEqual(done._tag === "Done" && done.result.output, answer)
      assert.deepStrictEqual(done._tag === "Done" && done.result.usage, bedrock.usage)
      assert.include(events.map((e) => e._tag), "TextDelta")
      assert.deepStrictEqual(server.received.map((r) => r.url), [bedrock.path, bedrock.path])
    }))
})

describe("a tool the provider's strict mode has no form for", () => {
  const tag = Tool.make("tag", {
    description: "Tags an order.",
    input: { labels: Schema.Record({ key: Schema.String, value: Schema.String }) },
    timeout: "5 seconds"
  }, () => "tagged")
  const tagger = Agent.make({ name: "tagger", tools: [tag] })

  it.scoped("google (no other form): the run fails before any request, naming tool, field and provider", () =>
    Effect.gen(function*() {
      const google = cases.find((c) => c.provider === "google")!
      const server = yield* fixtureServer([{ status: 200, body: fixture(google.text) }])
      const error = yield* Effect.flip(Agent.run(tagger, prompt).pipe(Effect.provide(modelLayer(google.model, google.env(server.url)))))
      assert.strictEqual(error._tag, "ModelRequestRejected")
      assert.match(error.message, /^tool tag: field labels cannot be sent to google in its strict mode: a map/)
      assert.strictEqual(server.received.length, 0)
    }))

  it.scoped("bedrock, not in strict mode: the tool goes as Effect renders it (its non-strict mode takes a map)", () =>
    Effect.gen(function*() {
      const bedrock = cases.find((c) => c.provider === "bedrock")!
      const server = yield* fixtureServer([{ status: 200, body: fixture(bedrock.text) }])
      const result = yield* Agent.run(tagger, prompt).pipe(Effect.provide(modelLayer(bedrock.model, bedrock.env(server.url))))
      assert.strictEqual(result.output, answer)
      assert.deepStrictEqual(bedrock.toolsOf(server.received[0]!.body)[0]!.parameters, Tool.jsonSchema(tag).parameters)
    }))
})

describe("a typed final output through the adapter", () => {
  const Status = Schema.Struct({ orderId: Schema.String, status: Schema.Literal("pending", "shipped") })

  it.scoped("google: the model answers with the output tool; the run's value is the decoded answer, the tool offered beside the others", () =>
    Effect.gen(function*() {
      const google = cases.find((c) => c.provider === "google")!
      const answerCall = {
        candidates: [{
          content: { parts: [{ functionCall: { name: "final_answer", args: { orderId: "ord-4821", status: "shipped" } } }], role: "model" },
          finishReason: "STOP",
          index: 0
        }],
        usageMetadata: { promptTokenCount: 90, candidatesTokenCount: 12, totalTokenCount: 102 }
      }
      const server = yield* fixtureServer([{ status: 200, body: answerCall }])
      const typed = Agent.make({ name: "typed", tools: [lookupOrder], output: Status })
      const result = yield* Agent.run(typed, prompt).pipe(Effect.provide(modelLayer(google.model, google.env(server.url))))
      assert.deepStrictEqual(result.value, { orderId: "ord-4821", status: "shipped" })
      assert.deepStrictEqual(google.toolsOf(server.received[0]!.body).map((t) => t.name), ["lookup_order", "final_answer"])
    }))
})

describe("a call of a tool the agent does not have, through the adapter", () => {
  const openrouter = cases.find((c) => c.provider === "openrouter")!
  const unknownName = (text: string) => text.split("lookup_order").join("delete_everything")

  it.scoped("whole answers: the model reads 'no such tool' and the run goes on, as with our own providers", () =>
    Effect.gen(function*() {
      const calls = JSON.parse(unknownName(JSON.stringify(fixture(openrouter.calls))))
      const server = yield* fixtureServer([{ status: 200, body: calls }, { status: 200, body: fixture(openrouter.text) }])
      const result = yield* Agent.run(agent, prompt).pipe(Effect.provide(modelLayer(openrouter.model, openrouter.env(server.url))))
      assert.strictEqual(result.output, answer)
      const sent = openrouter.resultsOf(server.received[1]!.body)
      assert.isAbove(sent.length, 0)
      // The adapter sends a failure's text as a JSON string.
      for (const [, text] of sent) assert.strictEqual(text, JSON.stringify("delete_everything: no such tool; the available tools are lookup_order"))
    }))

  it.scoped("a streamed answer: the same, the turn ending with its calls", () =>
    Effect.gen(function*() {
      const server = yield* fixtureServer([
        { status: 200, sse: unknownName(sseFixture("openrouter/stream_tool_calls.sse")) },
        { status: 200, sse: sseFixture("openrouter/stream_text.sse") }
      ])
      const events = yield* Stream.runCollect(Agent.stream(agent, prompt)).pipe(
        Effect.provide(modelLayer(openrouter.model, openrouter.env(server.url)))
      )
      const done = Chunk.unsafeLast(events)
      assert.strictEqual(done._tag, "Done")
      const finished = Chunk.toReadonlyArray(events).flatMap((e) => e._tag === "ToolCallFinished" ? [e.call.result.error] : [])
      assert.isAbove(finished.length, 0)
      for (const error of finished) assert.strictEqual(error, "delete_everything: no such tool; the available tools are lookup_order")
    }))
})
