/**
 * The operator API (docs: operations) of an embedded platform on a real port, by real HTTP requests: its tokens and
 * roles (401 without one, 403 for a role that is not enough), requests from another site refused, tasks listed
 * from the journal (filters, newest first, a cursor), an approval decided through it letting a suspended task go
 * on (its author journaled), a task cancelled, its event streams resumed with `Last-Event-ID` exactly, and an
 * OpenAPI document that lists every route.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Layer, Logger, LogLevel, Schema, Stream } from "effect"
import { request as httpRequest } from "node:http"
import { Journal, LanguageModel, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import type { Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { waitingForApproval } from "../../examples/operations.js"
import { admin, agentSettings as settings, approver, clockAt, operatorTokens, startOperatedPlatform, viewer } from "../support/operators.js"
import { resultsOf } from "../support/refundTools.js"

const quiet = Logger.withMinimumLogLevel(LogLevel.Error)

/** Turn 1: a refund of 5 (needs approval) and a lookup; turn 2: a refund of 500; turn 3: what the model read. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  {
    toolCalls: [
      { id: "r1", name: "refund", arguments: JSON.stringify({ orderId: "A-1", amount: 5 }) },
      { id: "l1", name: "lookup", arguments: JSON.stringify({ orderId: "A-1" }) }
    ]
  },
  { toolCalls: [{ id: "r2", name: "refund", arguments: JSON.stringify({ orderId: "A-1", amount: 500 }) }] },
  (request) => ({ text: resultsOf(request).join(" | ") })
]

const makeToolkit = () => {
  const runs: Array<string> = []
  const refund = Tool.make("refund", {
    description: "Refunds an order.",
    input: { orderId: Schema.String, amount: Schema.Number },
    output: Schema.String,
    timeout: "5 seconds",
    needsApproval: true
  }, ({ amount, orderId }) => Effect.sync(() => (runs.push(`refund ${amount}`), `refunded ${amount} on ${orderId}`)))
  const lookup = Tool.make("lookup", {
    description: "Looks an order up.",
    input: { orderId: Schema.String },
    output: Schema.String,
    timeout: "5 seconds"
  }, ({ orderId }) => Effect.sync(() => (runs.push(`lookup ${orderId}`), `order ${orderId}: paid`)))
  return { runs, toolkit: Toolkit.make(refund, lookup) }
}

/**
 * An embedded platform on a free loopback port, its journal in memory (the test writes to it too), with the
 * operator tokens (or what `config` gives); its API's base URL, its port, the journal and an agent-1 client.
 */
const startPlatform = (options: {
  readonly script?: ReadonlyArray<LanguageModel.ScriptedTurn>
  readonly operatorTokens?: ReadonlyArray<PlatformServer.OperatorToken> | undefined
  readonly config?: ConfigProvider.ConfigProvider
  readonly journal?: Layer.Layer<Journal.Journal>
}) =>
  Effect.map(
    startOperatedPlatform({ ...options, script: options.script ?? script }),
    ({ client, journal, port }) => ({ base: `http://127.0.0.1:${port}/api/v1`, port, journal, client })
  )

type Platform = Effect.Effect.Success<ReturnType<typeof startPlatform>>

/** A request to the API: its status and its body (JSON when it is). */
const call = (
  p: Platform,
  path: string,
  init: { readonly token?: string; readonly method?: string; readonly body?: unknown; readonly headers?: Record<string, string> } = {}
) =>
  Effect.promise(async () => {
    const response = await fetch(`${p.base}${path}`, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: {
        ...(init.token === undefined ? {} : { authorization: `Bearer ${init.token}` }),
        ...(init.body === undefined ? {} : { "content-type": "application/json" }),
        ...init.headers
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
    })
    const text = await response.text()
    let body: any = text
    try {
      body = JSON.parse(text)
    } catch {
      // not JSON
    }
    return { status: response.status, body }
  })

/** A GET with the `Host` header as given (fetch sends the URL's), by node:http: its status. */
const withHost = (port: number, host: string) =>
  Effect.async<number>((resume) => {
    const req = httpRequest({ host: "127.0.0.1", port, path: "/api/v1/agents", headers: { host, authorization: `Bearer ${viewer}` } })
    req.on("response", (response) => {
      response.resume()
      resume(Effect.succeed(response.statusCode ?? 0))
    })
    req.end()
  })

interface Frame {
  readonly id: number
  readonly event: string
  readonly data: any
}

/**
 * A Server-Sent Events stream, open (its answer's head has come: the platform follows from now on): its status,
 * and its frames until `enough` says so or it ends, after which it is closed.
 */
const openEvents = (p: Platform, path: string, lastEventId?: number) =>
  Effect.promise(async () => {
    const abort = new AbortController()
    const response = await fetch(`${p.base}${path}`, {
      headers: { authorization: `Bearer ${viewer}`, ...(lastEventId === undefined ? {} : { "last-event-id": String(lastEventId) }) },
      signal: abort.signal
    })
    const read = (enough: (frames: ReadonlyArray<Frame>) => boolean) =>
      Effect.promise(async () => {
        const frames: Array<Frame> = []
        if (response.body === null || response.status !== 200) return frames
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        while (!enough(frames)) {
          const { done, value } = await reader.read()
          if (done) break
          buffer += value
          let end: number
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            const field = (name: string) => block.split("\n").find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2)
            const id = field("id")
            if (id !== undefined) frames.push({ id: Number(id), event: field("event")!, data: JSON.parse(field("data")!) })
          }
        }
        abort.abort()
        return frames
      })
    return { status: response.status, read }
  })

/** A stream's status and its frames until `enough` (or its end). */
const readEvents = (p: Platform, path: string, options: { readonly lastEventId?: number; readonly enough: (frames: ReadonlyArray<Frame>) => boolean }) =>
  Effect.flatMap(openEvents(p, path, options.lastEventId), (stream) =>
    Effect.map(stream.read(options.enough), (frames) => ({ status: stream.status, frames })))

/** Serves the toolkit as agent-1 and submits `prompt`, deciding each `TaskSuspended` with `onSuspended`; every event. */
const runTask = (
  p: Platform,
  toolkit: Effect.Effect<Toolkit.Toolkit<never>, unknown>,
  onSuspended: (event: Extract<Protocol.TaskEvent, { _tag: "TaskSuspended" }>) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const served = yield* Serve.makeConfig(yield* Effect.orDie(toolkit))
    const events = yield* served.submitTask("refund A-1").pipe(
      Stream.tap((event) => event._tag === "TaskSuspended" ? onSuspended(event) : Effect.void),
      Stream.runCollect,
      Effect.timeout("10 seconds"),
      Effect.orDie
    )
    return [...events]
  }).pipe(Effect.scoped, Effect.provideService(PlatformClient.PlatformClient, p.client), Effect.withConfigProvider(settings))

const last = <A>(items: ReadonlyArray<A>): A => items[items.length - 1]!

describe("operator API: tokens, roles and other sites", () => {
  it.scopedLive("no token is 401, a viewer cannot decide or cancel (403), another site's request is refused", () =>
    Effect.gen(function*() {
      const p = yield* startPlatform({ operatorTokens })
      const none = yield* call(p, "/tasks")
      assert.strictEqual(none.status, 401)
      assert.include(none.body.reason, "no operator token")
      const agents = yield* call(p, "/tasks", { token: "tok-1" })
      assert.strictEqual(agents.status, 401, "an agent's token is not an operator's")
      assert.include(agents.body.reason, "not known")
      const decide = yield* call(p, "/approvals/task-1/r1", { token: viewer, body: { decision: "approve" } })
      assert.strictEqual(decide.status, 403)
      assert.include(decide.body.reason, "needs role approver or admin")
      const cancel = yield* call(p, "/tasks/task-1/cancel", { token: approver, body: {} })
      assert.strictEqual(cancel.status, 403)
      assert.include(cancel.body.reason, "needs role admin")
      assert.strictEqual((yield* call(p, "/agents", { token: viewer })).status, 200)
      const foreign = yield* call(p, "/agents", { token: viewer, headers: { origin: "http://evil.example" } })
      assert.strictEqual(foreign.status, 403)
      assert.include(foreign.body.reason, "another site")
      const same = yield* call(p, "/agents", { token: viewer, headers: { origin: `http://127.0.0.1:${p.port}` } })
      assert.strictEqual(same.status, 200, "a same-origin request is served")
      assert.strictEqual(yield* withHost(p.port, "evil.example"), 403, "a rebound DNS name is refused")
      assert.strictEqual(yield* withHost(p.port, `localhost:${p.port}`), 200)
    }).pipe(quiet))

  it.scopedLive("the tokens come from PLATFORM_OPERATOR_TOKENS; a setting that cannot be used stops the start", () =>
    Effect.gen(function*() {
      const config = ConfigProvider.fromMap(new Map([["PLATFORM_OPERATOR_TOKENS", `${viewer}:viewer:Vera V.`]]))
      const p = yield* startPlatform({ config })
      assert.strictEqual((yield* call(p, "/agents", { token: viewer })).status, 200)
      assert.strictEqual((yield* call(p, "/agents", { token: admin })).status, 401)
      const bad = ConfigProvider.fromMap(new Map([["PLATFORM_OPERATOR_TOKENS", `${viewer}:root:Vera`]]))
      const exit = yield* Effect.exit(Effect.scoped(startPlatform({ config: bad })))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) ? exit.cause : ""), "PLATFORM_OPERATOR_TOKENS: operator token 1 of 1 has role")
      assert.deepStrictEqual(PlatformServer.parseOperatorTokens(`${viewer}:viewer:Vera,${admin}:admin:Root`).map((t) => t.name), [
        "Vera",
        "Root"
      ])
      assert.include(PlatformServer.operatorTokensProblem("short:viewer:Vera") ?? "", "shorter than 16")
      assert.include(PlatformServer.operatorTokensProblem(`${viewer}:viewer:A,${viewer}:admin:B`) ?? "", "repeats")
    }).pipe(quiet))

  it.scopedLive("the OpenAPI document lists every route, and needs no token", () =>
    Effect.gen(function*() {
      const p = yield* startPlatform({ operatorTokens })
      const { body, status } = yield* call(p, "/openapi.json")
      assert.strictEqual(status, 200)
      const routes = Object.entries(body.paths as Record<string, Record<string, unknown>>)
        .flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
        .sort()
      assert.deepStrictEqual(routes, [
        "GET /api/v1/agents",
        "GET /api/v1/approvals",
        "GET /api/v1/events",
        "GET /api/v1/openapi.json",
        "GET /api/v1/operator",
        "GET /api/v1/tasks",
        "GET /api/v1/tasks/{taskId}",
        "GET /api/v1/tasks/{taskId}/events",
        "POST /api/v1/approvals/{taskId}/{toolCallId}",
        "POST /api/v1/tasks/{taskId}/cancel"
      ])
      assert.deepStrictEqual(Object.keys(body.components.securitySchemes), ["bearer"])
    }).pipe(quiet))
})

describe("operator API: tasks from the journal", () => {
  it.scopedLive("GET /tasks filters by agent, status and time, newest first, a page at a time by cursor", () =>
    Effect.gen(function*() {
      const p = yield* startPlatform({ operatorTokens })
      const base = Date.now() - 60_000
      // 30 tasks, three made each second (ties are ordered by id): running, suspended, ended in turn.
      const made = Array.from({ length: 30 }, (_, i) => ({
        taskId: `task-${String(i).padStart(2, "0")}`,
        agentId: i % 2 === 0 ? "agent-a" : "agent-b",
        createdAt: base + Math.floor(i / 3) * 1000,
        status: ["waiting-for-approval", "ended", "running"][i % 3]!
      }))
      for (const task of made) {
        const record = { runId: task.taskId, kind: "task" as const, agentId: task.agentId, processId: "p-1", prompt: "go", tools: [] }
        yield* Effect.withClock(p.journal.started(record), clockAt(task.createdAt))
        if (task.status === "waiting-for-approval") {
          const approval = { toolCallId: "r1", toolName: "refund", input: "{}", inputKey: "{}", fingerprint: "f", expiresAt: Date.now() + 3_600_000 }
          yield* p.journal.suspended(task.taskId, [approval])
        }
        if (task.status === "ended") {
          yield* p.journal.ended(task.taskId, { final: JSON.stringify({ _tag: "TaskCompleted", taskId: task.taskId, output: "ok" }) }, Date.now())
        }
      }
      const newestFirst = (a: typeof made[number], b: typeof made[number]) =>
        b.createdAt - a.createdAt || (a.taskId < b.taskId ? 1 : -1)
      const expected = made.filter((t) => t.agentId === "agent-a" && t.status === "waiting-for-approval").sort(newestFirst)
      const pages: Array<ReadonlyArray<string>> = []
      let cursor: string | undefined = undefined
      do {
        const page: { status: number; body: any } = yield* call(
          p,
          `/tasks?agent=agent-a&status=waiting-for-approval&limit=2${cursor === undefined ? "" : `&cursor=${cursor}`}`,
          { token: viewer }
        )
        assert.strictEqual(page.status, 200)
        pages.push(page.body.tasks.map((t: { taskId: string }) => t.taskId))
        cursor = page.body.next
      } while (cursor !== undefined)
      assert.deepStrictEqual(pages.flat(), expected.map((t) => t.taskId), "every page in order, none twice, none missed")
      assert.deepStrictEqual(pages.map((page) => page.length), [2, 2, 1])
      const one = yield* call(p, "/tasks?agent=agent-b&status=ended&limit=1", { token: viewer })
      assert.deepStrictEqual(
        { ...one.body.tasks[0], createdAt: undefined, endedAt: undefined },
        { taskId: "task-25", agentId: "agent-b", processId: "p-1", status: "ended", outcome: "completed", createdAt: undefined, endedAt: undefined }
      )
      const since = new Date(base + 3000).toISOString()
      const window = yield* call(p, `/tasks?since=${since}&until=${base + 6000}&limit=200`, { token: viewer })
      assert.deepStrictEqual(
        window.body.tasks.map((t: { taskId: string }) => t.taskId),
        made.filter((t) => t.createdAt >= base + 3000 && t.createdAt < base + 6000).sort(newestFirst).map((t) => t.taskId)
      )
      assert.strictEqual((yield* call(p, "/tasks?cursor=nonsense", { token: viewer })).status, 400)
      assert.strictEqual((yield* call(p, "/tasks?status=sleeping", { token: viewer })).status, 400)
      const approvals = yield* call(p, "/approvals", { token: viewer })
      assert.strictEqual(approvals.body.approvals.length, 10, "each suspended task's pending approval")
      // The docs' typed client (examples/operations.ts): the answers decode with the API's Schemas.
      const typed = yield* Effect.orDie(waitingForApproval(p.base.replace("/api/v1", ""), viewer))
      assert.deepStrictEqual(
        typed.map((line) => line.split(" ")[0]),
        made.filter((t) => t.status === "waiting-for-approval").sort(newestFirst).map((t) => t.taskId)
      )
    }).pipe(quiet))
})

describe("operator API: approvals, cancelling, events", () => {
  it.scopedLive("an approval decided through the API lets the suspended task go on; the timeline names who decided", () =>
    Effect.gen(function*() {
      const p = yield* startPlatform({ operatorTokens })
      const { runs, toolkit } = makeToolkit()
      const seen: Array<unknown> = []
      const events = yield* runTask(p, toolkit, (event) =>
        Effect.gen(function*() {
          if (event.pending[0]!.toolCallId === "r1") {
            const listed = yield* call(p, "/approvals", { token: viewer })
            seen.push(listed.body.approvals.map((a: any) => [a.taskId === event.taskId, a.toolCallId, a.agentId, a.toolName, a.input]))
            const agents = yield* call(p, "/agents", { token: viewer })
            const agent = agents.body.agents.find((a: any) => a.agentId === "agent-1")
            seen.push([agent.tools, agent.processes.length, agent.tasks.held])
            const decided = yield* call(p, `/approvals/${event.taskId}/r1`, { token: approver, body: { decision: "approve" } })
            seen.push([decided.status, decided.body.decision, decided.body.decidedBy])
            return
          }
          const timeline = (yield* call(p, `/tasks/${event.taskId}`, { token: viewer })).body
          seen.push([timeline.status, timeline.turns.length, timeline.approvals.map((a: any) => [a.toolCallId, a.decision, a.decidedBy ?? null])])
          seen.push(timeline.calls.map((c: any) => [c.toolCallId, c.outcome, typeof c.durationMillis]).sort())
          yield* Effect.orDie(call(p, `/approvals/${event.taskId}/r2`, { token: admin, body: { decision: "deny", reason: "over the limit" } }))
        }))
      assert.deepStrictEqual(seen, [
        [[true, "r1", "agent-1", "refund", { orderId: "A-1", amount: 5 }]],
        [["refund", "lookup"], 1, 1],
        [200, "approved", "alice"],
        ["waiting-for-approval", 2, [["r1", "approved", "alice"], ["r2", "pending", null]]],
        [["l1", "succeeded", "number"], ["r1", "succeeded", "number"]]
      ])
      const done = last(events)
      assert.strictEqual(done._tag === "TaskCompleted" ? done.output : done._tag,
        "r1=\"refunded 5 on A-1\" | l1=\"order A-1: paid\" | r2!refund: the user denied this call: over the limit; it did not run")
      assert.deepStrictEqual(runs, ["lookup A-1", "refund 5"], "approved, the refund ran once; denied, never")
      const again = yield* call(p, `/approvals/${done.taskId}/r2`, { token: approver, body: { decision: "approve" } })
      assert.strictEqual(again.status, 409)
      // Ended, its timeline is still there: every turn, call and decision, beside its final event.
      const ended = (yield* call(p, `/tasks/${done.taskId}`, { token: viewer })).body
      assert.deepStrictEqual(
        [ended.status, ended.final?._tag, ended.turns.length, ended.calls.length, ended.approvals.map((a: any) => [a.toolCallId, a.decision])],
        ["ended", "TaskCompleted", 3, 3, [["r1", "approved"], ["r2", "denied"]]]
      )
    }).pipe(quiet))

  it.scopedLive("a decision that meets the journal's database away is 503, try again; the approval stays pending and the retry goes through", () =>
    Effect.gen(function*() {
      // The journal's database away for the first decision written, as a database restarting would be.
      let away = 1
      const journal = Layer.effect(
        Journal.Journal,
        Effect.map(Journal.Journal, (inner) => ({
          ...inner,
          decide: (...args: Parameters<typeof inner.decide>) =>
            away-- > 0 ? Effect.fail(new Journal.JournalUnavailable({ path: "memory", reason: "the database is restarting" })) : inner.decide(...args)
        }))
      ).pipe(Layer.provide(Journal.layerMemory))
      const p = yield* startPlatform({ operatorTokens, journal })
      const { toolkit } = makeToolkit()
      const answers: Array<unknown> = []
      const events = yield* runTask(p, toolkit, (event) =>
        Effect.gen(function*() {
          const first = yield* call(p, `/approvals/${event.taskId}/${event.pending[0]!.toolCallId}`, { token: admin, body: { decision: "approve" } })
          answers.push([first.status, first.body.reason?.includes("try again")])
          const pending = (yield* call(p, "/approvals", { token: viewer })).body.approvals.map((a: any) => a.toolCallId)
          answers.push(pending)
          const again = yield* call(p, `/approvals/${event.taskId}/${event.pending[0]!.toolCallId}`, { token: admin, body: { decision: "approve" } })
          answers.push(again.status)
        }))
      assert.deepStrictEqual(answers.slice(0, 3), [[503, true], ["r1"], 200])
      assert.strictEqual(last(events)._tag, "TaskCompleted")
    }).pipe(quiet))

  it.scopedLive("an admin cancels a suspended task: it ends with TaskCancelled naming the operator; once ended, 409", () =>
    Effect.gen(function*() {
      const p = yield* startPlatform({ operatorTokens })
      const { runs, toolkit } = makeToolkit()
      const events = yield* runTask(p, toolkit, (event) =>
        Effect.asVoid(call(p, `/tasks/${event.taskId}/cancel`, { token: admin, body: { reason: "customer withdrew" } })))
      const end = last(events)
      assert.deepInclude(end, { _tag: "TaskCancelled", by: "operator root", reason: "customer withdrew" })
      assert.deepStrictEqual(runs, ["lookup A-1"])
      assert.strictEqual((yield* call(p, `/tasks/${end.taskId}/cancel`, { token: admin, body: {} })).status, 409)
      const listed = yield* call(p, `/tasks?status=ended`, { token: viewer })
      assert.deepStrictEqual(listed.body.tasks.map((t: any) => [t.taskId, t.outcome]), [[end.taskId, "cancelled"]])
    }).pipe(quiet))

  it.scopedLive("a task's events and the platform's resume with Last-Event-ID: no gap, no repeat", () =>
    Effect.gen(function*() {
      const p = yield* startPlatform({ operatorTokens })
      const { toolkit } = makeToolkit()
      // The platform's feed, from now on, while a task runs to its end.
      const feed = yield* openEvents(p, "/events")
      const live = yield* Effect.fork(feed.read((frames) => frames.some((f) => f.event === "TaskCompleted")))
      const events = yield* runTask(p, toolkit, (event) =>
        Effect.forEach(event.pending, (c) =>
          call(p, `/approvals/${event.taskId}/${c.toolCallId}`, { token: approver, body: { decision: "approve" } }), { discard: true }))
      const taskId = last(events).taskId
      const all = yield* live
      assert.isAbove(all.length, 6)
      assert.deepStrictEqual([...new Set(all.map((f) => f.data.agentId))], ["agent-1"])
      const resumed = yield* readEvents(p, "/events", { lastEventId: all[2]!.id, enough: (frames) => frames.length >= all.length - 3 })
      assert.deepStrictEqual(resumed.frames.map((f) => f.id), all.slice(3).map((f) => f.id), "the platform's feed, exactly")

      // The task's own stream: its offsets, from the start, then from the middle, then past its end.
      const whole = yield* readEvents(p, `/tasks/${taskId}/events`, { enough: () => false })
      assert.strictEqual(whole.status, 200)
      assert.strictEqual(last(whole.frames).event, "TaskCompleted")
      const offsets = whole.frames.map((f) => f.id)
      assert.deepStrictEqual(offsets, [...offsets].sort((a, b) => a - b))
      assert.deepStrictEqual(
        whole.frames.map((f) => f.event),
        events.filter((e) => e._tag !== "TaskStarted").map((e) => e._tag),
        "the events the submitter saw, in order"
      )
      const middle = yield* readEvents(p, `/tasks/${taskId}/events`, { lastEventId: offsets[3]!, enough: () => false })
      assert.deepStrictEqual(middle.frames.map((f) => f.id), offsets.slice(4))
      const past = yield* readEvents(p, `/tasks/${taskId}/events`, { lastEventId: last(offsets), enough: () => false })
      assert.strictEqual(past.status, 204, "an EventSource stops reconnecting: it has the end")
      assert.strictEqual((yield* readEvents(p, "/tasks/task-none/events", { enough: () => false })).status, 404)
    }).pipe(quiet))
})
