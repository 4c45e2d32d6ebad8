/**
 * The model side over the platform (design: The model side): a task's deltas forwarded to the
 * submitting client, a client that drops mid-task and attaches again from its offset, and a typed
 * final output checked by the platform and decoded by the submitter.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Deferred, Effect, Exit, Fiber, Layer, Mailbox, Schedule, Schema, Scope, Stream } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { ToolResult } from "../../src/ToolResult.js"
import { clientLayer } from "../support/platform.js"
import { tcpProxy } from "../support/tcpProxy.js"

const settings = ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]]))
const caller = { agentId: "agent-1", processId: "p-1" }

const lookup = Tool.make("lookup", {
  description: "Looks an order up.",
  input: { orderId: Schema.String },
  output: Schema.String,
  timeout: "10 seconds"
}, ({ orderId }) => Effect.succeed(`order ${orderId}: shipped`))

/** A platform in this process whose model streams `script` (text in deltas of 4 characters), and a client. */
const platform = (script: ReadonlyArray<LanguageModel.ScriptedTurn>) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const handlers = yield* Layer.buildWithScope(
      PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) }).pipe(
        Layer.provideMerge(LanguageModel.layerScripted(script, { perConversation: true, streamed: { chunk: 4 } }))
      ),
      scope
    )
    const client = yield* Effect.map(
      Layer.buildWithScope(
        PlatformClient.layerTest.pipe(
          Layer.provide(Layer.succeedContext(handlers)),
          Layer.provide(Layer.setConfigProvider(settings))
        ),
        scope
      ),
      Context.get(PlatformClient.PlatformClient)
    )
    return {
      client,
      requests: Effect.flatMap(LanguageModel.Scripted, (s) => s.requests).pipe(Effect.provide(handlers))
    }
  })

/** Runs `effect` as a serving process of agent-1 on `client`. */
const serving = <A, E>(
  client: PlatformClient.PlatformClient["Type"],
  effect: (served: Serve.Serve["Type"]) => Effect.Effect<A, E>
) =>
  Effect.flatMap(Effect.flatMap(Toolkit.make(lookup), (toolkit) => Serve.makeConfig(toolkit)), effect).pipe(
    Effect.scoped,
    Effect.provideService(PlatformClient.PlatformClient, client),
    Effect.withConfigProvider(settings)
  )

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { text: "Looking order A-1 up.", toolCalls: [{ id: "l1", name: "lookup", arguments: "{\"orderId\":\"A-1\"}" }] },
  { text: "Order A-1 has shipped." }
]

const describeEvent = (event: Protocol.TaskEvent): string =>
  event._tag === "ModelTextDelta" || event._tag === "ModelText"
    ? `${event._tag} ${event.text}`
    : event._tag === "ToolCallRequested" || event._tag === "ToolCallStarted" || event._tag === "ToolCallCompleted"
    ? `${event._tag} ${event.toolCallId}`
    : event._tag

describe("platform: deltas and reconnects", () => {
  it.scopedLive("a task's deltas reach the submitting client in order, when it asks for them", () =>
    Effect.gen(function*() {
      const { client } = yield* platform(script)
      const events = yield* serving(client, (served) =>
        served.submitTask("where is A-1?", { deltas: true }).pipe(Stream.runCollect, Effect.timeout("10 seconds")))
      assert.deepStrictEqual([...events].map(describeEvent), [
        "TaskStarted",
        "TurnStarted",
        "ModelTextDelta Look",
        "ModelTextDelta ing ",
        "ModelTextDelta orde",
        "ModelTextDelta r A-",
        "ModelTextDelta 1 up",
        "ModelTextDelta .",
        "ModelText Looking order A-1 up.",
        "ToolCallStarted l1",
        "ToolCallRequested l1",
        "ToolCallCompleted l1",
        "TurnStarted",
        "ModelTextDelta Orde",
        "ModelTextDelta r A-",
        "ModelTextDelta 1 ha",
        "ModelTextDelta s sh",
        "ModelTextDelta ippe",
        "ModelTextDelta d.",
        "ModelText Order A-1 has shipped.",
        "TaskCompleted"
      ])
      // Without asking, the stream is what it was: no deltas.
      const plain = yield* serving(client, (served) => served.submitTask("where is A-1?").pipe(Stream.runCollect))
      assert.isFalse([...plain].some((e) => e._tag === "ModelTextDelta" || e._tag === "ToolCallStarted"))
    }))

  it.scopedLive("a client that drops mid-task and attaches again from its offset gets every event once, in order", () =>
    Effect.gen(function*() {
      const { client } = yield* platform(script)
      yield* client.register({ ...caller, manifest: (yield* Toolkit.make(lookup)).manifest, manifestHash: "h" })
      // The first connection reads three events (TaskStarted, TurnStarted, a delta), then drops.
      const first = yield* Effect.scoped(Effect.flatMap(
        client.submitTask({ ...caller, prompt: "where is A-1?", events: "deltas" }),
        (mailbox) => Mailbox.toStream(mailbox).pipe(Stream.take(3), Stream.runCollect)
      ))
      const seen = [...first]
      const taskId = seen[0]!.taskId
      const offset = seen[seen.length - 1]!.offset!
      // Meanwhile the task goes on to its call, which waits for an answer.
      yield* Effect.sleep("50 millis")
      const second = yield* Effect.scoped(Effect.flatMap(
        client.attachTask({ ...caller, taskId, events: "deltas", after: offset }),
        (mailbox) =>
          Mailbox.toStream(mailbox).pipe(
            Stream.tap((event) =>
              event._tag === "ToolCallRequested"
                ? client.completeToolCall({
                  ...caller,
                  results: [{ taskId, toolCallId: event.toolCallId, result: new ToolResult("order A-1: shipped", undefined) }]
                })
                : Effect.void
            ),
            Stream.runCollect,
            Effect.timeout("10 seconds")
          )
      ))
      const again = [...second]
      assert.strictEqual(again[0]!._tag, "TaskStarted")
      const resumed = again.slice(1)
      // None from before the offset, none twice, in order.
      assert.isTrue(resumed.every((e) => e.offset! > offset))
      const offsets = [...seen.slice(1), ...resumed].map((e) => e.offset!)
      assert.deepStrictEqual(offsets, [...offsets].sort((a, b) => a - b))
      assert.strictEqual(new Set(offsets).size, offsets.length)
      // Every event: the two connections together are the whole stream, as an attach from the start replays
      // it (an ended task keeps no deltas: its turns' whole texts are there).
      const whole = yield* Effect.scoped(Effect.flatMap(
        client.attachTask({ ...caller, taskId, events: "deltas", after: 0 }),
        (mailbox) => Mailbox.toStream(mailbox).pipe(Stream.runCollect)
      ))
      const noDeltas = (events: ReadonlyArray<Protocol.TaskEvent>) => events.filter((e) => e._tag !== "ModelTextDelta")
      assert.deepStrictEqual(noDeltas([...seen.slice(1), ...resumed]), [...whole].slice(1))
      // Every delta too, once: they make the two turns' texts exactly.
      const deltas = [...seen, ...resumed].flatMap((e) => e._tag === "ModelTextDelta" ? [e.text] : [])
      assert.strictEqual(deltas.join(""), "Looking order A-1 up.Order A-1 has shipped.")
      assert.deepStrictEqual([...whole].map(describeEvent), [
        "TaskStarted",
        "TurnStarted",
        "ModelText Looking order A-1 up.",
        "ToolCallStarted l1",
        "ToolCallRequested l1",
        "ToolCallCompleted l1",
        "TurnStarted",
        "ModelText Order A-1 has shipped.",
        "TaskCompleted"
      ])
      // A client that had the end gets nothing more but the greeting.
      const done = [...whole][whole.length - 1]!
      const after = yield* Effect.scoped(Effect.flatMap(
        client.attachTask({ ...caller, taskId, after: done.offset! }),
        (mailbox) => Mailbox.toStream(mailbox).pipe(Stream.runCollect)
      ))
      assert.deepStrictEqual([...after].map((e) => e._tag), ["TaskStarted"])
    }))
})

describe("platform: a serving process's stream over a dropped connection", () => {
  const policy = Timing.layer({
    redelivery: Schedule.spaced("10 seconds"),
    reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
  })

  it.live("submitTask's stream goes on past a cut connection: every event once, in order", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
          Layer.provide(LanguageModel.layerScripted([
            { text: "Holding on for you.", toolCalls: [{ id: "h1", name: "hold", arguments: "{}" }] },
            { text: "Held and done." }
          ], { streamed: { chunk: 5 } })),
          Layer.provide(policy)
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, context)
      const proxy = yield* tcpProxy({ host: "127.0.0.1", port: Number(new URL(url).port) })
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const hold = Tool.make("hold", { description: "Holds.", input: {}, timeout: "30 seconds" }, () =>
        Effect.zipRight(Deferred.succeed(started, undefined), Effect.as(Deferred.await(release), "held")))
      const events: Array<Protocol.TaskEvent> = []
      const fiber = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(hold))
        yield* Stream.runForEach(served.submitTask("go", { deltas: true }), (event) => Effect.sync(() => events.push(event)))
      }).pipe(
        Effect.scoped,
        Effect.provide(clientLayer({ url: `ws://127.0.0.1:${proxy.port}${PlatformServer.path}` }, policy)),
        Effect.fork
      )
      yield* Deferred.await(started)
      assert.isAbove(proxy.cut(), 0)
      // The call comes again on the new connection (it was delivered before the offset, unanswered).
      yield* Effect.repeat(Effect.sleep("20 millis"), {
        until: () => events.filter((e) => e._tag === "ToolCallRequested").length >= 2
      }).pipe(Effect.timeout("10 seconds"))
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(fiber)
      const stamped = events.filter((e) => e.offset !== undefined).map((e) => e.offset!)
      assert.deepStrictEqual(stamped, [...new Set(stamped)].sort((a, b) => a - b), "offsets grow, none twice")
      assert.deepStrictEqual(events.map(describeEvent).filter((e) => !e.startsWith("ModelTextDelta")), [
        "TaskStarted",
        "TurnStarted",
        "ModelText Holding on for you.",
        "ToolCallStarted h1",
        "ToolCallRequested h1",
        // The connection was cut here: the next attach greets, and delivers the unanswered call again.
        "TaskStarted",
        "ToolCallRequested h1",
        "ToolCallCompleted h1",
        "TurnStarted",
        "ModelText Held and done.",
        "TaskCompleted"
      ])
      const deltas = events.flatMap((e) => e._tag === "ModelTextDelta" ? [e.text] : [])
      assert.strictEqual(deltas.join(""), "Holding on for you.Held and done.")
    }).pipe(Effect.scoped), 20_000)
})

const Order = Schema.Struct({ id: Schema.String, status: Schema.Literal("shipped", "pending") })
const validAnswer = { text: "{\"id\":\"A-1\",\"status\":\"shipped\"}" }
const invalidAnswer = { text: "{\"id\":\"A-1\",\"status\":\"lost\"}" }

describe("platform: typed output", () => {
  it.scopedLive("a valid answer decodes; the model was asked for the output's JSON Schema", () =>
    Effect.gen(function*() {
      const { client, requests } = yield* platform([validAnswer])
      const value = yield* serving(client, (served) => served.runTask("where is A-1?", { output: Order }))
      assert.deepStrictEqual(value, { id: "A-1", status: "shipped" })
      const [request] = yield* requests
      assert.deepStrictEqual((request!.output?.schema as { required: Array<string> }).required, ["id", "status"])
    }))

  it.scopedLive("an invalid answer goes back with its issues; the second decodes", () =>
    Effect.gen(function*() {
      const { client, requests } = yield* platform([invalidAnswer, validAnswer])
      const value = yield* serving(client, (served) => served.runTask("where is A-1?", { output: Order }))
      assert.deepStrictEqual(value, { id: "A-1", status: "shipped" })
      const told = (yield* requests)[1]!.messages.filter((m) => m._tag === "UserMessage")
      const text = told[told.length - 1]!._tag === "UserMessage" ? (told[told.length - 1] as { text: string }).text : ""
      assert.include(text, "status")
      assert.include(text, "\"lost\"")
    }))

  it.scopedLive("three invalid answers fail the task with the last one's issues", () =>
    Effect.gen(function*() {
      const { client } = yield* platform([invalidAnswer, invalidAnswer, { text: "{\"id\":\"A-1\"}" }])
      const error = yield* Effect.flip(serving(client, (served) => served.runTask("where is A-1?", { output: Order })))
      assert.strictEqual(error._tag, "TaskFailedError")
      assert.include(error.message, "OutputInvalid")
      assert.include(error.message, "after 3 attempt(s)")
      assert.include(error.message, "status: is missing")
    }))
})
