/**
 * The platform as a job queue (design: The platform): a client that serves nothing submits tasks with only its
 * agent's token; each call goes to a worker (a serving process of the agent that serves the tool), the least loaded
 * in turn, and is answered from the connection it was given on. A worker whose connection closes mid-call keeps the
 * call for the grace, then the call goes to another worker, deduplicated across processes by a shared claims file;
 * with no worker left the task's stream says `TaskWaiting` and why, and the next worker takes the call; a worker
 * that stops drains its call and is answered on its connection. Embedded
 * platform on a real WebSocket on 127.0.0.1, real `Serve` workers in this process, the scripted model.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, type Duration, Effect, Exit, Fiber, Layer, Mailbox, Schedule, Schema, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { LanguageModel, Timing, Tool, ToolContext, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { call, promptOf, resultsOf, stepOf } from "../support/execAgent.js"
import { clientLayer } from "../support/platform.js"
import { tcpProxy } from "../support/tcpProxy.js"

const tokens = new Map([["tok-1", "agent-1"]])

const policy = Timing.layer({
  redelivery: Schedule.spaced("200 millis"),
  reconnect: Schedule.spaced("50 millis").pipe(Schedule.intersect(Schedule.recurs(100)))
})

/** Every task charges the order its prompt names (call `c1`), then says what it read. */
const script: LanguageModel.ScriptedTurn = (request) =>
  stepOf(request) === 0
    ? { toolCalls: [call("c1", "charge", { order: promptOf(request) })] }
    : { text: resultsOf(request).join(" ") }

/** The embedded platform on a loopback port, a worker's calls kept `workerGrace` after its connection closed. */
const platform = (workerGrace: Duration.DurationInput) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(
      PlatformServer.layerHandlers({ tokens, workerGrace }).pipe(
        (handlers) => PlatformServer.layerWebSocket({ port: 0 }).pipe(Layer.provideMerge(handlers)),
        Layer.provide(LanguageModel.layerScripted([script], { repeat: true })),
        Layer.provide(policy)
      )
    )
    const url = yield* Effect.provide(PlatformServer.url, context)
    return { url, port: Number(new URL(url).port), state: Context.get(context, PlatformServer.PlatformState) }
  }).pipe(Effect.orDie)

/** A worker's `charge`: logs `<worker> <task>/<call>` (its side effect), then waits for `hold` if given. */
const charge = (worker: string, log: Array<string>, hold?: Effect.Effect<void>) =>
  Tool.make("charge", {
    description: "Charges an order.",
    input: { order: Schema.String },
    timeout: "30 seconds",
    idempotent: true
  }, ({ order }) =>
    Effect.gen(function*() {
      const ctx = yield* ToolContext.ToolContext
      log.push(`${worker} ${ctx.taskId}/${ctx.toolCallId}`)
      if (hold !== undefined) yield* hold
      return `charged ${order} on ${worker}`
    }))

/** A client that records each assignment its process is given (the platform's side of a worker's stream). */
const recording = (
  given: Array<Protocol.Assignment>
): Layer.Layer<PlatformClient.PlatformClient, never, PlatformClient.PlatformClient> =>
  Layer.effect(
    PlatformClient.PlatformClient,
    Effect.map(PlatformClient.PlatformClient, (client) => ({
      ...client,
      watchAssignments: (payload: Parameters<NonNullable<typeof client.watchAssignments>>[0]) =>
        Effect.gen(function*() {
          const source = yield* client.watchAssignments!(payload)
          const out = yield* Mailbox.make<Protocol.Assignment, Protocol.Unauthorized | PlatformClient.PlatformUnavailable>()
          const move: Effect.Effect<void, Protocol.Unauthorized | PlatformClient.PlatformUnavailable> = Effect.flatMap(
            source.takeAll,
            ([chunk, done]) => {
              given.push(...chunk)
              out.unsafeOfferAll(chunk)
              return done ? Effect.void : move
            }
          )
          yield* Effect.forkScoped(Effect.onExit(move, (exit) => out.done(exit)))
          return out
        })
    }))
  )

/** A worker serving `tool` at `url` for the test's scope (its assignments recorded in `given`), with `settings`. */
const worker = <T extends Tool.Any>(
  url: string,
  tool: T,
  options: {
    readonly given?: Array<Protocol.Assignment>
    readonly settings?: Record<string, string>
    readonly shutdownGrace?: Duration.DurationInput
  } = {}
) =>
  Effect.gen(function*() {
    const client = yield* Layer.build(
      Layer.provideMerge(recording(options.given ?? []), clientLayer({ url, settings: options.settings ?? {} }, policy))
    )
    // A call still running at the end of a test is not waited for (unless the test says so).
    const shutdownGrace = options.shutdownGrace ?? "100 millis"
    return yield* Serve.makeConfig(yield* Toolkit.make(tool), { shutdownGrace }).pipe(Effect.provide(client))
  })

/** A client of agent-1 that serves nothing: it only submits. */
const submitter = (url: string) =>
  Effect.map(Layer.build(clientLayer({ url }, policy)), Context.get(PlatformClient.PlatformClient))

/** Submits `prompt` as a process that registered nothing; every event of its task, up to its end, into `events`. */
const submit = (client: PlatformClient.PlatformClient["Type"], prompt: string, events: Array<Protocol.TaskEvent> = []) =>
  Effect.scoped(Effect.gen(function*() {
    const mailbox = yield* client.submitTask({ agentId: "agent-1", processId: "submitter", prompt })
    while (true) {
      const [chunk, done] = yield* mailbox.takeAll
      for (const event of chunk) {
        events.push(event)
        if (event._tag === "TaskCompleted" || event._tag === "TaskFailed") return event
      }
      if (done) return yield* Effect.dieMessage("the task's stream ended before the task did")
    }
  }))

/** Waits until `until` holds, looking every 10 ms, for at most 10 s. */
const eventually = (until: () => boolean, what: string) =>
  Effect.sync(until).pipe(
    Effect.repeat({ until: (holds) => holds, schedule: Schedule.spaced("10 millis") }),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`waited 10 s for ${what}`) }),
    Effect.orDie
  )

/** Waits until the platform sees `count` processes of agent-1 watching for work. */
const watching = (state: PlatformServer.PlatformState["Type"], count: number) =>
  state.watchingProcesses("agent-1").pipe(
    Effect.repeat({ until: (processes) => processes.length >= count, schedule: Schedule.spaced("10 millis") }),
    Effect.timeout("10 seconds"),
    Effect.orDie
  )

const tempFile = (name: string): Effect.Effect<string, never, Scope.Scope> =>
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-workers-"))),
      (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
    ),
    (dir) => join(dir, name)
  )

const waitingReasons = (events: ReadonlyArray<Protocol.TaskEvent>) =>
  events.flatMap((event) => event._tag === "TaskWaiting" ? [event.reason] : [])

describe("the platform as a job queue (design: The platform)", { timeout: 30_000 }, () => {
  it.live("a client that serves nothing submits; its tasks' calls run on the agent's two workers, the least loaded in turn", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform("3 seconds")
      const log: Array<string> = []
      // Each call waits until all four have started: none is answered before every one is placed.
      const allIn = yield* Deferred.make<void>()
      const hold = Effect.suspend(() => log.length >= 4 ? Deferred.succeed(allIn, undefined) : Effect.void).pipe(
        Effect.zipRight(Deferred.await(allIn))
      )
      const w1 = yield* worker(url, charge("w1", log, hold))
      const w2 = yield* worker(url, charge("w2", log, hold))
      yield* watching(state, 2)
      const client = yield* submitter(url)
      const ends = yield* Effect.forEach(["A-1", "A-2", "A-3", "A-4"], (order) => submit(client, order), {
        concurrency: "unbounded"
      })
      const outputs = ends.map((end) => end._tag === "TaskCompleted" ? end.output : end.reason)
      for (const [i, output] of outputs.entries()) assert.match(output, new RegExp(`^c1="charged A-${i + 1} on w[12]"$`))
      // Two each: each call went to the worker with fewer calls in flight, in turn between equals.
      assert.strictEqual(log.filter((line) => line.startsWith("w1 ")).length, 2)
      assert.strictEqual(log.filter((line) => line.startsWith("w2 ")).length, 2)
      // The submitter registered nothing and ran nothing: the agent's processes are the two workers.
      assert.strictEqual(yield* state.processCount("agent-1"), 2)
      assert.sameMembers([...(yield* state.watchingProcesses("agent-1"))], [w1.processId, w2.processId])
    }).pipe(Effect.scoped))

  it.live("a worker's connection closes mid-call: past the grace the other worker answers, the side effect once (shared claims file)", () =>
    Effect.gen(function*() {
      const { port, state, url } = yield* platform("300 millis")
      const db = yield* tempFile("claims.sqlite")
      const settings = { IDEMPOTENCY_DB: db }
      const proxy = yield* tcpProxy({ host: "127.0.0.1", port })
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const hold = Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release))
      const w1 = yield* worker(`ws://127.0.0.1:${proxy.port}${PlatformServer.path}`, charge("w1", log, hold), { settings })
      yield* watching(state, 1)
      const client = yield* submitter(url)
      const events: Array<Protocol.TaskEvent> = []
      const task = yield* Effect.fork(submit(client, "B-7", events))
      yield* Deferred.await(started)
      // The second worker comes once the call runs on the first; then the first's host is gone.
      const given: Array<Protocol.Assignment> = []
      const w2 = yield* worker(url, charge("w2", log), { given, settings })
      yield* watching(state, 2)
      assert.isAbove(proxy.down(), 0)
      yield* eventually(() => given.some((a) => a.call?.toolCallId === "c1"), "the call given to the second worker")
      // The first worker, still running, completes its claim; the second reads the outcome from the shared file.
      yield* Deferred.succeed(release, undefined)
      const end = yield* task
      assert.strictEqual(end._tag === "TaskCompleted" ? end.output : end._tag, "c1=\"charged B-7 on w1\"")
      assert.deepStrictEqual(log, [`w1 ${end.taskId}/c1`])
      const [reason] = waitingReasons(events)
      assert.strictEqual(
        reason,
        `process ${w1.processId} of agent agent-1, which was given call c1 of this task, went away (its connection ` +
          `closed); it waits up to 0.3 s for it to come back, then goes to another process of agent agent-1 that serves its tool`
      )
      assert.strictEqual(given.filter((a) => a.call !== undefined && a.taskId === end.taskId).length, 1, w2.processId)
      // Its host back, the first worker deregisters at the end.
      proxy.up()
    }).pipe(Effect.scoped))

  it.live("no worker left: the stream says who went away and which call waits; the next worker to come takes it", () =>
    Effect.gen(function*() {
      const { port, state, url } = yield* platform("300 millis")
      const proxy = yield* tcpProxy({ host: "127.0.0.1", port })
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const hold = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
      const w1 = yield* worker(`ws://127.0.0.1:${proxy.port}${PlatformServer.path}`, charge("w1", log, hold))
      yield* watching(state, 1)
      const client = yield* submitter(url)
      const events: Array<Protocol.TaskEvent> = []
      const task = yield* Effect.fork(submit(client, "C-3", events))
      yield* Deferred.await(started)
      proxy.down()
      yield* eventually(() => waitingReasons(events).length >= 2, "two TaskWaiting")
      const [gone, none] = waitingReasons(events)
      assert.match(gone!, new RegExp(`^process ${w1.processId} of agent agent-1, which was given call c1 of this task, went away`))
      assert.strictEqual(
        none,
        `process ${w1.processId} of agent agent-1, which was given call c1, went away (its connection closed, and it ` +
          `did not come back within 0.3 s); no process of agent agent-1 that serves tool charge is connected and ` +
          `takes calls: call c1 waits for one`
      )
      // A worker comes: it takes the call. Without a shared claims file, the call runs again there (at least once).
      yield* worker(url, charge("w3", log))
      const end = yield* task
      assert.strictEqual(end._tag === "TaskCompleted" ? end.output : end._tag, "c1=\"charged C-3 on w3\"")
      assert.deepStrictEqual(log, [`w1 ${end.taskId}/c1`, `w3 ${end.taskId}/c1`])
    }).pipe(Effect.scoped))

  it.live("a worker back within the grace is given its call again on its new connection, and its answer is taken there", () =>
    Effect.gen(function*() {
      const { port, state, url } = yield* platform("10 seconds")
      const proxy = yield* tcpProxy({ host: "127.0.0.1", port })
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const hold = Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release))
      const given: Array<Protocol.Assignment> = []
      yield* worker(`ws://127.0.0.1:${proxy.port}${PlatformServer.path}`, charge("w1", log, hold), { given })
      yield* watching(state, 1)
      const client = yield* submitter(url)
      const events: Array<Protocol.TaskEvent> = []
      const task = yield* Effect.fork(submit(client, "D-4", events))
      yield* Deferred.await(started)
      assert.isAbove(proxy.cut(), 0)
      // It reconnects and watches again: the platform gives it the call again there (it joins the call running).
      yield* eventually(() => given.filter((a) => a.call?.toolCallId === "c1").length >= 2, "the call given again")
      yield* Deferred.succeed(release, undefined)
      const end = yield* task
      assert.strictEqual(end._tag === "TaskCompleted" ? end.output : end._tag, "c1=\"charged D-4 on w1\"")
      assert.deepStrictEqual(log, [`w1 ${end.taskId}/c1`])
      assert.strictEqual(waitingReasons(events).length, 1)
    }).pipe(Effect.scoped))

  it.live("a worker that stops mid-call drains it: its answer is taken on its connection, still open; the call goes nowhere else", () =>
    Effect.gen(function*() {
      const { state, url } = yield* platform("300 millis")
      const log: Array<string> = []
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const hold = Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release))
      const scope = yield* Scope.make()
      yield* worker(url, charge("w1", log, hold), { shutdownGrace: "10 seconds" }).pipe(Scope.extend(scope))
      yield* watching(state, 1)
      const client = yield* submitter(url)
      const task = yield* Effect.fork(submit(client, "E-5"))
      yield* Deferred.await(started)
      const given: Array<Protocol.Assignment> = []
      yield* worker(url, charge("w2", log), { given })
      yield* watching(state, 2)
      // w1 stops: it stops watching first, then drains its call for up to 10 s, its connection open meanwhile.
      const stopping = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.sleep("1 second")
      assert.deepStrictEqual(given, [], "past the grace, the call was given to no other worker")
      yield* Deferred.succeed(release, undefined)
      const end = yield* task
      yield* Fiber.join(stopping)
      assert.strictEqual(end._tag === "TaskCompleted" ? end.output : end._tag, "c1=\"charged E-5 on w1\"")
      assert.deepStrictEqual(log, [`w1 ${end.taskId}/c1`])
    }).pipe(Effect.scoped))
})
