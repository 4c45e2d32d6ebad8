/**
 * The serving side's WebSocket client (design: Serving): the task streams and the answers go as frames of their
 * own beside `RpcClient`'s calls on one connection. What each gets back is its own, and a dropped connection
 * loses nothing: the stream fails as unavailable, the call comes again on the next attach, its answer lands.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Mailbox, Schedule, Schema, Tracer } from "effect"
import { LanguageModel, Timing, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Protocol } from "../src/exports/protocol.js"
import { PlatformClient } from "../src/exports/serve.js"
import { ToolResult } from "../src/ToolResult.js"
import { clientLayer, resultsText } from "./support/platform.js"
import { tcpProxy } from "./support/tcpProxy.js"
import { WebSocket, WebSocketServer } from "ws"
import { type AddressInfo } from "node:net"

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

const caller = { agentId: "agent-1", processId: "p-1" }

const add = Tool.make("add", {
  description: "Adds.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))

/** One call of `add`, then the results as text. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [{ id: "c1", name: "add", arguments: "{\"a\":40,\"b\":2}" }] },
  (request) => ({ text: resultsText(request) })
]

/** The platform on 127.0.0.1 with that model (each task's from its first turn), reached through a TCP proxy that can cut the connections. */
const platformBehindProxy = Effect.gen(function*() {
  const context = yield* Layer.build(
    PlatformServer.layerWebSocket({ port: 0 }).pipe(
      Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
      Layer.provide(LanguageModel.layerScripted(script, { perConversation: true })),
      Layer.provide(policy)
    )
  )
  const url = new URL(yield* Effect.provide(PlatformServer.url, context))
  const proxy = yield* tcpProxy({ host: "127.0.0.1", port: Number(url.port) })
  const client = yield* Effect.provide(
    PlatformClient.PlatformClient,
    yield* Layer.build(clientLayer({ url: `ws://127.0.0.1:${proxy.port}${url.pathname}` }, policy))
  )
  return { client, proxy }
})

/** Events of `mailbox` up to and including the first that `last` accepts. */
const takeUntil = <E>(mailbox: Mailbox.ReadonlyMailbox<Protocol.TaskEvent, E>, last: (event: Protocol.TaskEvent) => boolean) =>
  Effect.gen(function*() {
    const events: Array<Protocol.TaskEvent> = []
    while (true) {
      const event = yield* mailbox.take
      events.push(event)
      if (last(event)) return events
    }
  })

const encode = Schema.encodeSync(Protocol.TaskEvent)

/** The calls' frames this process's WebSocket clients send while the scope is open (each parsed), by `ws`'s own `send`. */
const callFramesSent = Effect.acquireRelease(
  Effect.sync(() => {
    const frames: Array<{ readonly call: string; readonly traceId?: string }> = []
    const send = WebSocket.prototype.send
    WebSocket.prototype.send = function(this: WebSocket, data: unknown, ...rest: Array<unknown>) {
      if (typeof data === "string" && data.includes("\"call\"")) frames.push(JSON.parse(data))
      return (send as (...args: Array<unknown>) => void).call(this, data, ...rest)
    } as typeof send
    return { frames, send }
  }),
  ({ send }) => Effect.sync(() => void (WebSocket.prototype.send = send))
)

/** A task of one call of `add` on the client: submitted, its call answered (42), its end awaited. */
const oneTask = (client: PlatformClient.PlatformClient["Type"]) =>
  Effect.scoped(Effect.gen(function*() {
    const mailbox = yield* client.submitTask({ ...caller, prompt: "go", events: "calls" })
    const call = (yield* takeUntil(mailbox, (event) => event._tag === "ToolCallRequested")).at(-1)!
    yield* client.completeToolCall({
      ...caller,
      results: [{ taskId: call.taskId, toolCallId: (call as { toolCallId: string }).toolCallId, result: new ToolResult(42, undefined) }]
    })
    return (yield* takeUntil(mailbox, (event) => event._tag === "TaskCompleted")).at(-1) as { output: string }
  }).pipe(Effect.timeout("10 seconds")))

/** `effect` with a tracer of the user's installed (Effect's own spans, made by another tracer than its default). */
const withUsersTracer = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.tracer, (native) =>
    Effect.withTracer(effect, Tracer.make({ span: (...args) => native.span(...args), context: native.context })))

describe("the serving side's WebSocket client", () => {
  it.scopedLive("a dropped connection fails the task's stream as unavailable; the call comes again on the next attach and its answer completes the task", () =>
    Effect.gen(function*() {
      const { client, proxy } = yield* platformBehindProxy
      yield* client.register({ ...caller, manifest: (yield* Toolkit.make(add)).manifest, manifestHash: "h" })
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const mailbox = yield* client.submitTask({ ...caller, prompt: "go", events: "calls" })
        const events = yield* takeUntil(mailbox, (event) => event._tag === "ToolCallRequested")
        assert.isAbove(proxy.cut(), 0)
        const error = yield* Effect.flip(mailbox.take)
        return { events, error }
      }))
      assert.strictEqual((first.error as { _tag: string })._tag, "PlatformUnavailable")
      const call = first.events.at(-1) as Extract<Protocol.TaskEvent, { _tag: "ToolCallRequested" }>
      assert.strictEqual(call.toolCallId, "c1")
      // A new connection: the task's pending call is delivered again, and the answer sent on it completes the task.
      const again = yield* Effect.scoped(Effect.gen(function*() {
        const mailbox = yield* client.attachTask({ ...caller, taskId: call.taskId, events: "calls" })
        const events = yield* takeUntil(mailbox, (event) => event._tag === "ToolCallRequested" || event._tag === "TaskCompleted")
        yield* client.completeToolCall({
          ...caller,
          results: [{ taskId: call.taskId, toolCallId: call.toolCallId, result: new ToolResult(42, undefined) }]
        })
        return [...events, ...(yield* takeUntil(mailbox, (event) => event._tag === "TaskCompleted"))]
      }).pipe(Effect.timeout("10 seconds")))
      assert.deepStrictEqual(again.filter((e) => e._tag === "ToolCallRequested").map((e) => e.toolCallId), ["c1"])
      const last = again.at(-1) as Extract<Protocol.TaskEvent, { _tag: "TaskCompleted" }>
      assert.strictEqual(last.output, "c1:42")
    }))

  it.scopedLive("RpcClient's calls, answers and a task's stream on one connection, interleaved, each get their own answer", () =>
    Effect.gen(function*() {
      const { client } = yield* platformBehindProxy
      yield* client.register({ ...caller, manifest: (yield* Toolkit.make(add)).manifest, manifestHash: "h" })
      const outcome = yield* Effect.scoped(Effect.gen(function*() {
        const mailbox = yield* client.submitTask({ ...caller, prompt: "go", events: "calls" })
        // Heartbeats (RpcClient) and empty answers (direct) in flight together, while the task's call comes.
        const beats = yield* Effect.all(
          Array.from({ length: 20 }, (_, i) =>
            i % 2 === 0
              ? client.heartbeat({ ...caller, manifestHash: "h" })
              : Effect.as(client.completeToolCall({ ...caller, results: [] }), "answered" as const)),
          { concurrency: "unbounded" }
        )
        const call = (yield* takeUntil(mailbox, (event) => event._tag === "ToolCallRequested")).at(-1)!
        yield* client.completeToolCall({
          ...caller,
          results: [{ taskId: call.taskId, toolCallId: (call as { toolCallId: string }).toolCallId, result: new ToolResult(42, undefined) }]
        })
        const last = (yield* takeUntil(mailbox, (event) => event._tag === "TaskCompleted")).at(-1)!
        return { beats, last }
      }).pipe(Effect.timeout("10 seconds")))
      assert.deepStrictEqual(
        outcome.beats,
        Array.from({ length: 20 }, (_, i) => i % 2 === 0 ? { known: true } : "answered")
      )
      assert.strictEqual((outcome.last as { output: string }).output, "c1:42")
    }))

  it.scopedLive("a call's frame carries a trace only when a tracer of the user's is installed (with none, the platform may answer a CompleteToolCall on the wire itself)", () =>
    Effect.gen(function*() {
      const { client } = yield* platformBehindProxy
      yield* client.register({ ...caller, manifest: (yield* Toolkit.make(add)).manifest, manifestHash: "h" })
      const sent = yield* callFramesSent
      const untraced = yield* oneTask(client)
      const unheard = sent.frames.splice(0)
      const traced = yield* oneTask(client).pipe(Effect.withSpan("submit"), withUsersTracer)
      assert.strictEqual(untraced.output, "c1:42")
      assert.strictEqual(traced.output, "c1:42")
      assert.deepStrictEqual(unheard.map((frame) => [frame.call, frame.traceId]), [["SubmitTask", undefined], ["CompleteToolCall", undefined]])
      assert.deepStrictEqual(sent.frames.map((frame) => frame.call), ["SubmitTask", "CompleteToolCall"])
      for (const frame of sent.frames) assert.match(frame.traceId ?? "", /^[0-9a-f]{32}$/)
    }))

  it.scopedLive("a task's stream that gave its last event is not cancelled: its end, a frame behind, closes it; one closed before still is", () =>
    Effect.gen(function*() {
      // A platform of one frame each way: each submit's events, its task's end among them or not, then its end 50 ms later.
      const received: Array<{ id: number; call?: string; cancel?: boolean }> = []
      const server = new WebSocketServer({ host: "127.0.0.1", port: 0 })
      yield* Effect.addFinalizer(() => Effect.async<void>((resume) => server.close(() => resume(Effect.void))))
      yield* Effect.async<void>((resume) => {
        server.once("listening", () => resume(Effect.void))
      })
      server.on("connection", (socket) =>
        socket.on("message", (data) => {
          const frame = JSON.parse(String(data)) as { id: number; call?: string; cancel?: boolean; payload?: { prompt: string } }
          received.push(frame)
          if (frame.call !== "SubmitTask") return
          const taskId = `t-${frame.payload!.prompt}`
          const ended = frame.payload!.prompt === "ends"
          const events = [encode({ _tag: "TaskStarted", taskId })]
          if (ended) events.push(encode({ _tag: "TaskCompleted", taskId, output: "done", steps: 1, usage: { inputTokens: 0, outputTokens: 0 } }))
          socket.send(JSON.stringify({ id: frame.id, events }))
          if (ended) setTimeout(() => socket.send(JSON.stringify({ id: frame.id })), 50)
        }))
      const { port } = server.address() as AddressInfo
      const client = yield* Effect.provide(
        PlatformClient.PlatformClient,
        yield* Layer.build(clientLayer({ url: `ws://127.0.0.1:${port}` }, policy))
      )
      const follow = (prompt: string, until: Protocol.TaskEvent["_tag"]) =>
        Effect.scoped(Effect.flatMap(
          client.submitTask({ ...caller, prompt, events: "all" }),
          (mailbox) => takeUntil(mailbox, (event) => event._tag === until)
        ))
      const ended = yield* follow("ends", "TaskCompleted")
      const left = yield* follow("stays", "TaskStarted")
      yield* Effect.sleep("150 millis")
      assert.deepStrictEqual(ended.map((event) => event._tag), ["TaskStarted", "TaskCompleted"])
      assert.deepStrictEqual(left.map((event) => event._tag), ["TaskStarted"])
      const [first, second] = received.filter((frame) => frame.call === "SubmitTask").map((frame) => frame.id)
      const cancelled = received.filter((frame) => frame.cancel === true).map((frame) => frame.id)
      // The task that ended: no cancel (its end came 50 ms after its scope closed); the one that did not: cancelled.
      assert.deepStrictEqual(cancelled, [second])
      assert.notStrictEqual(first, second)
    }))
})
