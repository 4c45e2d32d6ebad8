/**
 * The platform restarted mid-serve: with a journal, a restarted platform takes its
 * unfinished tasks back; the serving process reconnects, registers again and re-attaches; the
 * task completes with the right output; every call's side effect happens once and none is lost.
 */
import { SqlClient } from "@effect/sql"
import { assert, describe, it } from "@effect/vitest"
import {
  ConfigProvider,
  Context,
  Deferred,
  Effect,
  Exit,
  Fiber,
  Layer,
  Mailbox,
  Logger,
  LogLevel,
  Schedule,
  Schema,
  Scope,
  Stream
} from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer, type AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Timing, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import * as Journal from "../../src/Journal.js"
import { record, scale } from "../support/figures.js"
import { sqliteClient, unnamedClient } from "../support/sqlClient.js"
import { clientLayer, resultsText } from "../support/platform.js"
import { ToolResult } from "../../src/ToolResult.js"

const tokens = new Map([["tok-1", "agent-1"]])

const policy = Timing.layer({
  heartbeat: Schedule.spaced("100 millis"),
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(400)))
})

/** The journal in `file`, open for as long as the scope lives. */
const openJournal = (file: string) =>
  Effect.map(Layer.build(Journal.layerSql({ filename: file })), Context.get(Journal.Journal))

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-journal-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** A port free a moment ago: the platform is restarted on the same one. */
const freePort = Effect.async<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/** The step a request asks for: one more than the assistant turns it carries. */
const stepOf = (request: LanguageModel.ModelRequest) =>
  request.messages.filter((m) => m._tag === "AssistantMessage").length + 1

/** The task's script: `turns` turns of two `work` calls each, then the text of every result. */
const reply = (turns: number, request: LanguageModel.ModelRequest): LanguageModel.ScriptedReply => {
  const step = stepOf(request)
  if (step > turns) return { text: resultsText(request) }
  return {
    toolCalls: ["a", "b"].map((half) => ({
      id: `t${step}-${half}`,
      name: "work",
      arguments: JSON.stringify({ key: `t${step}-${half}` })
    }))
  }
}

const expectedOutput = (turns: number) =>
  Array.from({ length: turns }, (_, i) => ["a", "b"].map((half) => `t${i + 1}-${half}:"done t${i + 1}-${half}"`))
    .flat()
    .join(" ")

/** A platform on `port` with the journal; `model` is its instance's script. Closed by closing `scope`. */
const startPlatform = (port: number, journal: string | undefined, model: LanguageModel.ScriptedTurn) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      PlatformServer.layerWebSocket({ port }).pipe(
        Layer.provideMerge(
          PlatformServer.layerHandlers({ tokens, journal, lifecycleBudget: 1_000_000, maxSteps: 200 })
        ),
        Layer.provide(LanguageModel.layerScripted([model], { repeat: true, keepRequests: false })),
        Layer.provide(policy)
      ),
      scope
    )
    return { scope, state: Context.get(context, PlatformServer.PlatformState) }
  })

/** A serving process's client layer for `port`, as agent-1. */
const client = (port: number) => clientLayer({ url: `ws://127.0.0.1:${port}${PlatformServer.path}` }, policy)

/** Each call's side effect, by key; `hold(key)` lets a test keep a call in flight. */
const workTool = (effects: Map<string, number>, hold: (key: string) => Effect.Effect<void>) =>
  Tool.make("work", {
    description: "Does one unit of work, with a side effect.",
    input: { key: Schema.String },
    output: Schema.String,
    timeout: "30 seconds"
  }, ({ key }) =>
    Effect.gen(function*() {
      effects.set(key, (effects.get(key) ?? 0) + 1)
      yield* hold(key)
      return `done ${key}`
    }))

/** A serving process of `tool` on the platform at `port`, in a fiber: it runs one task ("go") and gives its output. */
const servingTask = (port: number, tool: ReturnType<typeof workTool>) =>
  Effect.gen(function*() {
    const served = yield* Serve.makeConfig(yield* Toolkit.make(tool))
    return yield* served.runTask("go")
  }).pipe(Effect.scoped, Effect.provide(client(port)), Effect.fork)

/** Polls until `check` holds (real time, short waits: sockets are involved). */
const eventually = <E>(check: () => Effect.Effect<boolean, E>, what: string) =>
  Effect.repeat(Effect.zipRight(Effect.sleep("20 millis"), Effect.suspend(check)), { until: (ok) => ok }).pipe(
    Effect.timeout("10 seconds"),
    Effect.orDieWith(() => new Error(`timed out waiting for ${what}`))
  )

const quiet = Logger.withMinimumLogLevel(LogLevel.Error)

describe("platform restarted mid-serve", () => {
  it.live("restarted while a call is in flight, then between two turns: the task completes, each call ran once", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = join(dir, "journal.sqlite")
      const port = yield* freePort
      const turns = 4
      const effects = new Map<string, number>()
      const inFlight = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const thinking = yield* Deferred.make<void>()
      const asked: Array<{ readonly instance: number; readonly step: number }> = []
      let instance = 1
      // Instance 2 keeps the model "thinking" on turn 4: the platform goes down between turns 3 and 4.
      const model = (me: number): LanguageModel.ScriptedTurn => (request) => {
        asked.push({ instance: me, step: stepOf(request) })
        if (me === 2 && stepOf(request) === 4) {
          return Effect.zipRight(Deferred.succeed(thinking, undefined), Effect.never)
        }
        return reply(turns, request)
      }
      const hold = (key: string) =>
        key === "t2-a" ? Effect.zipRight(Deferred.succeed(inFlight, undefined), Deferred.await(release)) : Effect.void

      let platform = yield* startPlatform(port, journal, model(instance))
      const task = yield* servingTask(port, workTool(effects, hold))

      // Restart 1: while t2-a runs in the serving process.
      yield* Deferred.await(inFlight)
      yield* Scope.close(platform.scope, Exit.void)
      platform = yield* startPlatform(port, journal, model(++instance))
      // The serving process notices (heartbeat: unknown manifest) and registers again.
      const state = platform.state
      const registered = Effect.map(state.manifestHashes("agent-1"), (hashes) => hashes.length === 1)
      yield* eventually(() => registered, "re-registration")
      yield* Deferred.succeed(release, undefined)

      // Restart 2: between turns 3 and 4 (the model was asked for turn 4 and had not answered).
      yield* Deferred.await(thinking)
      yield* Scope.close(platform.scope, Exit.void)
      platform = yield* startPlatform(port, journal, model(++instance))

      const output = yield* Fiber.join(task).pipe(Effect.timeout("20 seconds"))
      yield* Scope.close(platform.scope, Exit.void)

      assert.strictEqual(output, expectedOutput(turns))
      const keys = Array.from({ length: turns }, (_, i) => [`t${i + 1}-a`, `t${i + 1}-b`]).flat()
      assert.deepStrictEqual([...effects.keys()].sort(), keys.sort(), "every call ran: none lost")
      assert.deepStrictEqual([...effects.values()].filter((n) => n !== 1), [], "no call ran twice")
      // Instance 2 replayed turns 1 and 2 from the journal and asked only for 3 and 4; instance 3 for 4 and 5.
      assert.deepStrictEqual(asked.filter((a) => a.instance === 2).map((a) => a.step), [3, 4])
      assert.deepStrictEqual(asked.filter((a) => a.instance === 3).map((a) => a.step), [4, 5])
      const suite = "platform restart"
      record({ suite, measure: "restarts survived (in flight, between turns)", value: 2, expected: "2" })
      record({ suite, measure: "calls lost", value: keys.length - effects.size, expected: "0" })
    }).pipe(Effect.scoped, quiet), 30_000)

  it.live(`${scale(3, 30)} restarts at random points of a ${scale(6, 40)}-turn task: side effects = unique calls`, () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const journal = join(dir, "journal.sqlite")
      const port = yield* freePort
      const restarts = scale(3, 30)
      const turns = scale(6, 40)
      const effects = new Map<string, number>()
      const model: LanguageModel.ScriptedTurn = (request) => reply(turns, request)
      // Each call takes 10-60 ms: restarts land during calls, and between them. The last turn's
      // calls wait until every restart is done, so that the task cannot end before them.
      let running = 0
      const restartsDone = yield* Deferred.make<void>()
      const last = new Set([`t${turns}-a`, `t${turns}-b`])
      const hold = (key: string) =>
        last.has(key) ? Deferred.await(restartsDone) : Effect.suspend(() => {
          running++
          return Effect.ensuring(Effect.sleep(10 + Math.floor(Math.random() * 50)), Effect.sync(() => running--))
        })

      let platform = yield* startPlatform(port, journal, model)
      const task = yield* servingTask(port, workTool(effects, hold))

      let survived = 0
      let whileRunning = 0
      for (let i = 0; i < restarts; i++) {
        // Spread the restarts over the task: wait for progress, then a random moment.
        const target = Math.floor(((i + 1) * turns * 2) / (restarts + 1))
        yield* eventually(() => Effect.sync(() => effects.size >= target), `${target} calls`)
        // Half the time a random moment (a call mostly still runs), else once no call runs (between turns).
        if (Math.random() < 0.5) yield* Effect.sleep(Math.floor(Math.random() * 30))
        else yield* eventually(() => Effect.sync(() => running === 0), "a moment with no call running")
        if (running > 0 || effects.size > (turns - 1) * 2) whileRunning++
        yield* Scope.close(platform.scope, Exit.void)
        platform = yield* startPlatform(port, journal, model)
        survived++
      }
      yield* Deferred.succeed(restartsDone, undefined)
      const output = yield* Fiber.join(task).pipe(Effect.timeout("60 seconds"))
      yield* Scope.close(platform.scope, Exit.void)

      assert.strictEqual(output, expectedOutput(turns))
      const duplicated = [...effects.values()].filter((n) => n > 1).length
      assert.strictEqual(effects.size, turns * 2, "every call ran: none lost")
      assert.strictEqual(duplicated, 0, "no call ran twice")
      assert.strictEqual(survived, restarts)
      const suite = "platform restart"
      const sideEffects = [...effects.values()].reduce((a, b) => a + b, 0)
      record({ suite, measure: "restarts survived (random points)", value: survived, expected: `${restarts}` })
      record({ suite, measure: "... of which with a call running", value: whileRunning })
      record({ suite, measure: "side effects = unique calls", value: `${sideEffects} = ${effects.size}` })
      record({ suite, measure: "calls lost (random points)", value: turns * 2 - effects.size, expected: "0" })
    }).pipe(Effect.scoped, quiet), scale(60_000, 600_000))

  it.live("without a journal the restarted platform has lost the task: runTask fails saying so", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const effects = new Map<string, number>()
      const inFlight = yield* Deferred.make<void>()
      const hold = () => Effect.zipRight(Deferred.succeed(inFlight, undefined), Effect.sleep("100 millis"))
      const model: LanguageModel.ScriptedTurn = (request) => reply(1, request)
      let platform = yield* startPlatform(port, undefined, model)
      const task = yield* servingTask(port, workTool(effects, hold))
      yield* Deferred.await(inFlight)
      yield* Scope.close(platform.scope, Exit.void)
      platform = yield* startPlatform(port, undefined, model)
      const error = yield* Effect.flip(Fiber.join(task)).pipe(Effect.timeout("10 seconds"))
      yield* Scope.close(platform.scope, Exit.void)
      assert.strictEqual(error._tag, "TaskLost")
      // A task id is random (Ids' default): the restarted platform cannot mint the lost task's id again.
      assert.match(error.message, /^the platform no longer knows task task-[0-9a-f-]{36} \(it restarted without a journal/)
    }).pipe(Effect.scoped, quiet), 20_000)
})

describe("journal replay", () => {
  it.live("replays journaled turns and answers, delivers the unanswered call again, asks the model only after", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = join(dir, "journal.sqlite")
      const entry = (yield* Toolkit.make(workTool(new Map(), () => Effect.void))).manifest[0]!
      const deadlineAt = Date.now() + 20_000
      const callsOf = (step: number) =>
        ["a", "b"].map((half) => ({
          id: `t${step}-${half}`,
          name: "work",
          arguments: JSON.stringify({ key: `t${step}-${half}` })
        }))
      // What a platform had journaled when it stopped: 2 turns; t1-a, t1-b and t2-a answered; t2-b only delivered.
      yield* Effect.scoped(Effect.gen(function*() {
        const journal = yield* openJournal(file)
        const tools = [{ entry, own: true }]
        yield* journal.started({ runId: "task-x", kind: "task", agentId: "agent-1", processId: "p-old", prompt: "go", tools })
        for (const step of [1, 2]) {
          const usage = { inputTokens: 10, outputTokens: 5 }
          yield* journal.turn("task-x", step, { toolCalls: callsOf(step), finishReason: "tool_calls", usage })
          for (const call of callsOf(step)) {
            const delivery = { toolCallId: call.id, name: call.name, arguments: call.arguments, deadlineAt }
            yield* journal.callStarted("task-x", delivery)
            if (call.id !== "t2-b") {
              yield* journal.callEnded("task-x", call.id, new ToolResult(`done ${call.id}`, undefined))
            }
          }
        }
      }))

      // The platform starting again on that journal, in process; a client attaches to the task.
      const platform = PlatformClient.layerTest.pipe(
        Layer.provideMerge(PlatformServer.layerHandlers({ tokens, journal: file })),
        Layer.provideMerge(LanguageModel.layerScripted([
          (request) => ({ text: resultsText(request), usage: { inputTokens: 1, outputTokens: 1 } })
        ])),
        Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PLATFORM_TOKEN", "tok-1"]]))))
      )
      const events = yield* Effect.gen(function*() {
        const platformClient = yield* PlatformClient.PlatformClient
        const caller = { agentId: "agent-1", processId: "p-new" }
        const events = yield* Stream.unwrapScoped(Effect.map(platformClient.attachTask({ ...caller, taskId: "task-x" }), Mailbox.toStream)).pipe(
          Stream.tap((event) =>
            event._tag === "ToolCallRequested"
              ? platformClient.completeToolCall({
                ...caller,
                results: [{
                  taskId: "task-x",
                  toolCallId: event.toolCallId,
                  result: new ToolResult("answered now", undefined)
                }]
              })
              : Effect.void
          ),
          Stream.takeUntil((event) => event._tag === "TaskCompleted" || event._tag === "TaskFailed"),
          Stream.runCollect
        )
        const requests = yield* Effect.flatMap(LanguageModel.Scripted, (scripted) => scripted.requests)
        assert.deepStrictEqual(requests.map(stepOf), [3], "the model was asked for turn 3 only")
        // Once ended, its final event (for a late re-attach) and its timeline (for an operator: 3 turns, 4 calls) stay
        // in the journal, until the sweep forgets the task.
        yield* eventually(() =>
          Effect.scoped(Effect.map(Effect.flatMap(openJournal(file), (journal) => Effect.zip(journal.counts, journal.tasks(0))), ([counts, tasks]) =>
            counts.tasks === 1 && counts.turns === 3 && counts.calls === 4 && tasks.ended.length === 1)), "the task to end in the journal")
        return [...events]
      }).pipe(Effect.provide(platform))

      const requested = events.flatMap((e) => e._tag === "ToolCallRequested" ? [[e.toolCallId, e.deadlineAt]] : [])
      assert.deepStrictEqual(requested, [["t2-b", deadlineAt]], "only the unanswered call, with its id and deadline")
      const done = events[events.length - 1] as Extract<Protocol.TaskEvent, { _tag: "TaskCompleted" }>
      assert.strictEqual(done._tag, "TaskCompleted")
      assert.strictEqual(done.output, 't1-a:"done t1-a" t1-b:"done t1-b" t2-a:"done t2-a" t2-b:"answered now"')
      // Replayed turns count: 2 journaled turns and the new one.
      assert.deepStrictEqual(done.usage, { inputTokens: 21, outputTokens: 11 })
      assert.strictEqual(done.steps, 3)
    }).pipe(Effect.scoped, quiet))

  for (const given of ["the journal option (a file)", "a Journal service on an SqlClient"] as const) {
    it.live(`a call whose deadline passed while the platform was down reads as timed out, is not sent: ${given}`, () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = join(dir, "journal.sqlite")
        const entry = (yield* Toolkit.make(workTool(new Map(), () => Effect.void))).manifest[0]!
        const call = { id: "t1-a", name: "work", arguments: JSON.stringify({ key: "t1-a" }) }
        yield* Effect.scoped(Effect.gen(function*() {
          const journal = yield* openJournal(file)
          const tools = [{ entry, own: true }]
          yield* journal.started({ runId: "task-y", kind: "task", agentId: "agent-1", processId: "p-old", prompt: "go", tools })
          const usage = { inputTokens: 0, outputTokens: 0 }
          yield* journal.turn("task-y", 1, { toolCalls: [call], finishReason: "tool_calls", usage })
          const deadlineAt = Date.now() - 1
          const delivery = { toolCallId: call.id, name: call.name, arguments: call.arguments, deadlineAt }
          yield* journal.callStarted("task-y", delivery)
        }))
        const handlers = given === "the journal option (a file)"
          ? PlatformServer.layerHandlers({ tokens, journal: file })
          : PlatformServer.layerHandlers({ tokens }).pipe(
            Layer.provide(Journal.layerSqlClient.pipe(Layer.provide(sqliteClient(file))))
          )
        const platform = PlatformClient.layerTest.pipe(
          Layer.provideMerge(handlers),
          Layer.provideMerge(LanguageModel.layerScripted([(request) => ({ text: resultsText(request) })])),
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["PLATFORM_TOKEN", "tok-1"]]))))
        )
        const events = yield* Effect.flatMap(PlatformClient.PlatformClient, (platformClient) =>
          Stream.unwrapScoped(Effect.map(
            platformClient.attachTask({ agentId: "agent-1", processId: "p-new", taskId: "task-y" }),
            Mailbox.toStream
          )).pipe(
            Stream.takeUntil((event) => event._tag === "TaskCompleted" || event._tag === "TaskFailed"),
            Stream.runCollect
          )).pipe(Effect.provide(platform))
        assert.deepStrictEqual([...events].filter((e) => e._tag === "ToolCallRequested"), [])
        const done = [...events].pop() as Extract<Protocol.TaskEvent, { _tag: "TaskCompleted" }>
        assert.strictEqual(done.output, "t1-a:work timed out after 30 s; its outcome is unknown")
      }).pipe(Effect.scoped, quiet))
  }

  it.effect("a journal that cannot be used fails, naming its file, or its client's database as well as it can", () =>
    Effect.gen(function*() {
      const missing = join(tmpdir(), "no-such-dir-agent-tools", "journal.sqlite")
      const error = yield* Effect.flip(Effect.scoped(openJournal(missing)))
      assert.strictEqual(error._tag, "JournalUnavailable")
      assert.include(error.message, `the run journal ${missing} cannot be used: `)
      // A file whose migrations are recorded but whose tasks table is gone: reading it fails.
      const dir = yield* tempDir
      const file = join(dir, "journal.sqlite")
      yield* Effect.scoped(openJournal(file))
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`DROP TABLE journal_tasks`).pipe(
        Effect.provide(sqliteClient(file)),
        Effect.orDie
      )
      for (const [client, name] of [[sqliteClient(file), file], [unnamedClient(file), "on a SQLite client"]] as const) {
        const failed = yield* Effect.flatMap(Journal.Journal, (journal) => Effect.flip(journal.tasks(0))).pipe(
          Effect.provide(Journal.layerSqlClient.pipe(Layer.provide(client)))
        )
        assert.strictEqual(failed.message, `the run journal ${name} cannot be used: no such table: journal_tasks`)
      }
    }).pipe(Effect.scoped))
})
