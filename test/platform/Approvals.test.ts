/**
 * Approvals on the platform (design: Durable runs): on a platform with a journal, a task whose served
 * tool needs approval suspends (`TaskSuspended`, the stream stays); the submitting process approves or
 * denies the call (`PlatformClient.approve` / `deny`, `DecideApproval`) and the task goes on from the
 * journal. Without a journal the serving side asks, as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Context, Duration, Effect, Exit, Layer, Logger, LogLevel, Mailbox, Schema, Scope, Stream, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Hooks, Journal, LanguageModel, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { ToolResult } from "../../src/ToolResult.js"

const tokens = new Map([["tok-1", "agent-1"], ["tok-2", "agent-2"]])

const settings = (token: string, agentId: string) =>
  ConfigProvider.fromMap(new Map([["AGENT_ID", agentId], ["PLATFORM_TOKEN", token]]))

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-approvals-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** The tool results the model read in `request`, as `id=content` (errors marked `!`). */
const resultsOf = (request: LanguageModel.ModelRequest) =>
  request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}${m.isError ? "!" : "="}${m.content}`] : [])

/** Turn 1: a refund (needs approval) and a lookup; turn 2: the text of what the model read. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  {
    toolCalls: [
      { id: "r1", name: "refund", arguments: JSON.stringify({ orderId: "A-1", amount: 5 }) },
      { id: "l1", name: "lookup", arguments: JSON.stringify({ orderId: "A-1" }) }
    ]
  },
  (request) => ({ text: resultsOf(request).join(" | ") })
]

/** The served tools, counting their runs. */
const makeTools = () => {
  const runs: Array<string> = []
  const refund = Tool.make("refund", {
    description: "Refunds an order.",
    input: { orderId: Schema.String, amount: Schema.Number },
    output: Schema.String,
    timeout: "10 seconds",
    needsApproval: true
  }, ({ amount, orderId }) => Effect.sync(() => (runs.push(`refund ${orderId}`), `refunded ${amount} on ${orderId}`)))
  const lookup = Tool.make("lookup", {
    description: "Looks an order up.",
    input: { orderId: Schema.String },
    output: Schema.String,
    timeout: "10 seconds"
  }, ({ orderId }) => Effect.sync(() => (runs.push(`lookup ${orderId}`), `order ${orderId}: paid`)))
  return { runs, toolkit: Toolkit.make(refund, lookup) }
}

/**
 * A platform in this process on the script (answered by conversation step, so a task going on from
 * its journal is answered where it stands), with a journal file or none, and a client for each
 * agent: the submitting process's (agent-1) and another agent's. `stop` closes it.
 */
const startPlatform = (options: {
  readonly journal: string | undefined
  readonly script?: ReadonlyArray<LanguageModel.ScriptedTurn>
  readonly approvalExpiry?: Duration.DurationInput
}) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const handlers = yield* Layer.buildWithScope(
      PlatformServer.layerHandlers({ tokens, journal: options.journal, approvalExpiry: options.approvalExpiry }).pipe(
        Layer.provideMerge(LanguageModel.layerScripted(options.script ?? script, { perConversation: true }))
      ),
      scope
    )
    const clientOf = (token: string) =>
      Effect.map(
        Layer.buildWithScope(
          PlatformClient.layerTest.pipe(
            Layer.provide(Layer.succeedContext(handlers)),
            Layer.provide(Layer.setConfigProvider(settings(token, "")))
          ),
          scope
        ),
        Context.get(PlatformClient.PlatformClient)
      )
    return {
      file: options.journal,
      client: yield* clientOf("tok-1"),
      other: yield* clientOf("tok-2"),
      requests: Effect.flatMap(LanguageModel.Scripted, (s) => s.requests).pipe(Effect.provide(handlers)),
      stop: Scope.close(scope, Exit.void)
    }
  })

/** `startPlatform`, stopped with the test's scope; with a journal, on a fresh file. */
const platform = (options: {
  readonly journal: boolean
  readonly script?: ReadonlyArray<LanguageModel.ScriptedTurn>
  readonly approvalExpiry?: Duration.DurationInput
}) =>
  Effect.gen(function*() {
    const journal = options.journal ? join(yield* tempDir, "journal.sqlite") : undefined
    const started = yield* startPlatform({ ...options, journal })
    yield* Effect.addFinalizer(() => started.stop)
    return started
  })

type Platform = Effect.Effect.Success<ReturnType<typeof startPlatform>>
type Suspended = Extract<Protocol.TaskEvent, { _tag: "TaskSuspended" }>

/**
 * Serves the tools as agent-1 (with `serving` around the serving process: hooks, say) and submits the
 * task; `onSuspended` decides when it suspends. Every event of the task, to its end.
 */
const runTask = (
  p: Platform,
  toolkit: Toolkit.Toolkit<never>,
  onSuspended: (event: Suspended) => Effect.Effect<void, unknown>,
  serving: Layer.Layer<never> = Layer.empty
) =>
  Effect.gen(function*() {
    const served = yield* Serve.makeConfig(toolkit)
    const events = yield* served.submitTask("refund A-1").pipe(
      Stream.tap((event) => event._tag === "TaskSuspended" ? onSuspended(event) : Effect.void),
      Stream.runCollect,
      Effect.timeout("10 seconds")
    )
    return [...events]
  }).pipe(
    Effect.scoped,
    Effect.provide(serving),
    Effect.provideService(PlatformClient.PlatformClient, p.client),
    Effect.withConfigProvider(settings("tok-1", "agent-1"))
  )

const lastOf = (events: ReadonlyArray<Protocol.TaskEvent>) => events[events.length - 1]!

/** The journal's record of a task, read from its file in a journal of its own. */
const journaled = (file: string, taskId: string) =>
  Effect.flatMap(Journal.Journal, (journal) => journal.run(taskId)).pipe(
    Effect.provide(Journal.layerSql({ filename: file })),
    Effect.orDie
  )

const quiet = Logger.withMinimumLogLevel(LogLevel.Error)

describe("platform approvals (a journal)", () => {
  it.scoped("a served tool that needs approval suspends the task; approved, it runs once and the model reads its result", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: true })
      const { runs, toolkit } = makeTools()
      let seen: Suspended | undefined
      let status: string | undefined
      let runsWhenSuspended: Array<string> = []
      const events = yield* runTask(p, yield* toolkit, (event) =>
        Effect.gen(function*() {
          seen = event
          runsWhenSuspended = [...runs]
          const record = yield* journaled(p.file!, event.taskId)
          status = record !== undefined && Journal.isOpen(record) ? record.status : "ended"
          yield* p.client.approve(event.taskId, "r1")
        }))
      assert.isDefined(seen)
      assert.deepStrictEqual(seen!.pending.map((c) => [c.toolCallId, c.toolName, c.input]), [
        ["r1", "refund", { amount: 5, orderId: "A-1" }]
      ])
      assert.deepStrictEqual(runsWhenSuspended, ["lookup A-1"], "the lookup ran; the refund waited")
      assert.strictEqual(status, "suspended", "journaled as suspended")

      const done = lastOf(events)
      assert.strictEqual(done._tag, "TaskCompleted")
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"], "the refund ran once, after the approval")
      if (done._tag === "TaskCompleted") {
        assert.strictEqual(done.output, "r1=\"refunded 5 on A-1\" | l1=\"order A-1: paid\"")
      }
      const requested = events.flatMap((e) => e._tag === "ToolCallRequested" ? [[e.toolCallId, e.approved ?? false]] : [])
      assert.deepStrictEqual(requested, [["l1", false], ["r1", true]], "the refund is delivered approved")
      // Turn 1 was replayed from the journal after the approval: the model was asked twice in all.
      assert.strictEqual((yield* p.requests).length, 2)
    }).pipe(quiet))

  it.scoped("a call whose id has a slash (as a model may give it) is decided as its own, not as a call of a child task", () =>
    Effect.gen(function*() {
      const slashed: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        { toolCalls: [{ id: "r/1", name: "refund", arguments: JSON.stringify({ orderId: "A-1", amount: 5 }) }] },
        (request) => ({ text: resultsOf(request).join(" | ") })
      ]
      const p = yield* platform({ journal: true, script: slashed })
      const { runs, toolkit } = makeTools()
      const events = yield* runTask(p, yield* toolkit, (event) => p.client.approve(event.taskId, "r/1"))
      const done = lastOf(events)
      assert.strictEqual(done._tag === "TaskCompleted" ? done.output : done._tag, "r/1=\"refunded 5 on A-1\"")
      assert.deepStrictEqual(runs, ["refund A-1"])
    }).pipe(quiet))

  it.scoped("denied with a reason, the refund never runs and the model reads the denial", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: true })
      const { runs, toolkit } = makeTools()
      const events = yield* runTask(p, yield* toolkit, (event) =>
        p.client.deny(event.taskId, "r1", { reason: "over the refund limit" }))
      const done = lastOf(events)
      assert.strictEqual(done._tag, "TaskCompleted")
      if (done._tag === "TaskCompleted") {
        assert.strictEqual(
          done.output,
          "r1!refund: the user denied this call: over the refund limit; it did not run | l1=\"order A-1: paid\""
        )
      }
      assert.deepStrictEqual(runs, ["lookup A-1"], "the refund never ran")
      assert.deepStrictEqual(events.filter((e) => e._tag === "ToolCallRequested").map((e) => e._tag), ["ToolCallRequested"])
    }).pipe(quiet))

  it.scoped("another agent cannot decide on the task; a decision with nothing pending is refused, naming the call", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: true })
      const { toolkit } = makeTools()
      const refused: Array<string> = []
      let taskId = ""
      const events = yield* runTask(p, yield* toolkit, (event) =>
        Effect.gen(function*() {
          taskId = event.taskId
          const other = yield* Effect.flip(p.other.approve(event.taskId, "r1"))
          refused.push(`${other._tag}: ${other.message}`)
          const unknown = yield* Effect.flip(p.client.approve(event.taskId, "l1"))
          refused.push(`${unknown._tag}: ${unknown.message}`)
          yield* p.client.approve(event.taskId, "r1")
        }))
      assert.strictEqual(lastOf(events)._tag, "TaskCompleted")
      // Decided once: a second decision on the same call, the task ended, is refused too.
      const again = yield* Effect.flip(p.client.deny(taskId, "r1"))
      assert.deepStrictEqual(refused, [
        `UnknownTask: no task ${taskId} for this agent`,
        `NoPendingTaskApproval: task ${taskId} does not wait for approval of call l1 (it is not among the calls ` +
        `of its last TaskSuspended, it expired, or it was decided already)`
      ])
      assert.strictEqual(again._tag, "NoPendingTaskApproval")
      if (again._tag === "NoPendingTaskApproval") assert.strictEqual(again.toolCallId, "r1")
    }).pipe(quiet))

  it.scoped("with Hooks.approval on the serving side and no UserPrompt there, the approved call still runs", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: true })
      const { runs, toolkit } = makeTools()
      const events = yield* runTask(
        p,
        yield* toolkit,
        (event) => p.client.approve(event.taskId, "r1"),
        Hooks.layer({ tool: [Hooks.approval] })
      )
      const done = lastOf(events)
      assert.strictEqual(done._tag, "TaskCompleted")
      if (done._tag === "TaskCompleted") {
        assert.strictEqual(done.output, "r1=\"refunded 5 on A-1\" | l1=\"order A-1: paid\"")
      }
      assert.deepStrictEqual(runs, ["lookup A-1", "refund A-1"])
    }).pipe(quiet))
})

describe("platform approvals (no journal)", () => {
  it.scoped("nothing suspends: the serving side's Hooks.approval asks, as before; DecideApproval says why it cannot", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: false })
      const { runs, toolkit } = makeTools()
      const events = yield* runTask(
        p,
        yield* toolkit,
        () => Effect.dieMessage("a task without a journal cannot suspend"),
        Hooks.layer({ tool: [Hooks.approval] })
      )
      const done = lastOf(events)
      assert.strictEqual(done._tag, "TaskCompleted")
      assert.deepStrictEqual(events.filter((e) => e._tag === "TaskSuspended"), [])
      if (done._tag === "TaskCompleted") {
        assert.strictEqual(
          done.output,
          "r1!refund: needs approval, and no user is available to give it | l1=\"order A-1: paid\""
        )
      }
      assert.deepStrictEqual(runs, ["lookup A-1"])
      const started = events.find((e) => e._tag === "TaskStarted")!
      const refused = yield* Effect.flip(p.client.approve(started.taskId, "r1"))
      assert.strictEqual(refused._tag, "ApprovalsNeedJournal")
      assert.include(refused.message, "the platform runs without a journal")
    }).pipe(quiet))
})

describe("platform approvals: waiting", () => {
  const twoRefunds: ReadonlyArray<LanguageModel.ScriptedTurn> = [
    {
      toolCalls: [
        { id: "r1", name: "refund", arguments: JSON.stringify({ orderId: "A-1", amount: 5 }) },
        { id: "r2", name: "refund", arguments: JSON.stringify({ orderId: "A-2", amount: 7 }) }
      ]
    },
    (request) => ({ text: resultsOf(request).join(" | ") })
  ]

  it.scoped("a task waiting on two calls goes on once both are decided: one approved runs, one denied does not", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: true, script: twoRefunds })
      const { runs, toolkit } = makeTools()
      let between: { status: string; runs: Array<string> } | undefined
      const events = yield* runTask(p, yield* toolkit, (event) =>
        Effect.gen(function*() {
          assert.deepStrictEqual(event.pending.map((c) => c.toolCallId), ["r1", "r2"])
          yield* p.client.approve(event.taskId, "r1")
          const record = yield* journaled(p.file!, event.taskId)
          between = { status: record !== undefined && Journal.isOpen(record) ? record.status : "ended", runs: [...runs] }
          yield* p.client.deny(event.taskId, "r2", { reason: "one refund a day" })
        }))
      assert.deepStrictEqual(between, { status: "suspended", runs: [] }, "one decision of two: the task still waits")
      const done = lastOf(events)
      assert.strictEqual(done._tag, "TaskCompleted")
      if (done._tag === "TaskCompleted") {
        assert.strictEqual(
          done.output,
          "r1=\"refunded 5 on A-1\" | r2!refund: the user denied this call: one refund a day; it did not run"
        )
      }
      assert.deepStrictEqual(runs, ["refund A-1"])
      assert.strictEqual(events.filter((e) => e._tag === "TaskSuspended").length, 1)
    }).pipe(quiet))

  it.scoped("no one decides: at the approval's expiry the task goes on and the model reads that it expired", () =>
    Effect.gen(function*() {
      const p = yield* platform({ journal: true, approvalExpiry: "5 seconds" })
      const { runs, toolkit } = makeTools()
      // (Under 10 s: the stream's timeout is on the same TestClock.)
      const events = yield* runTask(p, yield* toolkit, () => TestClock.adjust("6 seconds"))
      const done = lastOf(events)
      assert.strictEqual(done._tag, "TaskCompleted")
      if (done._tag === "TaskCompleted") {
        assert.strictEqual(
          done.output,
          "r1!refund: no one decided on this call before its approval expired; it did not run | l1=\"order A-1: paid\""
        )
      }
      assert.deepStrictEqual(runs, ["lookup A-1"])
    }).pipe(quiet))

  it.scoped("a platform restarted while a task waits takes it back suspended; approved there, the task completes", () =>
    Effect.gen(function*() {
      const file = join(yield* tempDir, "journal.sqlite")
      const caller = { agentId: "agent-1", processId: "p-1" }
      const delivered: Array<string> = []
      /** The task's events on `mailbox` until `until`, each delivered call answered (`approved` marked). */
      const follow = (
        client: PlatformClient.PlatformClient["Type"],
        mailbox: Mailbox.ReadonlyMailbox<Protocol.TaskEvent, unknown>,
        until: (event: Protocol.TaskEvent) => boolean
      ) =>
        Mailbox.toStream(mailbox).pipe(
          Stream.tap((event) => {
            if (event._tag !== "ToolCallRequested") return Effect.void
            delivered.push(`${event.toolCallId}${event.approved === true ? " (approved)" : ""}`)
            const result = new ToolResult(`${event.name} done`, undefined)
            return client.completeToolCall({ ...caller, results: [{ taskId: event.taskId, toolCallId: event.toolCallId, result }] })
          }),
          Stream.takeUntil(until),
          Stream.runCollect,
          Effect.map((events) => [...events]),
          Effect.timeout("10 seconds")
        )
      const { manifest } = yield* makeTools().toolkit
      const first = yield* startPlatform({ journal: file })
      yield* first.client.register({ ...caller, manifest, manifestHash: "h" })
      const before = yield* Effect.scoped(Effect.flatMap(
        first.client.submitTask({ ...caller, prompt: "refund A-1" }),
        (mailbox) => follow(first.client, mailbox, (e) => e._tag === "TaskSuspended")
      ))
      const suspended = lastOf(before) as Suspended
      assert.strictEqual(suspended._tag, "TaskSuspended")
      assert.deepStrictEqual(delivered, ["l1"])
      yield* first.stop

      const second = yield* startPlatform({ journal: file })
      yield* Effect.addFinalizer(() => second.stop)
      const after = yield* Effect.scoped(Effect.gen(function*() {
        const mailbox = yield* second.client.attachTask({ ...caller, taskId: suspended.taskId })
        const waiting = yield* follow(second.client, mailbox, (e) => e._tag === "TaskSuspended")
        // The same call waits, with the same expiry (at an offset of the restarted platform's).
        const { offset: again, ...waits } = lastOf(waiting) as Suspended
        const { offset: _, ...waited } = suspended
        assert.deepStrictEqual(waits, waited, "the same call waits, with the same expiry")
        assert.isNumber(again)
        yield* second.client.approve(suspended.taskId, "r1")
        return yield* follow(second.client, mailbox, (e) => e._tag === "TaskCompleted" || e._tag === "TaskFailed")
      }))
      const done = lastOf(after)
      assert.strictEqual(done._tag, "TaskCompleted")
      if (done._tag === "TaskCompleted") assert.strictEqual(done.output, "r1=\"refund done\" | l1=\"lookup done\"")
      assert.deepStrictEqual(delivered, ["l1", "r1 (approved)"], "each call delivered once; the lookup's answer came from the journal")
      // The second platform's model was asked for turn 2 only: turn 1 came from the journal.
      assert.strictEqual((yield* second.requests).length, 1)
    }).pipe(quiet))
})
