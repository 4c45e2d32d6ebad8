/**
 * Model fallbacks (`Model.fallback`) against fake Anthropic and OpenAI servers on 127.0.0.1: a primary that is
 * overloaded, failing or past its context window hands the turn to the secondary after its own retries; a
 * rejected tool schema does not; a journaled run resumed after a fallback turn asks neither model for it again;
 * a stream falls back only before its first part.
 */
import { assert, describe, it } from "@effect/vitest"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Chunk, Deferred, Effect, Fiber, Layer, Redacted, Schedule, Schema, Stream } from "effect"
import { Agent, Journal, LanguageModel, Timing, Tool } from "../src/index.js"
import { Anthropic, Model, OpenAi } from "../src/exports/providers.js"
import { fixture, fixtureServer, type Reply, sseFixture } from "./support/fixtureServer.js"
import { recordingTracer } from "./support/recordingTracer.js"

const anthropicAt = (url: string) =>
  Anthropic.layer({ model: "claude-sonnet-4-5", baseUrl: url, apiKey: Redacted.make("sk-ant-test") }).pipe(
    Layer.provide(NodeHttpClient.layer)
  )
const openaiAt = (url: string) =>
  OpenAi.layer({ model: "gpt-4.1", baseUrl: `${url}/v1`, apiKey: Redacted.make("sk-test") }).pipe(
    Layer.provide(NodeHttpClient.layer)
  )

/** One retry of the model's own, at once: the fallback comes after it. */
const oneRetry = Timing.layer({ modelRetry: Schedule.recurs(1) })

const error = (status: number, message: string): Reply => ({ status, body: { type: "error", error: { type: "x", message } } })
const openaiText = (text: string): Reply => ({
  status: 200,
  body: { ...fixture("openai/response_text.json"), choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }] }
})
const anthropicText = (text: string): Reply => ({
  status: 200,
  body: { ...fixture("anthropic/response_text.json"), content: [{ type: "text", text }] }
})

const agent = Agent.make({ name: "support" })

/** The run's events, in order. */
const eventsOf = <E, R>(events: Stream.Stream<Agent.AgentEvent, E, R>) => Effect.map(Stream.runCollect(events), Chunk.toArray)

describe("Model.fallback", () => {
  for (
    const [what, primary] of [
      ["overloaded (529)", [error(529, "Overloaded"), error(529, "Overloaded")]],
      ["failing (500)", [error(500, "Internal server error"), error(500, "Internal server error")]],
      ["past its context window (400)", [error(400, "prompt is too long: 210311 tokens > 200000 maximum")]]
    ] as const
  ) {
    it.scopedLive(`a primary ${what} hands the turn to the secondary, after its own retries; the events say who answered`, () =>
      Effect.gen(function*() {
        const first = yield* fixtureServer(primary)
        const second = yield* fixtureServer([openaiText("from the secondary")])
        const { spans, tracer } = recordingTracer()
        const events = yield* eventsOf(Agent.stream(agent, "hi")).pipe(
          Effect.provide(Layer.merge(Model.fallback([anthropicAt(first.url), openaiAt(second.url)]), oneRetry)),
          Effect.withTracer(tracer)
        )
        assert.strictEqual(first.received.length, primary.length, "the primary's own retries come first")
        const chat = spans.find((s) => s.name === "chat claude-sonnet-4-5")
        assert.strictEqual(chat?.attributes.get("gen_ai.response.model"), "gpt-4.1", "the turn's span names who answered")
        assert.strictEqual(second.received.length, 1)
        const fellBack = events.find((e) => e._tag === "ModelFallback")
        assert.deepInclude(fellBack, { step: 1, from: "anthropic:claude-sonnet-4-5", to: "openai:gpt-4.1" })
        const completed = events.find((e) => e._tag === "TurnCompleted")
        assert.strictEqual(completed?._tag === "TurnCompleted" ? completed.model : "", "openai:gpt-4.1")
        const done = events.at(-1)
        assert.strictEqual(done?._tag === "Done" ? done.result.output : "", "from the secondary")
      }))
  }

  it.scopedLive("a 400 for a bad tool schema is the run's failure: the secondary is never asked", () =>
    Effect.gen(function*() {
      const first = yield* fixtureServer([error(400, "tools.0.custom.input_schema: JSON schema is invalid")])
      const second = yield* fixtureServer([openaiText("never")])
      const failure = yield* Effect.flip(Agent.run(agent, "hi")).pipe(
        Effect.provide(Layer.merge(Model.fallback([anthropicAt(first.url), openaiAt(second.url)]), oneRetry))
      )
      assert.strictEqual(failure._tag, "ModelRequestRejected")
      assert.include(failure.message, "input_schema")
      assert.strictEqual(second.received.length, 0)
    }))

  it.scopedLive("a journaled run stopped after a fallback turn resumes without asking either model for that turn", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      let runs = 0
      // The first time it hangs (the process stops meanwhile); run again on resume, it answers.
      const wait = Tool.make("wait", { description: "waits", input: { n: Schema.Number }, output: Schema.String, timeout: "1 minute" }, () =>
        ++runs === 1 ? Effect.zipRight(Deferred.succeed(started, undefined), Effect.never) : Effect.succeed("waited"))
      const waiting = Agent.make({ name: "durable", tools: [wait] })
      const callWait: Reply = {
        status: 200,
        body: {
          ...fixture("openai/response_text.json"),
          choices: [{
            index: 0,
            message: {
              role: "assistant",
              content: null,
              tool_calls: [{ id: "call_1", type: "function", function: { name: "wait", arguments: "{\"n\":1}" } }]
            },
            finish_reason: "tool_calls"
          }]
        }
      }
      const first = yield* fixtureServer([error(529, "Overloaded"), error(529, "Overloaded"), anthropicText("all done")])
      const second = yield* fixtureServer([callWait])
      const models = Layer.merge(Model.fallback([anthropicAt(first.url), openaiAt(second.url)]), oneRetry)
      // The first process: turn 1 falls back to the secondary, its call starts, then the process stops.
      const fiber = yield* Effect.fork(Effect.provide(Agent.run(waiting, "go", { runId: "run-f" }), models))
      yield* Effect.raceFirst(Deferred.await(started), Effect.flatMap(Fiber.await(fiber), (exit) => Effect.die(exit)))
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(first.received.length, 2)
      assert.strictEqual(second.received.length, 1)
      // The next process: turn 1 is replayed (its model journaled with it); only turn 2 is asked, of the primary.
      const events = yield* eventsOf(Agent.stream(waiting, "", { runId: "run-f", resume: true })).pipe(
        Effect.provide(models)
      )
      assert.strictEqual(first.received.length, 3)
      assert.strictEqual(second.received.length, 1, "the fallback turn is not asked again")
      const models_ = events.flatMap((e) => e._tag === "TurnCompleted" ? [`${e.step} ${e.model}`] : [])
      assert.deepStrictEqual(models_, ["1 openai:gpt-4.1", "2 anthropic:claude-sonnet-4-5"])
      assert.isTrue(events.some((e) => e._tag === "Replayed" && e.step === 1))
    }).pipe(Effect.provide(Journal.layerMemory)))
})

describe("Model.fallback, streaming", () => {
  it.scopedLive("a stream that fails before its first part falls back", () =>
    Effect.gen(function*() {
      const first = yield* fixtureServer([error(529, "Overloaded"), error(529, "Overloaded")])
      const second = yield* fixtureServer([{ status: 200, sse: sseFixture("openai/stream_text.sse") }])
      const events = yield* eventsOf(Agent.stream(agent, "hi")).pipe(
        Effect.provide(Layer.merge(Model.fallback([anthropicAt(first.url), openaiAt(second.url)]), oneRetry))
      )
      assert.isTrue(events.some((e) => e._tag === "TextDelta"))
      assert.strictEqual(events.at(-1)?._tag, "Done")
      assert.strictEqual(second.received.length, 1)
    }))

  it.scopedLive("a stream that breaks after its first part is the turn's failure: the secondary is never asked", () =>
    Effect.gen(function*() {
      const cut: Reply = { status: 200, sse: sseFixture("anthropic/stream_text.sse"), cutAfterEvents: 3 }
      const first = yield* fixtureServer([cut, cut])
      const second = yield* fixtureServer([openaiText("never")])
      const failure = yield* Effect.flip(eventsOf(Agent.stream(agent, "hi"))).pipe(
        Effect.provide(Layer.merge(Model.fallback([anthropicAt(first.url), openaiAt(second.url)]), oneRetry))
      )
      assert.strictEqual(failure._tag, "ModelError")
      assert.include(failure.message, "the stream broke after")
      assert.strictEqual(first.received.length, 2, "the primary's own retry")
      assert.strictEqual(second.received.length, 0)
    }))

  it.effect("called directly, a fallback chain asks each model once, in order, and says which answered", () =>
    Effect.gen(function*() {
      const failing = LanguageModel.layerScripted([() => Effect.fail(new LanguageModel.ModelError({ message: "down", transient: true }))])
      const chain = LanguageModel.fallback([
        yield* Effect.provide(LanguageModel.LanguageModel, failing),
        yield* Effect.provide(LanguageModel.LanguageModel, LanguageModel.layerScripted([{ text: "ok" }]))
      ])
      const turn = yield* chain.generate({ messages: [{ _tag: "UserMessage", text: "hi" }], tools: [] })
      assert.strictEqual(turn.text, "ok")
      assert.strictEqual(turn.model, "scripted:scripted")
    }))
})
