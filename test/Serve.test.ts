// @effect-diagnostics globalErrorInEffectFailure:off
import { assert, describe, it } from "@effect/vitest"
import {
  Clock,
  ConfigProvider,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  LogLevel,
  Option,
  Schedule,
  Schema,
  Scope,
  Stream,
  TestClock
} from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Idempotency, LanguageModel, Timing, Tool, ToolContext, Toolkit, ToolResult } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Protocol } from "../src/exports/protocol.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { claimsFile, dropClaimsTable, readOnly } from "./support/claimsFile.js"
import { record } from "./support/figures.js"
import { resultsText } from "./support/platform.js"

/** A fresh SQLite file in a temp folder, removed with the scope. */
const tempFile = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-serve-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (dir) => join(dir, "claims.sqlite")
)

const tokens = new Map([["tok-1", "agent-1"], ["tok-2", "agent-2"]])

const settings = (values: Record<string, string>) =>
  Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(values))))

const agentOneSettings = { AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-1" }
const agentOne = settings(agentOneSettings)

// Deterministic timing: heartbeats every 60 s exactly, redelivery every 10 s.
const policy = Timing.layer({
  heartbeat: Schedule.spaced("60 seconds"),
  redelivery: Schedule.spaced("10 seconds"),
  reconnect: Schedule.spaced("1 second").pipe(Schedule.intersect(Schedule.recurs(5))),
  dedupeSweep: Schedule.spaced("1 second")
})

/** The platform in process with a scripted model, a client for it, and the settings of agent-1. */
const inProcess = (script: ReadonlyArray<LanguageModel.ScriptedTurn> = [], config = agentOne) =>
  PlatformClient.layerTest.pipe(
    Layer.provideMerge(
      PlatformServer.layerHandlers({ tokens }).pipe(Layer.provide(LanguageModel.layerScripted(script, { repeat: false })))
    ),
    Layer.provideMerge(policy),
    Layer.provide(config)
  )

const lookup = Tool.make("lookup", { description: "Look up.", input: { id: Schema.String }, timeout: "30 seconds" }, ({ id }) =>
  Effect.succeed(`found ${id}`))
const other = Tool.make("other", { description: "Other.", input: {}, timeout: "30 seconds" }, () => Effect.succeed("other"))

const calls = (agentId = "agent-1") => Effect.flatMap(PlatformServer.PlatformState, (state) => state.lifecycleCalls(agentId))

describe("Serve: lifecycle (design: Serving)", () => {
  it.effect("registers once, then heartbeats every 60 s: 3 after 180 s", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(lookup)
      yield* Serve.makeConfig(toolkit)
      assert.deepStrictEqual(yield* calls(), { register: 1, heartbeat: 0, deregister: 0 })
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* calls()).heartbeat, 0)
      yield* TestClock.adjust("121 seconds")
      assert.deepStrictEqual(yield* calls(), { register: 1, heartbeat: 3, deregister: 0 })
    }).pipe(Effect.scoped, Effect.provide(inProcess())))

  it.effect("republishes when a tool is added: a new manifest hash, seen by the platform", () =>
    Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      const state = yield* PlatformServer.PlatformState
      const before = yield* served.manifestHash
      assert.deepStrictEqual(yield* state.manifestHashes("agent-1"), [before])
      const bigger = yield* Toolkit.make(lookup, other)
      yield* served.republish(bigger)
      const after = yield* served.manifestHash
      assert.notStrictEqual(after, before)
      assert.strictEqual(after, Serve.manifestHash(bigger))
      assert.deepStrictEqual(yield* state.manifestHashes("agent-1"), [after])
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), ["lookup", "other"])
    }).pipe(Effect.scoped, Effect.provide(inProcess())))

  it.effect("interruption deregisters, and so does the stop signal", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(lookup)
      const interrupted = yield* Effect.fork(Serve.serveConfig(toolkit))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* calls()).register, 1)
      yield* Fiber.interrupt(interrupted)
      assert.strictEqual((yield* calls()).deregister, 1)

      const stop = yield* Deferred.make<void>()
      const stopped = yield* Effect.fork(Serve.serveConfig(toolkit, { stop: Deferred.await(stop) }))
      yield* TestClock.adjust("1 second")
      yield* Deferred.succeed(stop, undefined)
      const exit = yield* Fiber.await(stopped)
      assert.isTrue(Exit.isSuccess(exit))
      assert.deepStrictEqual(yield* calls(), { register: 2, heartbeat: 0, deregister: 2 })
      const state = yield* PlatformServer.PlatformState
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), [])
    }).pipe(Effect.scoped, Effect.provide(inProcess())))

  it.effect("an interruption while the register call is in flight deregisters: the platform recorded it, its answer was still on the way", () => {
    const recorded = Deferred.unsafeMake<void>(undefined as never)
    // A client whose register call reaches the platform, whose answer never comes back (a SIGINT lands then).
    const slowAnswer = Layer.effect(
      PlatformClient.PlatformClient,
      Effect.map(PlatformClient.PlatformClient, (client) => ({
        ...client,
        register: (payload: Parameters<typeof client.register>[0]) =>
          Effect.zipRight(client.register(payload), Effect.zipRight(Deferred.succeed(recorded, undefined), Effect.never))
      }))
    )
    return Effect.gen(function*() {
      const fiber = yield* Effect.fork(Serve.serveConfig(yield* Toolkit.make(lookup)))
      yield* Deferred.await(recorded)
      const state = yield* PlatformServer.PlatformState
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), ["lookup"])
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(yield* calls(), { register: 1, heartbeat: 0, deregister: 1 })
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), [])
    }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(slowAnswer, inProcess())))
  })

  it.effect("a refused registration is not undone: no deregistration follows it", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(lookup)
      const sneaky: Toolkit.Toolkit = {
        ...toolkit,
        manifest: [new Toolkit.ManifestEntry({ ...toolkit.manifest[0]!, name: "finish" })]
      }
      const error = yield* Effect.flip(Serve.serveConfig(sneaky))
      assert.strictEqual(error._tag, "ManifestRejected")
      assert.deepStrictEqual(yield* calls(), { register: 1, heartbeat: 0, deregister: 0 })
    }).pipe(Effect.scoped, Effect.provide(inProcess())))

  it.effect("a manifest the platform rejects fails serve at once with the violations", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(lookup)
      // Skip the local check, as a process with other rules (or a bug) would.
      const sneaky: Toolkit.Toolkit = {
        ...toolkit,
        manifest: [new Toolkit.ManifestEntry({ ...toolkit.manifest[0]!, name: "finish", timeoutMillis: 0 })]
      }
      const error = yield* Effect.flip(Serve.serveConfig(sneaky))
      assert.strictEqual(error._tag, "ManifestRejected")
      if (error._tag !== "ManifestRejected") return
      assert.deepStrictEqual(error.violations.map((v) => v.rule), ["name-reserved", "timeout-range"])
    }).pipe(Effect.scoped, Effect.provide(inProcess())))

  it.effect("beats on the platform's interval: a platform at 2 s sees a process whose local default is 60 s", () =>
    Effect.gen(function*() {
      yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      const state = yield* PlatformServer.PlatformState
      // Silence for 3 of the platform's intervals (6 s) hides the tools; the local default would beat after 48-72 s.
      for (let second = 2; second <= 120; second += 2) {
        yield* TestClock.adjust("2 seconds")
        assert.deepStrictEqual(yield* state.visibleTools("agent-1"), ["lookup"], `visible at ${second} s`)
      }
      assert.isAtLeast((yield* calls()).heartbeat, 60)
    }).pipe(
      Effect.scoped,
      Effect.provide(PlatformClient.layerTest.pipe(
        Layer.provideMerge(
          // A budget for a beat every 2 s (the default, 30 a minute, is for 60 s).
          PlatformServer.layerHandlers({ tokens, heartbeatInterval: "2 seconds", lifecycleBudget: 100 }).pipe(
            Layer.provide(LanguageModel.layerScripted([], { repeat: false }))
          )
        ),
        Layer.provide(agentOne)
      ))
    ))

  it.effect("without an interval in the answer (an older platform) beats on Timing's; a re-registration's answer wins", () => {
    // What the platform says at registration, as an older or a restarted platform would.
    const said: { millis: number | undefined } = { millis: undefined }
    const answering = Layer.effect(
      PlatformClient.PlatformClient,
      Effect.map(PlatformClient.PlatformClient, (client) => ({
        ...client,
        register: (payload: Parameters<typeof client.register>[0]) =>
          Effect.as(client.register(payload), { heartbeatIntervalMillis: said.millis })
      }))
    )
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual((yield* calls()).heartbeat, 1, "Timing's 60 s")
      yield* TestClock.adjust("30 seconds")
      // A registration whose answer says 10 s: the wait for the old beat ends, the next comes 10 s on.
      said.millis = 10_000
      yield* served.republish(yield* Toolkit.make(lookup, other))
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual((yield* calls()).heartbeat, 2, "the new interval at once")
      yield* TestClock.adjust("40 seconds")
      assert.strictEqual((yield* calls()).heartbeat, 6)
      // The next answer says nothing again: back to Timing's 60 s (the sooner of it and nothing).
      said.millis = undefined
      yield* served.republish(yield* Toolkit.make(lookup))
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* calls()).heartbeat, 6)
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* calls()).heartbeat, 7)
    }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(answering, inProcess())))
  })

  it.effect("two heartbeat failures are survived; the third fails serve", () => {
    const failing = { on: false }
    // A client whose heartbeats fail while `failing.on`, as when the connection is away.
    const flaky = Layer.effect(
      PlatformClient.PlatformClient,
      Effect.map(PlatformClient.PlatformClient, (client) => ({
        ...client,
        heartbeat: (payload: Parameters<typeof client.heartbeat>[0]) =>
          failing.on
            ? Effect.fail(new PlatformClient.PlatformUnavailable({ message: "the platform is unreachable (Protocol)" }))
            : client.heartbeat(payload)
      }))
    )
    return Effect.gen(function*() {
      const fiber = yield* Effect.fork(Serve.serveConfig(yield* Toolkit.make(lookup)))
      yield* TestClock.adjust("60 seconds")
      failing.on = true
      yield* TestClock.adjust("120 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "two failures are survived")
      failing.on = false
      yield* TestClock.adjust("60 seconds")
      failing.on = true
      yield* TestClock.adjust("120 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "a success resets the count")
      yield* TestClock.adjust("60 seconds")
      const error = yield* Effect.flip(Fiber.join(fiber))
      assert.strictEqual(error._tag, "PlatformUnavailable")
      record({ suite: "faults", measure: "heartbeat failures in a row survived (twice), the third fails serve", value: "2, 2, then failed", expected: "2, 2, then failed" })
    }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(flaky, inProcess())))
  })

  it.effect("an answer whose call dies (a defect of the platform's) does not stop the answers: the call comes again and is answered", () => {
    const sends = { count: 0 }
    // A client whose first CompleteToolCall dies, as one cut short under a platform that lost its database.
    const dying = Layer.effect(
      PlatformClient.PlatformClient,
      Effect.map(PlatformClient.PlatformClient, (client) => ({
        ...client,
        completeToolCall: (payload: Parameters<typeof client.completeToolCall>[0]) =>
          ++sends.count === 1 ? Effect.die(new Error("the platform could not run CompleteToolCall")) : client.completeToolCall(payload)
      }))
    )
    const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
      { toolCalls: [{ id: "c1", name: "lookup", arguments: `{"id":"ord-1"}` }] },
      (request) => ({ text: resultsText(request) })
    ]
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      const run = yield* Effect.fork(served.runTask("go"))
      // The answer died; the platform delivers the call again after 10 s, and this answer goes through.
      yield* TestClock.adjust("11 seconds")
      const output = yield* Fiber.join(run)
      assert.strictEqual(output, `c1:"found ord-1"`)
      assert.strictEqual(sends.count, 2)
    }).pipe(Effect.scoped, Effect.provide(Layer.provideMerge(dying, inProcess(script))))
  })

  it.effect("a missing AGENT_ID, PLATFORM_TOKEN or PLATFORM_URL fails before connecting, naming it", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(lookup)
      const noAgent = yield* Effect.gen(function*() {
        const error = yield* Effect.flip(Serve.serveConfig(toolkit))
        assert.strictEqual((yield* calls()).register, 0)
        return error
      }).pipe(Effect.provide(inProcess([], settings({ PLATFORM_TOKEN: "tok-1" }))))
      const noToken = yield* Effect.flip(
        Serve.serveConfig(toolkit).pipe(Effect.provide(inProcess([], settings({ AGENT_ID: "agent-1" }))))
      )
      const noUrl = yield* Effect.flip(
        Serve.serveConfig(toolkit).pipe(
          Effect.provide(Layer.provideMerge(PlatformClient.layer, settings({ AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-1" })))
        )
      )
      assert.deepStrictEqual([noAgent, noToken, noUrl].map((e) => [e._tag, e.message]), [
        ["MissingSetting", "AGENT_ID is not set"],
        ["MissingSetting", "PLATFORM_TOKEN is not set"],
        ["MissingSetting", "PLATFORM_URL is not set"]
      ])
    }))
})

describe("Serve: the store from IDEMPOTENCY_DB (design: Delivery dedupe)", () => {
  it.effect("a store that cannot be opened fails serve before registration, naming the path", () => {
    const path = "/no-such-dir-agent-tools/claims.sqlite"
    return Effect.gen(function*() {
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(lookup)))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.include(error.message, path)
      assert.strictEqual((yield* calls()).register, 0)
    }).pipe(
      Effect.provide(inProcess([], settings({ AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-1", IDEMPOTENCY_DB: path })))
    )
  })

  it.live("a PostgreSQL URL whose server does not answer fails serve before registration, naming it without its password", () => {
    const url = "postgres://agents:s3cret-pw@127.0.0.1:1/agents"
    return Effect.gen(function*() {
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(lookup)))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.include(error.message, "the idempotency store postgres://***:***@127.0.0.1:1/agents cannot be used: ")
      assert.notInclude(error.message, "s3cret-pw")
      assert.strictEqual((yield* calls()).register, 0)
    }).pipe(
      Effect.provide(inProcess([], settings({ AGENT_ID: "agent-1", PLATFORM_TOKEN: "tok-1", IDEMPOTENCY_DB: url })))
    )
  })

  type Spoil = <A, E, R>(file: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  const spoiled: ReadonlyArray<readonly [string, Spoil]> = [
    ["read-only", readOnly],
    ["whose claims table was dropped", (file, effect) => Effect.zipRight(dropClaimsTable(file), effect)]
  ]
  for (const [what, spoil] of spoiled) {
    it.effect(`a store file ${what} fails serve before registration, naming it`, () =>
      Effect.scoped(Effect.gen(function*() {
        const file = yield* claimsFile
        const { error, registrations } = yield* spoil(
          file,
          Effect.gen(function*() {
            const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(lookup)))
            return { error, registrations: (yield* calls()).register }
          }).pipe(Effect.provide(inProcess([], settings({ ...agentOneSettings, IDEMPOTENCY_DB: file }))))
        )
        assert.strictEqual(error._tag, "StoreUnavailable")
        assert.include(error.message, `the idempotency store ${file} cannot be used: a claim cannot be written`)
        assert.strictEqual(registrations, 0)
      })))
  }
})

describe("Platform rules (design: The platform)", () => {
  it.effect("a token used for another agent is refused", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(lookup)))
      assert.strictEqual(error._tag, "Unauthorized")
      assert.strictEqual(error.message, "the token is not valid for agent agent-2")
    }).pipe(Effect.scoped, Effect.provide(inProcess([], settings({ AGENT_ID: "agent-2", PLATFORM_TOKEN: "tok-1" })))))

  it.effect("the 31st lifecycle call within a minute is refused, and serve surfaces it", () =>
    Effect.gen(function*() {
      const client = yield* PlatformClient.PlatformClient
      for (let i = 0; i < 30; i++) yield* client.heartbeat({ agentId: "agent-1", processId: "p", manifestHash: "h" })
      const error = yield* Effect.flip(Serve.serveConfig(yield* Toolkit.make(lookup)))
      assert.strictEqual(error._tag, "LifecycleBudgetExceeded")
      assert.strictEqual(error.message, "agent agent-1 made more than 30 lifecycle calls in 60 s")
      // A minute later the window has room again.
      yield* TestClock.adjust("61 seconds")
      yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      assert.strictEqual((yield* calls()).register, 1)
    }).pipe(Effect.scoped, Effect.provide(inProcess())))

  it.effect("tools of a deregistered process, and of one silent for 3 intervals, are absent from the next request", () => {
    const offered: Array<Array<string>> = []
    const script: Array<LanguageModel.ScriptedTurn> = Array.from({ length: 3 }, () => (request: LanguageModel.ModelRequest) => {
      offered.push(request.tools.map((t) => t.name))
      return { text: "ok" }
    })
    return Effect.gen(function*() {
      const client = yield* PlatformClient.PlatformClient
      const submitter = yield* Serve.makeConfig(yield* Toolkit.make(other))
      const scope = yield* Scope.make()
      yield* Serve.makeConfig(yield* Toolkit.make(lookup)).pipe(Scope.extend(scope))
      yield* submitter.runTask("one")
      yield* Scope.close(scope, Exit.void)
      yield* submitter.runTask("two")
      // A process that registered and then went silent.
      const silent = yield* Toolkit.make(Tool.make("quiet", { description: "Quiet.", input: {}, timeout: "1 second" }, () =>
        Effect.void))
      yield* client.register({
        agentId: "agent-1",
        processId: "silent",
        manifest: silent.manifest,
        manifestHash: Serve.manifestHash(silent)
      })
      yield* TestClock.adjust("180 seconds")
      const state = yield* PlatformServer.PlatformState
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), ["other", "quiet"])
      yield* TestClock.adjust("1 second")
      yield* submitter.runTask("three")
      assert.deepStrictEqual(offered, [["other", "lookup"], ["other"], ["other"]])
    }).pipe(Effect.scoped, Effect.provide(inProcess(script)))
  })

  it.effect("an ended task can still be attached: its start and its end, no call again; a late answer is accepted", () => {
    const script: Array<LanguageModel.ScriptedTurn> = [
      { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"id\":\"x\"}" }] },
      (request) => ({ text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join() })
    ]
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      const first = [...yield* Stream.runCollect(served.submitTask("go"))]
      const taskId = first[0]!.taskId
      const again = [...yield* Stream.runCollect(served.attachTask(taskId))]
      assert.deepStrictEqual(again.map((e) => e._tag), ["TaskStarted", "TaskCompleted"])
      assert.deepStrictEqual(again[1], first[first.length - 1])
      assert.strictEqual(yield* served.runAttached(taskId), "\"found x\"")
      const client = yield* PlatformClient.PlatformClient
      yield* client.completeToolCall({
        agentId: "agent-1",
        processId: served.processId,
        results: [{ taskId, toolCallId: "c1", result: ToolResult.ToolResult.failure("late") }]
      })
    }).pipe(Effect.scoped, Effect.provide(inProcess(script)))
  })
})

describe("Serve: delivery dedupe (design: Delivery dedupe) and retries", () => {
  it.effect("a redelivery while the first still runs joins it: the handler runs once, both get the result", () => {
    let runs = 0
    const slow = Tool.make("slow", { description: "Slow.", input: {}, output: Schema.String, timeout: "60 seconds" }, () =>
      Effect.suspend(() => Effect.as(Effect.sleep("25 seconds"), `run ${++runs}`)))
    const script: Array<LanguageModel.ScriptedTurn> = [
      { toolCalls: [{ id: "c1", name: "slow", arguments: "{}" }] },
      (request) => ({ text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join() })
    ]
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(slow))
      const events: Array<Protocol.TaskEvent> = []
      const fiber = yield* Effect.fork(Stream.runForEach(served.submitTask("go"), (event) => Effect.sync(() => events.push(event))))
      yield* TestClock.adjust("30 seconds")
      yield* Fiber.join(fiber)
      const requested = events.flatMap((e) => e._tag === "ToolCallRequested" ? [[e.toolCallId, e.deadlineAt]] : [])
      // Delivered at 0, again at 10 s and 20 s while the first still ran: same id, same deadline.
      assert.deepStrictEqual(requested, [["c1", 60_000], ["c1", 60_000], ["c1", 60_000]])
      assert.strictEqual(runs, 1)
      assert.deepStrictEqual(events.map((e) => e._tag), [
        "TaskStarted",
        "TurnStarted",
        "ToolCallRequested",
        "ToolCallRequested",
        "ToolCallRequested",
        "ToolCallCompleted",
        "TurnStarted",
        "ModelText",
        "TaskCompleted"
      ])
      const last = events[events.length - 1]!
      assert.deepStrictEqual(last, {
        _tag: "TaskCompleted",
        taskId: last.taskId,
        offset: last.offset,
        output: "\"run 1\"",
        steps: 2,
        usage: { inputTokens: 0, outputTokens: 0 }
      })
    }).pipe(Effect.scoped, Effect.provide(inProcess(script)))
  })

  it.effect("retries inside a served call see attempt 1..n", () => {
    const attempts: Array<number> = []
    const flaky = Tool.make("flaky", { description: "Flaky.", input: {}, timeout: "60 seconds", retries: 2 }, () =>
      Effect.flatMap(ToolContext.ToolContext, (ctx) => {
        attempts.push(ctx.attempt)
        return ctx.attempt < 3 ? Effect.fail(new Error("not yet")) : Effect.succeed("ok")
      }))
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(flaky))
      const fiber = yield* Effect.fork(served.runTask("go"))
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(fiber), "done")
      assert.deepStrictEqual(attempts, [1, 2, 3])
    }).pipe(Effect.scoped, Effect.provide(inProcess([{ toolCalls: [{ id: "c1", name: "flaky", arguments: "{}" }] }, { text: "done" }])))
  })

  it.effect("a call for a tool only another process registered runs on that process (design: The platform)", () => {
    const script: Array<LanguageModel.ScriptedTurn> = [
      { toolCalls: [{ id: "c1", name: "lookup", arguments: "{\"id\":\"x\"}" }] },
      (request) => ({ text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join() })
    ]
    return Effect.gen(function*() {
      const submitter = yield* Serve.makeConfig(yield* Toolkit.make(other))
      const scope = yield* Scope.make()
      yield* Serve.makeConfig(yield* Toolkit.make(lookup)).pipe(Scope.extend(scope))
      const output = yield* submitter.runTask("go")
      // The submitter does not serve `lookup`: the platform gave the call to the process that does.
      assert.strictEqual(output, "\"found x\"")
    }).pipe(Effect.scoped, Effect.provide(inProcess(script)))
  })
})

describe("Serve: shutdown and restarts (design: Interruption and shutdown)", () => {
  /** A refund whose body takes `body`; records when it started, ended or was interrupted (Clock ms). */
  const slowRefund = (options: { readonly body: Duration.DurationInput; readonly timeout: Duration.DurationInput }) => {
    const log: Array<string> = []
    const tool = Tool.make("refund", {
      description: "Refund.",
      input: {},
      timeout: options.timeout,
      idempotent: true
    }, () =>
      Effect.gen(function*() {
        log.push(`start ${yield* Clock.currentTimeMillis}`)
        yield* Effect.sleep(options.body)
        log.push(`done ${yield* Clock.currentTimeMillis}`)
        return "refunded"
      }).pipe(Effect.onInterrupt(() => Effect.map(Clock.currentTimeMillis, (now) => void log.push(`interrupted ${now}`)))))
    return { log, tool }
  }

  /** A script: the calls of turn 1, then of turn 2..., then an answer listing every result it saw. */
  const turns = (calls: ReadonlyArray<ReadonlyArray<string>>, seen: { final?: string }) => [
    ...calls.map((names, turn) => ({
      toolCalls: names.map((name, i) => ({ id: `t${turn + 1}-${name}-${i}`, name, arguments: "{}" }))
    })),
    (request: LanguageModel.ModelRequest) => {
      seen.final = resultsText(request)
      return { text: "done" }
    }
  ]

  /** Closes `scope` in a fiber, to watch it drain on the TestClock. */
  const closing = (scope: Scope.CloseableScope) => Effect.fork(Scope.close(scope, Exit.void))

  it.effect("a call still running gets the grace period, then is interrupted; a later delivery reads outcome unknown", () => {
    const { log, tool } = slowRefund({ body: "20 seconds", timeout: "60 seconds" })
    const seen: { final?: string } = {}
    return Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(tool)
      const scope = yield* Scope.make()
      const first = yield* Serve.makeConfig(toolkit, { shutdownGrace: "5 seconds" }).pipe(Scope.extend(scope))
      const events: Array<Protocol.TaskEvent> = []
      yield* Effect.forkDaemon(Stream.runForEach(first.submitTask("refund"), (e) => Effect.sync(() => events.push(e))))
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(log, ["start 0"])
      const stopping = yield* closing(scope)
      yield* TestClock.adjust("4 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(stopping)), "still draining inside the grace period")
      assert.deepStrictEqual(log, ["start 0"])
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(stopping)
      assert.deepStrictEqual(log, ["start 0", "interrupted 6000"])
      assert.deepStrictEqual((yield* calls()).deregister, 1)
      // Another process (same store: it is in memory here) attaches: the call comes again, runs nothing.
      const second = yield* Serve.makeConfig(toolkit)
      assert.strictEqual(yield* second.runAttached(events[0]!.taskId), "done")
      assert.strictEqual(seen.final, "t1-refund-0:refund: the earlier attempt was interrupted; its outcome is unknown")
      assert.deepStrictEqual(log, ["start 0", "interrupted 6000"])
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.merge(inProcess(turns([["refund"]], seen)), Idempotency.layerMemory))
    )
  })

  it.effect("a call's earlier deadline ends the drain before the grace period does", () => {
    const { log, tool } = slowRefund({ body: "20 seconds", timeout: "3 seconds" })
    const seen: { final?: string } = {}
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const served = yield* Serve.makeConfig(yield* Toolkit.make(tool)).pipe(Scope.extend(scope))
      const task = yield* Effect.forkDaemon(served.runTask("refund"))
      yield* TestClock.adjust("1 second")
      const stopping = yield* closing(scope)
      yield* TestClock.adjust("1900 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(stopping)))
      yield* TestClock.adjust("100 millis")
      yield* Fiber.join(stopping)
      // Timed out at its deadline (3 s), not cut at the grace period's end (31 s); its answer went out.
      assert.deepStrictEqual(log, ["start 0", "interrupted 3000"])
      assert.strictEqual(yield* Fiber.join(task), "done")
      assert.strictEqual(seen.final, "t1-refund-0:refund timed out after 3 s; its outcome is unknown")
    }).pipe(Effect.scoped, Effect.provide(inProcess(turns([["refund"]], seen))))
  })

  it.effect("a delivery arriving while draining is not started; a restarted process re-attaches by itself and runs it", () => {
    const { log, tool } = slowRefund({ body: "10 seconds", timeout: "60 seconds" })
    let notes = 0
    const note = Tool.make("note", { description: "Note.", input: {}, timeout: "30 seconds" }, () =>
      Effect.sync(() => `note ${++notes}`))
    const seen: { final?: string } = {}
    const lines: Array<string> = []
    const logger = Logger.add(Logger.make(({ message }) => void lines.push(String(message))))
    return Effect.gen(function*() {
      const file = yield* tempFile
      const toolkit = yield* Toolkit.make(tool, note)
      const serving = (scope: Scope.Scope) =>
        Effect.flatMap(
          Layer.buildWithScope(Serve.layerStoreSql({ filename: file }), scope),
          (store) => Serve.makeConfig(toolkit).pipe(Effect.provide(store), Scope.extend(scope))
        )
      const scope = yield* Scope.make()
      const first = yield* serving(scope)
      const follower = yield* Effect.forkDaemon(first.runTask("refund, then note"))
      yield* TestClock.adjust("1 second")
      const stopping = yield* closing(scope)
      // The refund completes inside the grace period and its answer goes out; the model's next
      // call (note) arrives while draining: not started.
      yield* TestClock.adjust("10 seconds")
      yield* Fiber.join(stopping)
      yield* Fiber.interrupt(follower)
      assert.deepStrictEqual([log, notes], [["start 0", "done 10000"], 0])
      assert.isUndefined(seen.final)
      assert.include(lines, "agent agent-1: stopping: 1 call(s) drained, 0 interrupted, 1 delivery(ies) not started " +
        "(delivered again after a re-attach)")
      // The next process has the same store: it takes the task back with no task id given.
      yield* serving(yield* Effect.scope)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(notes, 1)
      assert.strictEqual(seen.final, "t1-refund-0:\"refunded\" t2-note-0:\"note 1\"")
      assert.deepStrictEqual(log, ["start 0", "done 10000"])
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(inProcess(turns([["refund"], ["note"]], seen)), logger)))
  })

  it.effect("a second attach takes the task over: the first follower stops with TaskTakenOver, the task goes on", () => {
    const { tool } = slowRefund({ body: "10 seconds", timeout: "60 seconds" })
    const seen: { final?: string } = {}
    return Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(tool)
      const first = yield* Serve.makeConfig(toolkit)
      const second = yield* Serve.makeConfig(toolkit)
      const events: Array<Protocol.TaskEvent> = []
      const following = yield* Effect.fork(Stream.runForEach(first.submitTask("refund"), (e) => Effect.sync(() => events.push(e))))
      yield* TestClock.adjust("1 second")
      const taskId = events[0]!.taskId
      const taking = yield* Effect.fork(second.runAttached(taskId))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(following)
      assert.deepStrictEqual(events[events.length - 1]?._tag, "TaskTakenOver")
      // And back: the second follower's run fails with the typed error; the third sees the end.
      const third = yield* Effect.fork(first.runAttached(taskId))
      yield* TestClock.adjust("1 second")
      const error = yield* Effect.flip(Fiber.join(taking))
      assert.strictEqual(error._tag, "TaskTakenOverError")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(third), "done")
      assert.strictEqual(seen.final, "t1-refund-0:\"refunded\"")
    }).pipe(Effect.scoped, Effect.provide(inProcess(turns([["refund"]], seen))))
  })

  it.effect("idempotent tools on the memory store: one warning at start naming IDEMPOTENCY_DB", () => {
    const lines: Array<string> = []
    const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) => {
      if (logLevel._tag === "Warning") lines.push(String(message))
    }))
    return Effect.gen(function*() {
      yield* Serve.makeConfig(yield* Toolkit.make(slowRefund({ body: "1 second", timeout: "5 seconds" }).tool, lookup))
      yield* Serve.makeConfig(yield* Toolkit.make(lookup))
      assert.strictEqual(lines.length, 1)
      assert.include(lines[0], "refund")
      assert.include(lines[0], "IDEMPOTENCY_DB")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(inProcess(), logger)))
  })
})

describe("Serve: its log lines", () => {
  /** Each line logged, and its level. */
  const capture = () => {
    const lines: Array<{ readonly level: string; readonly message: string }> = []
    const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ logLevel, message }) =>
      void lines.push({ level: logLevel.label, message: String(message) })))
    return { lines, logger }
  }

  it.effect("the registration is logged at info once the platform has answered it: tools, agent, process, interval; each heartbeat at debug", () => {
    const { lines, logger } = capture()
    // A client whose register answer takes 5 s to come back, after the platform has recorded the registration.
    const slowAnswer = Layer.effect(
      PlatformClient.PlatformClient,
      Effect.map(PlatformClient.PlatformClient, (client) => ({
        ...client,
        register: (payload: Parameters<typeof client.register>[0]) => Effect.delay(client.register(payload), "5 seconds")
      }))
    )
    const registered = () => lines.filter((line) => line.message.startsWith("agent agent-1: registered"))
    return Effect.gen(function*() {
      const making = yield* Effect.fork(Serve.makeConfig(yield* Toolkit.make(lookup, other)))
      yield* TestClock.adjust("1 second")
      assert.strictEqual((yield* calls()).register, 0)
      yield* TestClock.adjust("4 seconds")
      assert.strictEqual((yield* calls()).register, 1, "the platform has recorded it")
      const served = yield* Fiber.join(making)
      assert.deepStrictEqual(registered().map((line) => [line.level, line.message]), [[
        "INFO",
        `agent agent-1: registered 2 tool(s) (lookup, other) as ${served.processId}; ` +
        `heartbeat every 60 s (the platform's interval), or sooner on Timing's heartbeat schedule`
      ]])
      yield* TestClock.adjust("120 seconds")
      // Serve's lines, not the in-process platform's ("heartbeat from process ...").
      const beats = lines.filter((line) => line.message.startsWith("agent agent-1: heartbeat") && !line.message.includes("from"))
      assert.deepStrictEqual(beats.map((line) => [line.level, line.message]), [
        ["DEBUG", "agent agent-1: heartbeat"],
        ["DEBUG", "agent agent-1: heartbeat"]
      ])
      assert.strictEqual((yield* calls()).heartbeat, 2)
      assert.strictEqual(registered().length, 1, "a heartbeat the platform knows registers nothing again")
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.merge(Layer.provideMerge(slowAnswer, inProcess()), logger)),
      Logger.withMinimumLogLevel(LogLevel.Debug)
    )
  })

  /** A platform on a real WebSocket, in a scope of its own, and its URL. */
  const webSocketPlatform = (scope: Scope.Scope) =>
    Effect.flatMap(
      Layer.buildWithScope(
        PlatformServer.layerWebSocket({ port: 0 }).pipe(
          Layer.provideMerge(PlatformServer.layerHandlers({ tokens })),
          Layer.provide(LanguageModel.layerScripted([], { repeat: false }))
        ),
        scope
      ),
      (context) => Effect.map(Effect.provide(PlatformServer.url, context), (url) => ({ context, url }))
    )

  const websocketClient = (url: string) =>
    PlatformClient.layer.pipe(Layer.provide(settings({ ...agentOneSettings, PLATFORM_URL: url })))

  const warnings = (lines: ReadonlyArray<{ readonly level: string; readonly message: string }>) =>
    lines.filter((line) => line.level === "WARN").map((line) => line.message)

  it.live("the client's scope closing before Serve's, the platform up: the warning says this process closed it, and how to order the scopes", () => {
    const { lines, logger } = capture()
    return Effect.gen(function*() {
      const { context, url } = yield* webSocketPlatform(yield* Effect.scope)
      const toolkit = yield* Toolkit.make(lookup)
      // The mistake: Effect.scoped outermost, so the client's layer is released before Serve's scope closes.
      yield* Serve.makeConfig(toolkit).pipe(
        Effect.provide(websocketClient(url)),
        Effect.scoped,
        Effect.provide(Layer.merge(agentOne, logger))
      )
      const [warning, ...others] = warnings(lines)
      assert.deepStrictEqual(others, [])
      assert.include(warning, "agent agent-1: not deregistered: this process had closed its PlatformClient")
      assert.include(warning, "Serve.layerConfig(toolkit).pipe(Layer.provide(PlatformClient.layer))")
      assert.notInclude(warning, "the platform is gone")
      // The platform is up, and still lists the tools: nothing told it otherwise.
      const state = Context.get(context, PlatformServer.PlatformState)
      assert.deepStrictEqual(yield* state.lifecycleCalls("agent-1"), { register: 1, heartbeat: 0, deregister: 0 })
      assert.deepStrictEqual(yield* state.visibleTools("agent-1"), ["lookup"])

      // The scopes in order: the client outlives Serve, and the deregistration goes out.
      lines.length = 0
      yield* Serve.makeConfig(toolkit).pipe(Effect.scoped, Effect.provide(Layer.merge(websocketClient(url), logger)))
      assert.deepStrictEqual(warnings(lines), [])
      assert.strictEqual((yield* state.lifecycleCalls("agent-1")).deregister, 1)
    }).pipe(Effect.scoped)
  })

  it.live("the platform really gone before the deregistration: the warning says so, not that this process closed the client", () => {
    const { lines, logger } = capture()
    return Effect.gen(function*() {
      const platformScope = yield* Scope.make()
      const { url } = yield* webSocketPlatform(platformScope)
      yield* Effect.gen(function*() {
        yield* Serve.makeConfig(yield* Toolkit.make(lookup))
        yield* Scope.close(platformScope, Exit.void)
      }).pipe(Effect.scoped, Effect.provide(Layer.merge(websocketClient(url), logger)))
      const [warning, ...others] = warnings(lines)
      assert.deepStrictEqual(others, [])
      assert.match(warning!, /^agent agent-1: deregistration failed: the platform is gone \(the platform is unreachable \(.+\)\)$/)
    })
  })
})
