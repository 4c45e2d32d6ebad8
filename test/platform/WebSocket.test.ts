import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Deferred, Effect, Fiber, Layer, Option, Schedule, Schema, Stream, Tracer } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { WebSocket } from "ws"
import { record } from "../support/figures.js"
import { clientLayer, resultsText } from "../support/platform.js"
import { tcpProxy } from "../support/tcpProxy.js"
import { ToolResult } from "../../src/ToolResult.js"

const tokens = new Map([["tok-1", "agent-1"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

/** The platform on a real WebSocket on 127.0.0.1, with a scripted model; yields its URL. */
const platform = (script: ReadonlyArray<LanguageModel.ScriptedTurn>) =>
  Effect.flatMap(
    Layer.build(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens })),
        Layer.provide(LanguageModel.layerScripted(script)),
        Layer.provide(policy)
      )
    ),
    (context) => Effect.provide(PlatformServer.url, context)
  )

/** A serving process's client layer for `url`, as agent-1. */
const client = (url: string) => clientLayer({ url }, policy)

/** Sends `frames` on a raw WebSocket (with `headers`) and collects one reply per frame. */
const rawExchange = (url: string, frames: ReadonlyArray<string>, headers: Record<string, string>) =>
  Effect.promise(() =>
    new Promise<Array<string>>((resolve) => {
      const got: Array<string> = []
      const socket = new WebSocket(url, { headers })
      socket.on("open", () => frames.forEach((frame) => socket.send(frame)))
      socket.on("message", (data) => {
        got.push(String(data))
        if (got.length === frames.length) {
          socket.close()
          resolve(got)
        }
      })
      socket.on("error", () => resolve(got))
    })
  )

const call = (id: string, name: string, args: unknown = {}): LanguageModel.ToolCall => ({
  id,
  name,
  arguments: JSON.stringify(args)
})

const describeEvent = (event: Protocol.TaskEvent): string => {
  switch (event._tag) {
    case "ToolCallRequested":
      return `requested ${event.toolCallId}`
    case "ToolCallCompleted":
      return `completed ${event.toolCallId}`
    case "ModelText":
      return `text ${event.text}`
    case "TaskCompleted":
      return `done ${event.output}`
    case "TaskFailed":
      return `failed ${event.reason}`
    case "TaskStarted":
      return "started"
    case "TurnStarted":
      return `turn ${event.step}`
    case "TaskTakenOver":
      return `taken over ${event.taskId}`
    case "TaskSuspended":
      return `suspended on ${event.pending.map((p) => p.toolCallId).join(",")}`
    case "TaskWaiting":
      return `waiting ${event.reason}`
    case "ModelTextDelta":
    case "ReasoningDelta":
      return `delta ${event.text}`
    case "TurnRetried":
      return `retried ${event.step}`
    case "ToolCallStarted":
      return `started ${event.toolCallId}`
    case "SubTaskStarted":
      return `sub-task ${event.childTaskId}`
    case "SubTaskEnded":
      return `sub-task ${event.childTaskId} ${event.outcome}`
    case "TaskCancelled":
      return `cancelled by ${event.by}`
    case "ToolCallCancelled":
      return `cancelled ${event.toolCallId}`
  }
}

describe("platform over a real WebSocket", () => {
  it.live("a process serves three tools and submits a task: two calls at once, then a third, in order", () =>
    Effect.gen(function*() {
      const url = yield* platform([
        { toolCalls: [call("a", "fast"), call("b", "slow")] },
        { toolCalls: [call("c", "add", { a: 2, b: 3 })] },
        (request) => ({ text: resultsText(request) })
      ])
      const fast = Tool.make("fast", { description: "Fast.", input: {}, timeout: "5 seconds" }, () =>
        Effect.as(Effect.sleep("20 millis"), "fast"))
      const slow = Tool.make("slow", { description: "Slow.", input: {}, timeout: "5 seconds" }, () =>
        Effect.as(Effect.sleep("120 millis"), "slow"))
      const add = Tool.make("add", {
        description: "Add.",
        input: { a: Schema.Number, b: Schema.Number },
        output: Schema.Number,
        timeout: "5 seconds"
      }, ({ a, b }) => Effect.succeed(a + b))
      const events = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(fast, slow, add))
        return yield* Stream.runCollect(served.submitTask("go"))
      }).pipe(Effect.scoped, Effect.provide(client(url)))
      assert.deepStrictEqual([...events].map(describeEvent), [
        "started",
        "turn 1",
        "requested a",
        "requested b",
        "completed a",
        "completed b",
        "turn 2",
        "requested c",
        "completed c",
        "turn 3",
        "text a:\"fast\" b:\"slow\" c:5",
        "done a:\"fast\" b:\"slow\" c:5"
      ])
    }).pipe(Effect.scoped))

  it.live("a stream asked for events: \"calls\" carries the calls and the end only", () =>
    Effect.gen(function*() {
      const url = yield* platform([
        { text: "thinking", toolCalls: [call("a", "add", { a: 1, b: 2 })] },
        (request) => ({ text: resultsText(request) })
      ])
      const add = Tool.make("add", {
        description: "Add.",
        input: { a: Schema.Number, b: Schema.Number },
        timeout: "5 seconds"
      }, ({ a, b }) => Effect.succeed(a + b))
      const events = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(add))
        const platformClient = yield* PlatformClient.PlatformClient
        const mailbox = yield* platformClient.submitTask({
          agentId: "agent-1",
          processId: served.processId,
          prompt: "go",
          events: "calls"
        })
        const seen: Array<Protocol.TaskEvent> = []
        while (true) {
          const [chunk, done] = yield* mailbox.takeAll
          for (const event of chunk) {
            seen.push(event)
            // Answer the call as a serving process would.
            if (event._tag === "ToolCallRequested") {
              yield* platformClient.completeToolCall({
                agentId: "agent-1",
                processId: served.processId,
                results: [{ taskId: event.taskId, toolCallId: event.toolCallId, result: new ToolResult(3, undefined) }]
              })
            }
          }
          if (done) return seen
        }
      }).pipe(Effect.scoped, Effect.provide(client(url)))
      assert.deepStrictEqual(events.map(describeEvent), ["started", "requested a", "done a:3"])
    }).pipe(Effect.scoped))

  it.live("a submit repeated with its key (its answer lost) gets the task the first made; another key, another task", () =>
    Effect.gen(function*() {
      const url = yield* platform([{ toolCalls: [call("held", "hold")] }])
      const hold = Tool.make("hold", { description: "Holds.", input: {}, timeout: "30 seconds" }, () => Effect.never)
      const started = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(hold))
        const platformClient = yield* PlatformClient.PlatformClient
        const submit = (submitKey: string) =>
          Effect.flatMap(
            platformClient.submitTask({ agentId: "agent-1", processId: served.processId, prompt: "go", events: "calls", submitKey }),
            (mailbox) => Effect.map(mailbox.take, (event) => event.taskId)
          )
        const key = "0b5c2a6e-3d1f-4c44-9a51-5f1f3f2d8e77"
        return [yield* submit(key), yield* submit(key), yield* submit("another-key-1234")]
      }).pipe(Effect.scoped, Effect.provide(client(url)))
      assert.strictEqual(started[0], started[1], "the repeat got the first task")
      assert.notStrictEqual(started[2], started[0])
      assert.match(started[0]!, /^task-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    }).pipe(Effect.scoped))

  it.live("a dropped connection mid-call: re-attached, the call comes again with the same id and deadline; it lands once", () =>
    Effect.gen(function*() {
      const url = yield* platform([
        { toolCalls: [call("held", "hold")] },
        (request) => ({ text: resultsText(request) })
      ])
      const port = Number(new URL(url).port)
      const proxy = yield* tcpProxy({ host: "127.0.0.1", port })
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let runs = 0
      const hold = Tool.make("hold", { description: "Holds.", input: {}, timeout: "30 seconds" }, () =>
        Effect.gen(function*() {
          runs++
          yield* Deferred.succeed(started, undefined)
          yield* Deferred.await(release)
          return "held"
        }))
      const events: Array<Protocol.TaskEvent> = []
      const fiber = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(hold))
        yield* Stream.runForEach(served.submitTask("go"), (event) => Effect.sync(() => events.push(event)))
      }).pipe(Effect.scoped, Effect.provide(client(`ws://127.0.0.1:${proxy.port}${PlatformServer.path}`)), Effect.fork)
      yield* Deferred.await(started)
      assert.isAbove(proxy.cut(), 0)
      // Wait for the call to come again over the new connection.
      yield* Effect.repeat(Effect.sleep("20 millis"), {
        until: () => events.filter((e) => e._tag === "ToolCallRequested").length >= 2
      }).pipe(Effect.timeout("10 seconds"))
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(fiber)
      const requested = events.flatMap((e) => e._tag === "ToolCallRequested" ? [[e.toolCallId, e.deadlineAt]] : [])
      assert.isAtLeast(requested.length, 2)
      for (const delivery of requested) assert.deepStrictEqual(delivery, requested[0])
      assert.strictEqual(runs, 1)
      assert.strictEqual(events.filter((e) => e._tag === "ToolCallCompleted").length, 1)
      assert.deepStrictEqual(events[events.length - 1]?._tag, "TaskCompleted")
      assert.strictEqual((events[events.length - 1] as { output: string }).output, "held:\"held\"")
    }).pipe(Effect.scoped), 20_000)

  it.live("a tool registered only by another process runs there, given to it on its own connection", () =>
    Effect.gen(function*() {
      const url = yield* platform([
        { toolCalls: [call("x", "secret")] },
        (request) => ({ text: resultsText(request) })
      ])
      const ran: Array<string> = []
      const secret = Tool.make("secret", { description: "Secret.", input: {}, timeout: "30 seconds" }, () =>
        Effect.sync(() => ran.push("secret")))
      const plain = Tool.make("plain", { description: "Plain.", input: {}, timeout: "30 seconds" }, () =>
        Effect.sync(() => ran.push("plain")))
      // Two processes of agent-1, each with its own connection: one serves `secret`, the other submits.
      yield* Effect.gen(function*() {
        yield* Serve.makeConfig(yield* Toolkit.make(secret))
        yield* Effect.gen(function*() {
          const submitter = yield* Serve.makeConfig(yield* Toolkit.make(plain))
          const output = yield* submitter.runTask("go")
          // The call went to the process serving `secret` (design: The platform), which answered it on its connection.
          assert.strictEqual(output, "x:1")
          assert.deepStrictEqual(ran, ["secret"])
        }).pipe(Effect.scoped, Effect.provide(client(url)))
      }).pipe(Effect.scoped, Effect.provide(client(url)))
    }).pipe(Effect.scoped))

  it.live("another agent's task is offered none of this agent's tools, and a call naming one never reaches it", () =>
    Effect.gen(function*() {
      const offered: Array<Array<string>> = []
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"], ["tok-2", "agent-2"]]) })),
          Layer.provide(LanguageModel.layerScripted([
            (request) => {
              offered.push(request.tools.map((t) => t.name))
              return { toolCalls: [call("x", "lookup", { id: "1" })] }
            },
            (request) => ({ text: resultsText(request) })
          ])),
          Layer.provide(policy)
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, context)
      let lookups = 0
      const lookup = Tool.make("lookup", { description: "Look up.", input: { id: Schema.String }, timeout: "5 seconds" }, ({ id }) =>
        Effect.sync(() => (lookups++, `found ${id}`)))
      const other = Tool.make("other", { description: "Other.", input: {}, timeout: "5 seconds" }, () => Effect.succeed("other"))
      // agent-1 serves lookup; agent-2, with a token of its own, serves `other` and submits a task.
      const agentOne = yield* Layer.build(client(url))
      yield* Serve.makeConfig(yield* Toolkit.make(lookup)).pipe(Effect.provide(agentOne))
      const agentTwo = clientLayer({ url, agentId: "agent-2", token: "tok-2" }, policy)
      const output = yield* Effect.flatMap(Serve.makeConfig(yield* Toolkit.make(other)), (served) => served.runTask("go")).pipe(
        Effect.provide(agentTwo)
      )
      assert.deepStrictEqual(offered, [["other"]])
      assert.strictEqual(output, "x:lookup: no such tool; the available tools are other")
      assert.strictEqual(lookups, 0)
    }).pipe(Effect.scoped))

  it.live("malformed frames and unknown messages get an error; the server keeps serving other connections", () =>
    Effect.gen(function*() {
      const url = yield* platform([])
      const frames = [
        "not json",
        "[1,2]",
        "{}",
        JSON.stringify({ id: 1, call: "Nope", payload: {} }),
        JSON.stringify({ id: 2, call: "Register", payload: { bad: 1 } }),
        JSON.stringify({ id: 3, call: "Heartbeat", payload: { agentId: "agent-2", processId: "p", manifestHash: "h" } }),
        "x".repeat(2_000_000)
      ]
      const replies = yield* rawExchange(url, frames, { authorization: "Bearer tok-1" })
      assert.strictEqual(replies.length, frames.length, "every bad frame got an answer")
      assert.deepStrictEqual(JSON.parse(replies[0]!), { defect: "the frame is not valid JSON" })
      assert.match(replies[1]!, /must be a JSON object/)
      assert.match(replies[2]!, /must have a numeric id/)
      assert.match(replies[3]!, /"id":1,"defect":"unknown call \\"Nope\\"; the calls are Register, Heartbeat/)
      // The payload's error names the call and the field.
      assert.match(replies[4]!, /^\{"id":2,"defect":"Register payload\\n.*\[\\"agentId\\"\]\\n.*is missing"\}$/)
      // Another agent's call on this token: a typed Unauthorized, not a defect.
      assert.deepStrictEqual(JSON.parse(replies[5]!), {
        id: 3,
        error: { _tag: "Unauthorized", message: "the token is not valid for agent agent-2" }
      })
      assert.deepStrictEqual(JSON.parse(replies[6]!), { defect: "the frame is not valid JSON" })
      // Another connection, and a proper call on it, still work.
      const answer = yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
        c.heartbeat({ agentId: "agent-1", processId: "p", manifestHash: "h" })).pipe(Effect.provide(client(url)))
      assert.deepStrictEqual(answer, { known: false })
      record({
        suite: "hostile input",
        measure: "malformed platform frames answered with a clear error (other connections kept serving)",
        value: `${replies.length} of ${frames.length}`,
        expected: `${frames.length} of ${frames.length}`
      })
    }).pipe(Effect.scoped))

  it.live("a frame over the size limit closes that connection (1009) and no other", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(
        PlatformServer.layerWebSocket({ port: 0, maxFrameBytes: 64 * 1024 }).pipe(
          Layer.provide(PlatformServer.layerHandlers({ tokens })),
          Layer.provide(LanguageModel.layerScripted([])),
          Layer.provide(policy)
        )
      )
      const url = yield* Effect.provide(PlatformServer.url, context)
      const heartbeat = Effect.flatMap(PlatformClient.PlatformClient, (c) =>
        c.heartbeat({ agentId: "agent-1", processId: "p", manifestHash: "h" }))
      yield* Effect.gen(function*() {
        assert.deepStrictEqual(yield* heartbeat, { known: false })
        const closed = yield* Effect.promise(() =>
          new Promise<number>((resolve) => {
            const socket = new WebSocket(url, { headers: { authorization: "Bearer tok-1" } })
            socket.on("open", () => socket.send("x".repeat(65 * 1024)))
            socket.on("close", (code) => resolve(code))
            socket.on("error", () => undefined)
          })
        )
        assert.strictEqual(closed, 1009)
        // The first client's connection is still the one it had, and still answers.
        assert.deepStrictEqual(yield* heartbeat, { known: false })
        record({ suite: "hostile input", measure: "oversized platform frame: that connection closed with", value: closed, expected: "1009" })
      }).pipe(Effect.provide(client(url)))
    }).pipe(Effect.scoped))

  it.live("trace context crosses the wire: the caller's span is the parent of the platform's span for the call", () =>
    Effect.gen(function*() {
      const native = yield* Effect.tracer
      const spans: Array<Tracer.Span> = []
      const recording = Tracer.make({
        span: (...args) => {
          const span = native.span(...args)
          spans.push(span)
          return span
        },
        context: native.context
      })
      yield* Effect.gen(function*() {
        const url = yield* platform([])
        yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.heartbeat({ agentId: "agent-1", processId: "p", manifestHash: "h" })).pipe(
            Effect.withSpan("caller"),
            Effect.provide(client(url))
          )
      }).pipe(Effect.withTracer(recording))
      const named = (name: string) => spans.find((span) => span.name === name)
      const caller = named("caller")
      const sent = named("RpcClient.Heartbeat")
      const served = named("RpcServer.Heartbeat")
      assert.isDefined(caller)
      assert.isDefined(sent)
      assert.isDefined(served)
      assert.strictEqual(sent!.traceId, caller!.traceId)
      assert.strictEqual(served!.traceId, caller!.traceId)
      const parent = Option.getOrUndefined(served!.parent)
      assert.strictEqual(parent?._tag, "ExternalSpan")
      assert.strictEqual(parent?.spanId, sent!.spanId)
    }).pipe(Effect.scoped))

  it.live("a wrong token is a typed Unauthorized on every call", () =>
    Effect.gen(function*() {
      const url = yield* platform([])
      const error = yield* Effect.flip(Effect.flatMap(PlatformClient.PlatformClient, (c) =>
        c.register({ agentId: "agent-1", processId: "p", manifest: [], manifestHash: "h" })).pipe(
          Effect.provide(PlatformClient.layer.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(
            new Map([["PLATFORM_TOKEN", "not-a-token"], ["PLATFORM_URL", url]])
          ))))))
      )
      assert.strictEqual(error._tag, "Unauthorized")
      assert.notInclude(error.message, "not-a-token")
    }).pipe(Effect.scoped))

  it.live("a serving process in another OS process runs a task through the platform", () =>
    Effect.gen(function*() {
      const url = yield* platform([
        { toolCalls: [call("l", "lookup", { id: "ord-1" }), call("s", "add", { a: 40, b: 2 })] },
        (request) => ({ text: resultsText(request) })
      ])
      const root = fileURLToPath(new URL("../..", import.meta.url))
      const stdout = yield* Effect.async<string, Error>((resume) => {
        const child = execFile(process.execPath, ["--import", "tsx", "test/support/serveChild.ts"], {
          cwd: root,
          timeout: 30_000,
          env: { ...process.env, AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-1", PLATFORM_URL: url, PROMPT: "go" }
        }, (error, out) => resume(error ? Effect.fail(error) : Effect.succeed(out)))
        return Effect.sync(() => child.kill())
      })
      const result = JSON.parse(stdout.trim().split("\n").pop()!)
      assert.strictEqual(result.output, "l:{\"id\":\"ord-1\",\"status\":\"shipped\"} s:42")
    }).pipe(Effect.scoped), 40_000)
})
