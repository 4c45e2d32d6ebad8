import { assert, describe, it } from "@effect/vitest"
import { Terminal } from "@effect/platform"
import { Chunk, Clock, type Context, Effect, Exit, Fiber, Layer, Option, Schedule, Schema, Stream, TestClock, Tracer } from "effect"
import { Agent, Builtins, Invocation, LanguageModel, Timing, Tool, UserPrompt } from "../src/index.js"
import { Model } from "../src/exports/providers.js"

const call = (id: string, name: string, args: unknown = {}): LanguageModel.ToolCall => ({
  id,
  name,
  arguments: typeof args === "string" ? args : JSON.stringify(args)
})

/** The tool results of the last request, as `id=content` (errors marked `!`). */
const resultsOf = (request: LanguageModel.ModelRequest | undefined): Array<string> =>
  (request?.messages ?? []).flatMap((m) =>
    m._tag === "ToolResultMessage" ? [`${m.toolCallId}${m.isError ? "!" : "="}${m.content}`] : []
  )

class Declined extends Schema.TaggedError<Declined>()("Declined", { message: Schema.String }) {}

const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)

const sleeper = (name: string, millis: number) =>
  Tool.make(name, { description: `Sleeps ${millis} ms.`, input: {}, output: Schema.String, timeout: "10 seconds" }, () =>
    Effect.as(Effect.sleep(millis), name))

describe("Agent: tool execution (design: Calls in a turn)", () => {
  const threeSleepers = [sleeper("t20", 20), sleeper("t30", 30), sleeper("t50", 50)]
  const script = (seen: Array<number>) =>
    LanguageModel.layerScripted([
      { toolCalls: [call("a", "t20"), call("b", "t30"), call("c", "t50")] },
      () =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          seen.push(now)
          return { text: "done" }
        })
    ])

  for (const [mode, expected] of [["concurrent", 50], ["sequential", 100]] as const) {
    it.effect(`three tools of 20, 30 and 50 ms finish a turn at ${expected} ms when ${mode}`, () => {
      const seen: Array<number> = []
      return Effect.gen(function*() {
        const agent = Agent.make({ tools: threeSleepers, toolExecution: mode })
        const fiber = yield* Effect.fork(Agent.run(agent, "go"))
        yield* TestClock.adjust("200 millis")
        const result = yield* Fiber.join(fiber)
        assert.deepStrictEqual(seen, [expected])
        assert.strictEqual(result.output, "done")
        const [first, second] = yield* requests
        assert.deepStrictEqual(resultsOf(second), ["a=\"t20\"", "b=\"t30\"", "c=\"t50\""])
        // The tools' JSON Schemas are built once per toolkit, not per request.
        assert.strictEqual(first!.tools, second!.tools)
        assert.deepStrictEqual(first!.tools.map((t) => t.name), ["t20", "t30", "t50"])
        assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.durationMillis]), [["a", 20], ["b", 30], ["c", 50]])
      }).pipe(Effect.provide(script(seen)))
    })
  }

  it.effect("with calls that complete at once among those that wait, no more than the limit run at once, in call order", () => {
    const starts: Array<[string, number]> = []
    // `millis` 0: a handler that completes synchronously.
    const timed = (name: string, millis: number) =>
      Tool.make(name, { description: "Timed.", input: {}, timeout: "10 seconds" }, () =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          starts.push([name, now])
          return millis === 0 ? Effect.succeed(name) : Effect.as(Effect.sleep(millis), name)
        }))
    const tools = [timed("w20", 20), timed("now1", 0), timed("w30", 30), timed("now2", 0), timed("w50", 50)]
    const turn = () => LanguageModel.layerScripted([{ toolCalls: tools.map((t) => call(t.name, t.name)) }, { text: "done" }])
    const runWith = (options: Pick<Agent.Options<typeof tools>, "toolExecution" | "maxConcurrency">) =>
      Effect.gen(function*() {
        starts.length = 0
        const t0 = yield* Clock.currentTimeMillis
        const fiber = yield* Effect.fork(Agent.run(Agent.make({ tools, ...options }), "go"))
        yield* TestClock.adjust("1 second")
        const result = yield* Fiber.join(fiber)
        assert.deepStrictEqual(result.toolCalls.map((c) => c.result.value), tools.map((t) => t.name))
        return starts.map(([name, at]) => [name, at - t0])
      }).pipe(Effect.provide(turn()))
    return Effect.gen(function*() {
      assert.deepStrictEqual(yield* runWith({ toolExecution: "sequential" }), [
        ["w20", 0], ["now1", 20], ["w30", 20], ["now2", 50], ["w50", 50]
      ])
      // Two at once: w20 and now1 (done at once) and w30 start now; now2 and w50 when w20 ends.
      assert.deepStrictEqual(yield* runWith({ maxConcurrency: 2 }), [
        ["w20", 0], ["now1", 0], ["w30", 0], ["now2", 20], ["w50", 20]
      ])
      assert.deepStrictEqual(yield* runWith({}), [["w20", 0], ["now1", 0], ["w30", 0], ["now2", 0], ["w50", 0]])
    })
  })

  it.effect("maxConcurrency bounds the calls running at once", () => {
    const seen: Array<number> = []
    return Effect.gen(function*() {
      const agent = Agent.make({
        tools: [sleeper("s1", 50), sleeper("s2", 50), sleeper("s3", 50)],
        maxConcurrency: 2
      })
      const fiber = yield* Effect.fork(Agent.run(agent, "go"))
      yield* TestClock.adjust("200 millis")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(seen, [100])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "s1"), call("b", "s2"), call("c", "s3")] },
      () => Effect.map(Clock.currentTimeMillis, (now) => (seen.push(now), { text: "done" }))
    ])))
  })
})

describe("Agent: per-run idempotency (design: Per-run reuse)", () => {
  const refundTool = () => {
    const runs = { count: 0 }
    const tool = Tool.make("issue_refund", {
      description: "Refund.",
      input: { order_id: Schema.String, amount: Schema.Number },
      output: Schema.Struct({ refund: Schema.Number }),
      timeout: "10 seconds",
      idempotent: true
    }, ({ amount }) => Effect.sync(() => ({ refund: amount + 0 * ++runs.count })))
    return { runs, tool }
  }

  it.effect("runs the same (name, input) once per run; the duplicates are cached", () =>
    Effect.gen(function*() {
      const { runs, tool } = refundTool()
      const result = yield* Agent.run(Agent.make({ tools: [tool] }), "refund")
      assert.strictEqual(runs.count, 2)
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.id, c.cached]), [
        ["r1", false],
        ["r2", true],
        ["r3", false],
        ["r4", true]
      ])
      assert.deepStrictEqual(result.toolCalls.map((c) => c.result.value), [
        { refund: 10 },
        { refund: 10 },
        { refund: 20 },
        { refund: 10 }
      ])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      {
        toolCalls: [
          call("r1", "issue_refund", { order_id: "o1", amount: 10 }),
          // Same input, other key order: the same canonical key.
          call("r2", "issue_refund", { amount: 10, order_id: "o1" }),
          call("r3", "issue_refund", { order_id: "o1", amount: 20 })
        ]
      },
      { toolCalls: [call("r4", "issue_refund", { order_id: "o1", amount: 10 })] },
      { text: "refunded" }
    ]))))

  it.effect("a duplicate emitted while the first still runs waits for it (single flight)", () =>
    Effect.gen(function*() {
      let runs = 0
      const slow = Tool.make("slow_refund", {
        description: "Slow refund.",
        input: { order_id: Schema.String },
        timeout: "10 seconds",
        idempotent: true
      }, () => Effect.as(Effect.sleep("40 millis"), ++runs))
      const fiber = yield* Effect.fork(Agent.run(Agent.make({ tools: [slow] }), "refund"))
      yield* TestClock.adjust("100 millis")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.cached, c.result.value, c.durationMillis]), [
        [false, 1, 40],
        [true, 1, 40]
      ])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "slow_refund", { order_id: "o1" }), call("b", "slow_refund", { order_id: "o1" })] },
      { text: "ok" }
    ]))))

  it.effect("a non-idempotent tool emitted twice runs twice", () =>
    Effect.gen(function*() {
      let runs = 0
      const note = Tool.make("add_note", { description: "Note.", input: { text: Schema.String }, timeout: "1 second" }, () =>
        Effect.sync(() => ++runs))
      const result = yield* Agent.run(Agent.make({ tools: [note] }), "note")
      assert.strictEqual(runs, 2)
      assert.deepStrictEqual(result.toolCalls.map((c) => c.cached), [false, false])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "add_note", { text: "x" }), call("b", "add_note", { text: "x" })] },
      { text: "ok" }
    ]))))

  it.effect("a failed idempotent call is reused, not re-run", () =>
    Effect.gen(function*() {
      let runs = 0
      const broken = Tool.make("charge", {
        description: "Charge.",
        input: { amount: Schema.Number },
        timeout: "1 second",
        idempotent: true
      }, () => Effect.suspend(() => Effect.fail(new Declined({ message: `declined (attempt ${++runs})` }))))
      const result = yield* Agent.run(Agent.make({ tools: [broken] }), "charge")
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.cached, c.result.error]), [
        [false, "Declined: declined (attempt 1)"],
        [true, "Declined: declined (attempt 1)"]
      ])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "charge", { amount: 5 })] },
      { toolCalls: [call("b", "charge", { amount: 5 })] },
      { text: "ok" }
    ]))))

  it.effect("a new run starts with an empty cache", () =>
    Effect.gen(function*() {
      const { runs, tool } = refundTool()
      const agent = Agent.make({ tools: [tool] })
      const first = yield* Agent.run(agent, "one")
      const second = yield* Agent.run(agent, "two")
      assert.strictEqual(runs.count, 2)
      assert.isFalse(first.toolCalls[0]!.cached)
      assert.isFalse(second.toolCalls[0]!.cached)
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "issue_refund", { order_id: "o1", amount: 1 })] },
      { text: "one" },
      { toolCalls: [call("b", "issue_refund", { order_id: "o1", amount: 1 })] },
      { text: "two" }
    ]))))
})

class OutOfStock extends Schema.TaggedError<OutOfStock>()("OutOfStock", { message: Schema.String }) {}

describe("Agent: errors go back to the model (design: The loop)", () => {
  it.effect("a failing tool, an unknown tool and malformed arguments reach the next request; the run completes", () =>
    Effect.gen(function*() {
      const reserve = Tool.make("reserve", { description: "Reserve.", input: { sku: Schema.String }, timeout: "1 second" }, (
        { sku }
      ) => Effect.fail(new OutOfStock({ message: `${sku} is out of stock` })))
      const lookup = Tool.make("lookup", { description: "Lookup.", input: { sku: Schema.String }, timeout: "1 second" }, () =>
        Effect.succeed("found"))
      const result = yield* Agent.run(Agent.make({ tools: [reserve, lookup] }), "buy")
      assert.strictEqual(result.output, "sorry")
      const [, second] = yield* requests
      assert.deepStrictEqual(resultsOf(second), [
        "a!OutOfStock: sku-1 is out of stock",
        "b!refund: no such tool; the available tools are reserve, lookup",
        "c!lookup: invalid input: not valid JSON (Expected property name or '}' in JSON at position 1)"
      ])
      assert.deepStrictEqual(result.toolCalls.map((c) => c.result.failure?._tag), ["HandlerFailed", "UnknownTool", "InvalidInput"])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "reserve", { sku: "sku-1" }), call("b", "refund"), call("c", "lookup", "{sku")] },
      { text: "sorry" }
    ]))))

  it.effect("the toolkit's limits check runs at the first run, which fails with the ManifestError", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [Tool.make("finish", { description: "x", input: {}, timeout: "1 second" }, () => Effect.void)] })
      const error = yield* Effect.flip(Agent.run(agent, "go"))
      assert.strictEqual(error._tag, "ManifestError")
      assert.deepStrictEqual(yield* requests, [])
    }).pipe(Effect.provide(LanguageModel.layerScripted([]))))

  it.effect("a model that never stops ends in MaxStepsExceeded carrying the partial record", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(Agent.make({ tools: [Builtins.getTodayDate], maxSteps: 3 }), "loop"))
      assert.strictEqual(error._tag, "MaxStepsExceeded")
      if (error._tag !== "MaxStepsExceeded") return
      assert.strictEqual(error.maxSteps, 3)
      assert.strictEqual(error.partial.steps, 3)
      assert.deepStrictEqual(error.partial.toolCalls.map((c) => c.id), ["d1", "d2", "d3"])
    }).pipe(Effect.provide(LanguageModel.layerScripted(
      [(request) => ({ toolCalls: [call(`d${request.messages.filter((m) => m._tag === "AssistantMessage").length + 1}`, "get_today_date")] })],
      { repeat: true }
    ))))
})

describe("Agent: built-ins (design: Built-ins)", () => {
  it.effect("task_complete ends the run with its argument, after the calls beside it", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("1 day")
      const result = yield* Agent.run(Agent.make({ tools: [Builtins.getTodayDate], completion: "explicit" }), "date?")
      assert.strictEqual(result.output, "It is 1970-01-02")
      assert.deepStrictEqual(result.toolCalls.map((c) => [c.name, c.result.value]), [
        ["get_today_date", "1970-01-02"],
        ["task_complete", "It is 1970-01-02"]
      ])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "get_today_date"), call("b", "task_complete", { result: "It is 1970-01-02" })] }
    ]))))

  it.effect("a plain-text reply gets the reminder and the run goes on", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(Agent.make({ tools: [], completion: "explicit" }), "hi")
      assert.strictEqual(result.output, "bye")
      assert.strictEqual(result.steps, 2)
      const [, second] = yield* requests
      const last = second!.messages[second!.messages.length - 1]!
      assert.deepStrictEqual(last, { _tag: "UserMessage", text: Builtins.reminder })
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { text: "thinking out loud" },
      { toolCalls: [call("z", "task_complete", { result: "bye" })] }
    ]))))

  it.effect("ask_user is answered by the test UserPrompt, and says so when there is none", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [], completion: "explicit" })
      const script = LanguageModel.layerScripted([
        { toolCalls: [call("q", "ask_user", { question: "Which order?" })] },
        (request) => ({ toolCalls: [call("done", "task_complete", { result: resultsOf(request).join(",") })] })
      ])
      const answered = yield* Agent.run(agent, "help").pipe(
        Effect.provide(Layer.merge(script, UserPrompt.layerTest(["ord-4821"])))
      )
      assert.strictEqual(answered.output, "q=\"ord-4821\"")
      const unanswered = yield* Agent.run(agent, "help").pipe(Effect.provide(script))
      assert.strictEqual(unanswered.output, "q!no user is available to answer")
    }))

  it.effect("get_today_date returns the TestClock's date", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(Date.UTC(2026, 10, 30, 23, 59))
      const result = yield* Invocation.run(Builtins.getTodayDate, "{}")
      assert.strictEqual(result.value, "2026-11-30")
    }))
})

describe("UserPrompt.layerTerminal", () => {
  it.effect("shows the question on the terminal and returns the line read", () =>
    Effect.gen(function*() {
      const shown: Array<string> = []
      const terminal = Terminal.Terminal.of({
        columns: Effect.succeed(80),
        rows: Effect.succeed(24),
        isTTY: Effect.succeed(true),
        readInput: Effect.die("not used"),
        readLine: Effect.succeed("ord-4821"),
        display: (text) => Effect.sync(() => void shown.push(text))
      })
      const answer = yield* Effect.flatMap(UserPrompt.UserPrompt, (prompt) => prompt.ask("Which order?")).pipe(
        Effect.provide(UserPrompt.layerTerminal.pipe(Layer.provide(Layer.succeed(Terminal.Terminal, terminal))))
      )
      assert.strictEqual(answer, "ord-4821")
      assert.deepStrictEqual(shown, ["Which order?\n> "])
    }))
})

describe("Agent.stream", () => {
  it.effect("yields turn, calls started, calls finished, turn, text delta, text, done for a two-turn run", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [sleeper("fast", 1), sleeper("slow", 2)] })
      const fiber = yield* Effect.fork(Stream.runCollect(Agent.stream(agent, "go")))
      yield* TestClock.adjust("10 millis")
      const events = Chunk.toReadonlyArray(yield* Fiber.join(fiber))
      assert.deepStrictEqual(
        events.map((e) =>
          e._tag === "ToolCallStarted"
            ? `started ${e.id}`
            : e._tag === "ToolCallFinished"
            ? `finished ${e.call.id}`
            : e._tag === "TurnStarted"
            ? `turn ${e.step}`
            : e._tag === "Text"
            ? `text ${e.text}`
            : e._tag === "TextDelta"
            ? `delta ${e.text}`
            : e._tag === "Done"
            ? `done ${e.result.output}`
            : e._tag
        ),
        [
          "turn 1",
          "TurnCompleted",
          "started a",
          "started b",
          "finished a",
          "finished b",
          "turn 2",
          "delta all done",
          "TurnCompleted",
          "text all done",
          "done all done"
        ]
      )
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "fast"), call("b", "slow")] },
      { text: "all done" }
    ]))))

  it.effect("ends with the run's error", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Stream.runCollect(Agent.stream(Agent.make({ tools: [] }), "go")))
      assert.isTrue(Exit.isFailure(exit))
      assert.match(String(exit), /scripted model: the script has 0 turn\(s\) and request 1 came in/)
    }).pipe(Effect.provide(LanguageModel.layerScripted([]))))
})

const fastRetry = Timing.layer({ modelRetry: Schedule.exponential("100 millis").pipe(Schedule.intersect(Schedule.recurs(4))) })

describe("Agent: model failures", () => {
  const flaky = (failures: Array<LanguageModel.ModelError>) =>
    LanguageModel.layerScripted([
      ...failures.map((error) => () => Effect.fail(error)),
      { text: "recovered" }
    ])

  it.effect("two transient failures, then success, complete the run after the backoff", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(Agent.run(Agent.make({ tools: [] }), "go"))
      yield* TestClock.adjust("99 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fiber)
      assert.strictEqual(result.output, "recovered")
      assert.strictEqual((yield* requests).length, 3)
    }).pipe(Effect.provide(Layer.merge(
      flaky([
        new LanguageModel.ModelError({ message: "overloaded", transient: true, status: 529 }),
        new LanguageModel.ModelError({ message: "rate limited", transient: true, status: 429 })
      ]),
      fastRetry
    ))))

  it.effect("a non-transient failure fails the run with the typed error, without retrying", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(Agent.make({ tools: [] }), "go"))
      assert.strictEqual(error._tag, "ModelError")
      assert.strictEqual(error.message, "bad request: tools[0] is invalid")
      assert.strictEqual((yield* requests).length, 1)
    }).pipe(Effect.provide(Layer.merge(
      flaky([new LanguageModel.ModelError({ message: "bad request: tools[0] is invalid", transient: false, status: 400 })]),
      fastRetry
    ))))
})

/** A span that keeps what it is told, for assertions. */
class RecordedSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly traceId = "trace-1"
  readonly sampled = true
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink>
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind,
    readonly spanId: string
  ) {
    this.links = [...links]
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute(key: string, value: unknown) {
    this.attributes.set(key, value)
  }
  event() {}
  addLinks(links: ReadonlyArray<Tracer.SpanLink>) {
    this.links.push(...links)
  }
}

describe("Agent: spans (design: Observability)", () => {
  it.effect("a run is one span, with a child span per model turn and per tool call", () => {
    const spans: Array<Tracer.Span> = []
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind) => {
        const span = new RecordedSpan(name, parent, context, links, startTime, kind, `span-${spans.length + 1}`)
        spans.push(span)
        return span
      },
      context: (f) => f()
    })
    return Effect.gen(function*() {
      const add = Tool.make("add", { description: "Add.", input: { a: Schema.Number }, timeout: "1 second", idempotent: true }, ({ a }) =>
        Effect.succeed(a))
      yield* Agent.run(Agent.make({ name: "calc", tools: [add] }), "go").pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(spans.map((s) => s.name), [
        "invoke_agent calc",
        "chat scripted",
        "execute_tool add",
        "execute_tool add",
        "chat scripted"
      ])
      const [run, ...children] = spans
      assert.isTrue(Option.isNone(run!.parent))
      for (const span of children) {
        assert.strictEqual(Option.getOrUndefined(span.parent)?.spanId, run!.spanId, span.name)
        assert.strictEqual(span.status._tag, "Ended", span.name)
      }
      assert.deepStrictEqual(
        children.filter((s) => s.name === "execute_tool add").map((s) => [
          s.attributes.get("gen_ai.tool.call.id"),
          s.attributes.get("agent_tools.reused")
        ]),
        [["a", false], ["b", true]]
      )
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [call("a", "add", { a: 1 }), call("b", "add", { a: 1 })] },
      { text: "2" }
    ])))
  })

  it.effect("with no tracer installed no span is made (nobody would read it); a tracer installed gets them all", () => {
    const seen: Array<string> = []
    const probe = Tool.make("probe", { description: "Reports the span it runs in.", input: {}, timeout: "1 second" }, () =>
      Effect.map(Effect.option(Effect.currentSpan), (span) => {
        seen.push(Option.match(span, { onNone: () => "none", onSome: (s) => s.name }))
        return "ok"
      }))
    const agent = Agent.make({ name: "probe", tools: [probe] })
    const script = LanguageModel.layerScripted([{ toolCalls: [call("a", "probe", {})] }, { text: "done" }], { repeat: true })
    const names: Array<string> = []
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind) => {
        names.push(name)
        return new RecordedSpan(name, parent, context, links, startTime, kind, `span-${names.length}`)
      },
      context: (f) => f()
    })
    return Effect.gen(function*() {
      yield* Agent.run(agent, "go")
      yield* Invocation.run(probe, {})
      assert.deepStrictEqual(seen, ["none", "none"])
      yield* Agent.run(agent, "go").pipe(Effect.withTracer(tracer))
      yield* Invocation.run(probe, {}).pipe(Effect.withTracer(tracer))
      assert.deepStrictEqual(seen.slice(2), ["execute_tool probe", "execute_tool probe"])
      assert.deepStrictEqual(names, ["invoke_agent probe", "chat scripted", "execute_tool probe", "chat scripted", "execute_tool probe"])
    }).pipe(Effect.provide(script))
  })
})

describe("Model.layer", () => {
  it.effect("turns \"scripted\" into the scripted model and refuses unknown strings, listing the known ones", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(Agent.make({ tools: [] }), "hi").pipe(
        Effect.provide(Model.layer("scripted", { script: [{ text: "hello" }] }))
      )
      assert.strictEqual(result.output, "hello")
      const error = yield* Effect.flip(Agent.run(Agent.make({ tools: [] }), "hi").pipe(Effect.provide(Model.layer("gpt-5"))))
      assert.strictEqual(error._tag, "UnknownModel")
      assert.strictEqual(
        error.message,
        "unknown model \"gpt-5\"; the known models are scripted, anthropic:<model>, openai:<model>, openai-responses:<model>, google:<model>, bedrock:<model>, openrouter:<model>"
      )
    }))
})

describe("the scripted model, per conversation", () => {
  const echo = Tool.make("echo", { description: "Echo.", input: { x: Schema.String }, timeout: "5 seconds" }, ({ x }) =>
    Effect.succeed(x))
  const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
    { toolCalls: [call("c1", "echo", { x: "once" })] },
    (request) => ({ text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join() })
  ]

  it.effect("Model.layer(\"scripted\"): every run follows the script from its first turn, many runs, interleaved too", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [echo] })
      const outputs = yield* Effect.all(Array.from({ length: 5 }, () => Agent.run(agent, "go")), { concurrency: 5 })
      assert.deepStrictEqual(outputs.map((r) => r.output), Array.from({ length: 5 }, () => "\"once\""))
      const again = yield* Agent.run(agent, "go")
      assert.strictEqual(again.output, "\"once\"")
    }).pipe(Effect.provide(Model.layer("scripted", { script }))))

  it.effect("layerScripted with perConversation and keepRequests: false keeps no request", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [echo] })
      for (let i = 0; i < 3; i++) assert.strictEqual((yield* Agent.run(agent, "go")).output, "\"once\"")
      assert.strictEqual((yield* (yield* LanguageModel.Scripted).requests).length, 0)
    }).pipe(Effect.provide(LanguageModel.layerScripted(script, { perConversation: true, keepRequests: false }))))
})

describe("Agent.runPromise", () => {
  it("runs outside Effect", async () => {
    const result = await Agent.runPromise(Agent.make({ tools: [] }), "hi", LanguageModel.layerScripted([{ text: "hello" }]))
    assert.strictEqual(result.output, "hello")
  })
})

