/**
 * Hostile clients on 127.0.0.1 (design: Hostile clients): nothing a client sends ends or stalls the
 * platform. One suite, run against the embedded platform (test/platform/HostileWire.test.ts) and
 * against a runner of a cluster (test/platform/HostileCluster.test.ts): `platform` builds the one
 * to attack, on a WebSocket with `listen`'s limits, its tasks' model scripted, and yields its URL.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Logger, type Mailbox, Schedule, type Scope } from "effect"
import { WebSocket } from "ws"
import { LanguageModel, Timing, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient } from "../../src/exports/serve.js"
import { ToolResult } from "../../src/ToolResult.js"
import { startChild } from "./childProcess.js"
import { record, scale } from "./figures.js"
import { clientLayer, embeddedPlatform, resultsText } from "./platform.js"

export const tokens = new Map([["tok-1", "agent-1"]])
export const policy = Timing.layer({ redelivery: Schedule.spaced("10 seconds") })

/** Builds the platform under attack (see above). */
export type MakePlatform = (
  script: ReadonlyArray<LanguageModel.ScriptedTurn>,
  listen?: Partial<PlatformServer.ListenOptions>
) => Effect.Effect<string, never, Scope.Scope>

/** The embedded platform (memory). */
export const embedded: MakePlatform = (script, listen = {}) => embeddedPlatform(script, policy, { tokens, listen })

const heartbeat = Effect.flatMap(PlatformClient.PlatformClient, (c) =>
  c.heartbeat({ agentId: "agent-1", processId: "p", manifestHash: "h" }))

/** Opens a raw WebSocket; resolves with it once open, or with the upgrade's HTTP status if refused. */
const open = (url: string, headers: Record<string, string>, options: { autoPong?: boolean } = {}) =>
  new Promise<WebSocket | number>((resolve) => {
    const socket = new WebSocket(url, { headers, ...options })
    socket.on("open", () => resolve(socket))
    socket.on("unexpected-response", (request, response) => {
      resolve(response.statusCode ?? 0)
      response.resume()
      request.destroy()
    })
    socket.on("error", () => resolve(0))
  })

/** Sends each frame on `socket` and waits for one answer per frame (or `timeoutMillis`). */
const exchange = (socket: WebSocket, frames: ReadonlyArray<string>, timeoutMillis = 10_000) =>
  new Promise<Array<string>>((resolve) => {
    const got: Array<string> = []
    const timer = setTimeout(() => resolve(got), timeoutMillis)
    socket.on("message", (data) => {
      got.push(String(data))
      if (got.length === frames.length) {
        clearTimeout(timer)
        resolve(got)
      }
    })
    socket.on("close", () => {
      clearTimeout(timer)
      resolve(got)
    })
    for (const frame of frames) socket.send(frame)
  })

const nested = (depth: number): string => "[".repeat(depth) + "]".repeat(depth)

const call = (id: string, name: string): LanguageModel.ToolCall => ({ id, name, arguments: "{}" })

/** A serving process's one tool, `hold`, as its manifest says it. */
export const holdEntry = new Toolkit.ManifestEntry({
  name: "hold",
  description: "Holds.",
  parameters: { type: "object", properties: {} },
  output: {},
  timeoutMillis: 30_000,
  retries: 0,
  idempotent: false
})

/** Takes events into `seen` until one of a new chunk makes `until` true (or the stream ends); whether it ended. */
export const takeUntil = (
  mailbox: Mailbox.ReadonlyMailbox<Protocol.TaskEvent, unknown>,
  seen: Array<Protocol.TaskEvent>,
  until: (event: Protocol.TaskEvent) => boolean
) =>
  Effect.gen(function*() {
    while (true) {
      const [chunk, done] = yield* mailbox.takeAll
      seen.push(...chunk)
      if (done || Chunk.some(chunk, until)) return done
    }
  })

/** The suite against the platforms `platform` makes; `mode` names them in the test names and figures. */
export const hostileWireSuite = (mode: string, platform: MakePlatform) => {
  const prefix = mode === "embedded" ? "" : `${mode}: `
  describe(`hostile clients, ${mode} (design: Hostile clients)`, () => {
    it.live("a deep value in every field of every call, up to 100,000 levels, gets an answer; the platform serves on", () =>
      Effect.gen(function*() {
        const url = yield* platform([])
        const caller = { agentId: "agent-1", processId: "p" }
        const payloads: Record<string, Record<string, unknown>> = {
          Register: { ...caller, manifest: [], manifestHash: "h" },
          Heartbeat: { ...caller, manifestHash: "h" },
          Deregister: caller,
          SubmitTask: { ...caller, prompt: "go" },
          AttachTask: { ...caller, taskId: "t" },
          CompleteToolCall: { ...caller, results: [] }
        }
        const depths = scale([3_000, 100_000], [2_000, 3_000, 10_000, 100_000])
        const frames: Array<string> = []
        let id = 0
        for (const depth of depths) {
          const deep = nested(depth)
          for (const [name, payload] of Object.entries(payloads)) {
            // The deep value in each field, as the whole payload, as the call name and as the id.
            for (const field of Object.keys(payload)) {
              const text = JSON.stringify({ ...payload, [field]: "DEEP" }).replace("\"DEEP\"", deep)
              frames.push(`{"id":${++id},"call":"${name}","payload":${text}}`)
            }
            frames.push(`{"id":${++id},"call":"${name}","payload":${deep}}`)
            frames.push(`{"id":${++id},"call":"${name}","payload":{"extra":${deep}}}`)
          }
          frames.push(`{"id":${++id},"call":${deep},"payload":{}}`)
          frames.push(`{"id":${deep},"call":"Heartbeat"}`)
          frames.push(deep)
        }
        const socket = yield* Effect.promise(() => open(url, { authorization: "Bearer tok-1" }))
        assert.instanceOf(socket, WebSocket)
        const replies = yield* Effect.promise(() => exchange(socket as WebSocket, frames))
        ;(socket as WebSocket).close()
        assert.strictEqual(replies.length, frames.length, "every frame got an answer")
        for (const reply of replies) {
          assert.isBelow(reply.length, 4_096)
          assert.match(reply, /"defect":"|"error":\{/)
        }
        assert.include(replies[0], "nested deeper than 512 levels")
        // Another connection still works.
        assert.deepStrictEqual(yield* heartbeat.pipe(Effect.provide(clientLayer({ url }, policy))), { known: false })
        record({
          suite: "hostile clients",
          measure: `${prefix}hostile frames tried (every field of every call, depths ${depths.join(", ")}); platform crashes`,
          value: `${frames.length}; 0`,
          expected: "0 crashes"
        })
      }).pipe(Effect.scoped), 60_000)

    it.live("the token is checked at the upgrade: 401 before a socket exists; 1,000 refused upgrades cost little memory", () =>
      Effect.gen(function*() {
        const url = yield* platform([])
        assert.strictEqual(yield* Effect.promise(() => open(url, {})), 401)
        assert.strictEqual(yield* Effect.promise(() => open(url, { authorization: "Bearer nope" })), 401)
        assert.strictEqual(yield* Effect.promise(() => open(url.replace("/rpc", "/other"), { authorization: "Bearer tok-1" })), 404)
        // A serving process with a wrong token gets the typed error, not an outage to retry.
        const error = yield* Effect.flip(heartbeat.pipe(Effect.provide(clientLayer({ url, token: "nope" }, policy))))
        assert.strictEqual(error._tag, "Unauthorized")
        const attempts = scale(300, 1_000)
        const before = process.memoryUsage().rss
        const statuses = new Map<number, number>()
        for (let round = 0; round < attempts / 50; round++) {
          const batch = yield* Effect.promise(() => Promise.all(Array.from({ length: 50 }, () => open(url, {}))))
          for (const status of batch) statuses.set(status as number, (statuses.get(status as number) ?? 0) + 1)
        }
        const growth = (process.memoryUsage().rss - before) / 1024 / 1024
        assert.deepStrictEqual([...statuses], [[401, attempts]])
        assert.isBelow(growth, 50)
        assert.deepStrictEqual(yield* heartbeat.pipe(Effect.provide(clientLayer({ url }, policy))), { known: false })
        record({
          suite: "hostile clients",
          measure: `${prefix}${attempts} unauthenticated upgrade attempts: refused with 401; RSS growth`,
          value: `${statuses.get(401)}; ${growth.toFixed(1)} MB`,
          expected: "< 50 MB"
        })
      }).pipe(Effect.scoped), 60_000)

    it.live("over maxConnections the upgrade gets 503 (after the token: 401 first); a connection closed makes room", () => {
      const refusals: Array<string> = []
      return Effect.gen(function*() {
        const url = yield* platform([], { maxConnections: 2 })
        const auth = { authorization: "Bearer tok-1" }
        const first = yield* Effect.promise(() => open(url, auth))
        const second = yield* Effect.promise(() => open(url, auth))
        assert.instanceOf(first, WebSocket)
        assert.instanceOf(second, WebSocket)
        assert.strictEqual(yield* Effect.promise(() => open(url, auth)), 503)
        // The token comes first: a client without one is told so, and is not counted against the cap.
        assert.strictEqual(yield* Effect.promise(() => open(url, {})), 401)
        // Refusals at the cap are one log line per 10 s with their count, not a line each.
        for (let i = 0; i < 20; i++) assert.strictEqual(yield* Effect.promise(() => open(url, auth)), 503)
        // (The embedded platform logs through this test's logger; a cluster's runner through its own.)
        if (mode === "embedded") {
          assert.deepStrictEqual(refusals, ["1 connection(s) refused since the last line: 2 are open (maxConnections)"])
        }
        ;(first as WebSocket).close()
        yield* Effect.sleep("100 millis")
        const third = yield* Effect.promise(() => open(url, auth))
        assert.instanceOf(third, WebSocket)
        ;(second as WebSocket).close()
        ;(third as WebSocket).close()
      }).pipe(
        Effect.scoped,
        Effect.provide(Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ message }) => {
            const text = String(message)
            if (text.includes("refused since the last line")) refusals.push(text)
          })
        ))
      )
    })

    it.live("a connection that answers no ping (half-open, gone) is closed; one that answers stays", () =>
      Effect.gen(function*() {
        const url = yield* platform([], { pingInterval: "100 millis" })
        const auth = { authorization: "Bearer tok-1" }
        const silent = (yield* Effect.promise(() => open(url, auth, { autoPong: false }))) as WebSocket
        const alive = (yield* Effect.promise(() => open(url, auth))) as WebSocket
        const closedAfter = yield* Effect.promise(() =>
          new Promise<number>((resolve) => {
            const started = Date.now()
            silent.on("close", () => resolve(Date.now() - started))
          })
        ).pipe(Effect.timeout("3 seconds"))
        assert.isAtMost(closedAfter, 1_000)
        assert.strictEqual(alive.readyState, WebSocket.OPEN)
        alive.close()
      }).pipe(Effect.scoped))

    it.live("a non-reading flood from one connection stalls no one: another client's round trip stays fast", () =>
      Effect.gen(function*() {
        const url = yield* platform([])
        const seconds = scale(3, 30)
        const rounds: Array<number> = []
        yield* Effect.gen(function*() {
          yield* heartbeat
          const before = process.memoryUsage().rss
          const flooder = startChild("test/support/floodChild.ts", { PORT: new URL(url).port, TOKEN: "tok-1", SECONDS: String(seconds) })
          yield* Effect.sleep("500 millis")
          let peak = before
          const until = Date.now() + (seconds - 1) * 1000
          // A call outside the lifecycle budget, answered at once.
          const roundTrip = Effect.flatMap(PlatformClient.PlatformClient, (c) =>
            c.completeToolCall({ agentId: "agent-1", processId: "p", results: [] }))
          while (Date.now() < until) {
            const started = performance.now()
            yield* roundTrip
            rounds.push(performance.now() - started)
            peak = Math.max(peak, process.memoryUsage().rss)
            yield* Effect.sleep("20 millis")
          }
          const sent = yield* Effect.promise(() => flooder.waitFor("sent:", 10_000))
          const sorted = [...rounds].sort((a, b) => a - b)
          const p50 = sorted[Math.floor(sorted.length / 2)]!
          const growth = (peak - before) / 1024 / 1024
          record({
            suite: "hostile clients",
            measure: `${prefix}${seconds} s non-reading flood of 40-byte invalid frames (${sent?.slice(5)} sent): another client's p50 / p99; RSS growth`,
            value: `${p50.toFixed(2)} ms / ${sorted[Math.floor(sorted.length * 0.99)]!.toFixed(2)} ms; ${growth.toFixed(1)} MB`,
            expected: "p50 < 20 ms; < 100 MB"
          })
          assert.isBelow(p50, 20)
          assert.isBelow(growth, 100)
        }).pipe(Effect.provide(clientLayer({ url }, policy)))
      }).pipe(Effect.scoped), scale(30_000, 120_000))

    it.live("a second attach by the same agent takes the task over: the first stream ends with TaskTakenOver", () =>
      Effect.gen(function*() {
        const url = yield* platform([{ toolCalls: [call("a", "hold")] }, (request) => ({ text: resultsText(request) })])
        const first = yield* Layer.build(clientLayer({ url }, policy))
        const second = yield* Layer.build(clientLayer({ url }, policy))
        const caller = { agentId: "agent-1", processId: "p1" }
        yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.register({ ...caller, manifest: [holdEntry], manifestHash: "h" })).pipe(Effect.provide(first))
        const seenFirst: Array<Protocol.TaskEvent> = []
        const submitted = yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.submitTask({ ...caller, prompt: "go", events: "calls" })).pipe(Effect.provide(first))
        yield* takeUntil(submitted, seenFirst, (e) => e._tag === "ToolCallRequested")
        const taskId = seenFirst[0]!.taskId
        const seenSecond: Array<Protocol.TaskEvent> = []
        const attached = yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.attachTask({ ...caller, taskId, events: "calls" })).pipe(Effect.provide(second))
        yield* takeUntil(attached, seenSecond, (e) => e._tag === "ToolCallRequested")
        // The first stream's last event says what happened, then it ends.
        const firstDone = yield* takeUntil(submitted, seenFirst, () => false)
        assert.isTrue(firstDone)
        assert.deepStrictEqual(seenFirst.map((e) => e._tag), ["TaskStarted", "ToolCallRequested", "TaskTakenOver"])
        assert.match((seenFirst[2] as { reason: string }).reason, /another attachment of agent agent-1 took task .* over/)
        // The task goes on on the second stream.
        let deep: unknown = 1
        for (let i = 0; i < 300; i++) deep = [deep]
        yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.completeToolCall({ ...caller, results: [{ taskId, toolCallId: "a", result: new ToolResult(deep, undefined) }] })).pipe(
            Effect.provide(second)
          )
        yield* takeUntil(attached, seenSecond, () => false)
        const last = seenSecond[seenSecond.length - 1]
        assert.strictEqual(last?._tag, "TaskCompleted")
        // A result past the output limits is the invalid-output result the model reads, not a failed task.
        assert.match((last as { output: string }).output, /^a:hold: invalid output: the value is nested deeper than 128 levels/)
      }).pipe(Effect.scoped))

    it.live("a call id already running is refused; a cancelled stream frees its id", () =>
      Effect.gen(function*() {
        const url = yield* platform([{ toolCalls: [call("a", "hold")] }, (request) => ({ text: resultsText(request) })])
        const socket = yield* Effect.promise(() => open(url, { authorization: "Bearer tok-1" }))
        assert.instanceOf(socket, WebSocket)
        const ws = socket as WebSocket
        const received: Array<{ id?: number; events?: Array<{ _tag: string }>; defect?: string; error?: unknown }> = []
        ws.on("message", (data) => received.push(JSON.parse(String(data))))
        /** Sends `frame`, then waits for a frame that `until` accepts. */
        const exchangeUntil = (frame: object, until: (got: typeof received[number]) => boolean) =>
          Effect.promise(() => {
            const from = received.length
            ws.send(JSON.stringify(frame))
            return new Promise<typeof received[number]>((resolve) => {
              const timer = setInterval(() => {
                const found = received.slice(from).find(until)
                if (found === undefined) return
                clearInterval(timer)
                resolve(found)
              }, 5)
            })
          }).pipe(Effect.timeout("5 seconds"))
        const caller = { agentId: "agent-1", processId: "p1" }
        yield* exchangeUntil({ id: 1, call: "Register", payload: { ...caller, manifest: [holdEntry], manifestHash: "h" } }, (got) =>
          got.id === 1)
        const submit = { id: 2, call: "SubmitTask", payload: { ...caller, prompt: "go", events: "calls" } }
        const calls = (got: typeof received[number]) => got.id === 2 && (got.events ?? []).some((e) => e._tag === "ToolCallRequested")
        yield* exchangeUntil(submit, calls)
        const refused = yield* exchangeUntil(submit, (got) => got.id === 2 && got.defect !== undefined)
        assert.strictEqual(refused.defect, "call id 2 is already running")
        ws.send(JSON.stringify({ id: 2, cancel: true }))
        // The cancel ends the stream on the platform's side (it is not answered): its id is free again.
        yield* Effect.sleep("100 millis")
        const again = yield* exchangeUntil({ id: 2, call: "AttachTask", payload: { ...caller, taskId: "none" } }, (got) =>
          got.id === 2)
        assert.deepStrictEqual(again, { id: 2, error: { _tag: "UnknownTask", taskId: "none" } })
        ws.close()
      }).pipe(Effect.scoped), 30_000)

    it.live("each stream's events come under its own id, whatever stream header the upgrade named", () =>
      Effect.gen(function*() {
        // Each task's first turn: two calls.
        const turn = { toolCalls: [call("a", "hold"), call("b", "hold")] }
        const url = yield* platform([turn, turn])
        // The header the wire names a stream's id in, sent by the client: dropped at the upgrade.
        const socket = yield* Effect.promise(() => open(url, { authorization: "Bearer tok-1", "x-agent-tools-stream": "99" }))
        assert.instanceOf(socket, WebSocket)
        const ws = socket as WebSocket
        const received: Array<{ id?: number; events?: Array<{ _tag: string; taskId: string; toolCallId?: string }> }> = []
        ws.on("message", (data) => received.push(JSON.parse(String(data))))
        const caller = { agentId: "agent-1", processId: "p1" }
        const eventsOf = (id: number) => received.flatMap((got) => got.id === id ? got.events ?? [] : [])
        const calls = (id: number) => eventsOf(id).filter((e) => e._tag === "ToolCallRequested").length
        ws.send(JSON.stringify({ id: 1, call: "Register", payload: { ...caller, manifest: [holdEntry], manifestHash: "h" } }))
        for (const id of [2, 3]) ws.send(JSON.stringify({ id, call: "SubmitTask", payload: { ...caller, prompt: "go", events: "calls" } }))
        yield* Effect.promise(() =>
          new Promise<void>((resolve) => {
            const timer = setInterval(() => {
              if (calls(2) < 2 || calls(3) < 2) return
              clearInterval(timer)
              resolve()
            }, 5)
          })
        ).pipe(Effect.timeout("5 seconds"))
        ws.close()
        const [two, three] = [eventsOf(2), eventsOf(3)]
        // Each stream: its task's start, then its two calls, all of one task, not the other stream's.
        for (const events of [two, three]) {
          assert.deepStrictEqual(events.map((e) => e._tag), ["TaskStarted", "ToolCallRequested", "ToolCallRequested"])
          assert.strictEqual(new Set(events.map((e) => e.taskId)).size, 1)
          assert.deepStrictEqual(events.slice(1).map((e) => e.toolCallId), ["a", "b"])
        }
        assert.notStrictEqual(two[0]!.taskId, three[0]!.taskId)
        assert.isFalse(received.some((got) => got.id === 99))
      }).pipe(Effect.scoped), 30_000)

    it.live("an answer's acknowledgment comes after the next call it lets out (embedded); another agent's token gets Unauthorized", () =>
      Effect.gen(function*() {
        const url = yield* platform([{ toolCalls: [call("a", "hold")] }, { toolCalls: [call("b", "hold")] }])
        const socket = yield* Effect.promise(() => open(url, { authorization: "Bearer tok-1" }))
        assert.instanceOf(socket, WebSocket)
        const ws = socket as WebSocket
        const received: Array<{ id?: number; ok?: unknown; error?: { _tag: string }; events?: Array<{ _tag: string; taskId: string }> }> = []
        ws.on("message", (data) => received.push(JSON.parse(String(data))))
        const until = (done: () => boolean) =>
          Effect.promise(() =>
            new Promise<void>((resolve) => {
              const timer = setInterval(() => {
                if (!done()) return
                clearInterval(timer)
                resolve()
              }, 5)
            })
          ).pipe(Effect.timeout("5 seconds"))
        const caller = { agentId: "agent-1", processId: "p1" }
        const calls = () => received.flatMap((got) => got.id === 2 ? (got.events ?? []).filter((e) => e._tag === "ToolCallRequested") : [])
        ws.send(JSON.stringify({ id: 1, call: "Register", payload: { ...caller, manifest: [holdEntry], manifestHash: "h" } }))
        ws.send(JSON.stringify({ id: 2, call: "SubmitTask", payload: { ...caller, prompt: "go", events: "calls" } }))
        yield* until(() => calls().length === 1)
        const taskId = calls()[0]!.taskId
        const answer = (id: number, agentId: string) =>
          JSON.stringify({
            id,
            call: "CompleteToolCall",
            payload: { agentId, processId: "p1", results: [{ taskId, toolCallId: "a", result: { value: 1 } }] }
          })
        // Another agent's name with this token: refused, the call still pending.
        ws.send(answer(3, "agent-2"))
        yield* until(() => received.some((got) => got.id === 3))
        assert.strictEqual(received.find((got) => got.id === 3)!.error?._tag, "Unauthorized")
        assert.strictEqual(calls().length, 1)
        ws.send(answer(4, "agent-1"))
        yield* until(() => received.some((got) => got.id === 4) && calls().length === 2)
        // The next call's event went out before the answer's acknowledgment.
        const framesWithCalls = received.flatMap((got, i) =>
          got.id === 2 && (got.events ?? []).some((e) => e._tag === "ToolCallRequested") ? [i] : []
        )
        const acknowledged = received.findIndex((got) => got.id === 4)
        assert.deepStrictEqual(received[acknowledged], { id: 4 })
        // A cluster's runner acknowledges once the task's entity has the answer: the next call may come after.
        if (mode === "embedded") assert.isBelow(framesWithCalls[1]!, acknowledged)
        ws.close()
      }).pipe(Effect.scoped), 30_000)

    it.live("answers ready together over the platform's frame limit go in more than one frame, and all land", () =>
      Effect.gen(function*() {
        const url = yield* platform([
          { toolCalls: [call("a", "hold"), call("b", "hold"), call("c", "hold")] },
          (request) => ({ text: resultsText(request).replace(/x+/g, (xs) => String(xs.length)) })
        ])
        const client = yield* Layer.build(clientLayer({ url }, policy))
        const caller = { agentId: "agent-1", processId: "p1" }
        const output = yield* Effect.gen(function*() {
          const platformClient = yield* PlatformClient.PlatformClient
          yield* platformClient.register({ ...caller, manifest: [holdEntry], manifestHash: "h" })
          const mailbox = yield* platformClient.submitTask({ ...caller, prompt: "go", events: "calls" })
          const seen: Array<Protocol.TaskEvent> = []
          while (seen.filter((e) => e._tag === "ToolCallRequested").length < 3) yield* takeUntil(mailbox, seen, () => true)
          const taskId = seen[0]!.taskId
          // Three 900 KB results: 2.7 MB together, over the 2 MiB frame.
          yield* platformClient.completeToolCall({
            ...caller,
            results: ["a", "b", "c"].map((id) => ({ taskId, toolCallId: id, result: new ToolResult("x".repeat(900_000), undefined) }))
          })
          yield* takeUntil(mailbox, seen, () => false)
          return (seen[seen.length - 1] as { output?: string }).output
        }).pipe(Effect.provide(client))
        assert.strictEqual(output, "a:\"900000\" b:\"900000\" c:\"900000\"")
      }).pipe(Effect.scoped), 30_000)
  })
}
