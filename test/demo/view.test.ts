/** The demo's summary: the refunds it reports are those billing made, not a count inferred from the events. */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schedule, Stream } from "effect"
import * as Backend from "../../src/demo/Backend.js"
import * as DemoTools from "../../src/demo/tools.js"
import { LiveView, logsInto } from "../../src/demo/view.js"
import { Hooks, Idempotency, Invocation, LanguageModel, Timing, Toolkit, UserPrompt } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"

const refund = (id: string, amount: number) => ({
  id,
  name: "issue_refund",
  arguments: JSON.stringify({ order_id: "ord-4821", amount })
})

/**
 * A task served in process, as the demo serves it, to the model `script`, through the demo's tools and
 * backend: the text summary, and the JSON one, of views that saw its events.
 */
const summaries = (script: ReadonlyArray<LanguageModel.ScriptedTurn>) =>
  Effect.gen(function*() {
    const written: Array<string> = []
    const lines = new LiveView({ json: false, tty: false, write: (text) => void written.push(text) })
    const records: Array<string> = []
    const json = new LiveView({ json: true, tty: false, write: (text) => void records.push(text) })
    const served = yield* Serve.makeConfig(yield* Toolkit.make(DemoTools.lookupOrder, DemoTools.issueRefund))
    yield* Stream.runForEach(served.submitTask("refund the duplicate charge"), (event) =>
      Effect.sync(() => {
        lines.event(event)
        json.event(event)
      }))
    const refunds = yield* Effect.flatMap(Backend.Billing, (billing) => billing.refunds)
    lines.finish(refunds)
    json.finish(refunds)
    const summary = records.map((line) => JSON.parse(line) as Record<string, unknown>).find((r) => r.kind === "summary")
    return { text: written.join(""), summary: summary ?? {} }
  }).pipe(
    Effect.scoped,
    // The refunds need approval (the platform here has no journal): a person who says yes to each.
    Effect.provide(demoServices(script, [Hooks.approval]))
  )

/**
 * The demo's services around a task served in process to the model `script`, with the tool hooks
 * `hooks` (by default tool calls logged, and each refund approved by a person who says yes). Billing
 * fails its first refund: retried at once, not after the real backoff.
 */
const demoServices = (
  script: ReadonlyArray<LanguageModel.ScriptedTurn>,
  hooks: ReadonlyArray<Hooks.ToolHook> = [Hooks.logging, Hooks.approval]
) =>
  Layer.mergeAll(
    Backend.layer,
    Idempotency.layerMemory,
    Hooks.layer({ tool: hooks }),
    Layer.succeed(UserPrompt.UserPrompt, UserPrompt.UserPrompt.of({ ask: () => Effect.succeed("yes") })),
    PlatformClient.layerTest.pipe(
      Layer.provideMerge(
        PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) }).pipe(
          Layer.provide(LanguageModel.layerScripted(script, { repeat: false }))
        )
      ),
      Layer.provideMerge(Timing.layer({ toolRetry: Schedule.forever })),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(
        new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]])
      )))
    )
  )

describe("demo view: one ordered view", () => {
  it.effect("the log lines come into the view, each about a call after the call's line, as its retries do", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      const view = new LiveView({ json: false, tty: false, write: (text) => void written.push(text) })
      yield* logsInto(view, { json: false })
      // As the demo does: the retries into the view.
      const served = yield* Serve.makeConfig(yield* Toolkit.make(DemoTools.lookupOrder, DemoTools.issueRefund)).pipe(
        Effect.provideService(Invocation.InvocationObserver, { onRetry: (event) => view.retry(event) })
      )
      view.line("serving")
      yield* Stream.runForEach(served.submitTask("refund the duplicate charge"), (event) => Effect.sync(() => view.event(event)))
      const lines = written.join("").split("\n").map((line) => line.replace(/^\[\d+\.\d+s\] /, ""))
      const at = (pattern: RegExp) => {
        const index = lines.findIndex((line) => pattern.test(line))
        assert.isAtLeast(index, 0, `${pattern} in\n${lines.join("\n")}`)
        return index
      }
      const order = [
        at(/^INFO agent agent-1: registered 2 tool\(s\) \(lookup_order, issue_refund\)/),
        at(/^serving$/),
        at(/^task \S+ submitted$/),
        at(/^→ lookup_order /),
        at(/^INFO tool call .*toolCallId=o-1 .*tool=lookup_order/),
        at(/^✓ lookup_order \(o-1\)/),
        at(/^→ issue_refund /),
        at(/^⟳ issue_refund failed \(BillingUnavailable/),
        at(/^INFO tool call .*toolCallId=r-1 .*attempts=2 .*tool=issue_refund/),
        at(/^✓ issue_refund \(r-1\)/),
        at(/^task completed$/)
      ]
      assert.deepStrictEqual(order, [...order].sort((a, b) => a - b), lines.join("\n"))
    }).pipe(
      Effect.scoped,
      Effect.provide(demoServices([
        { toolCalls: [{ id: "o-1", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" }] },
        { toolCalls: [refund("r-1", 59.9)] },
        { text: "Refunded." }
      ]))
    ))
})

describe("demo summary: refunds", () => {
  it.effect("two refunds, one asked twice: made 2 (billing's), requested 3, although only 1 call was reused", () =>
    Effect.gen(function*() {
      const { summary, text } = yield* summaries([
        { toolCalls: [refund("r-1", 59.9), refund("r-2", 59.9), refund("r-3", 10)] },
        { text: "Refunded." }
      ])
      assert.match(text, /reused\s+1\n/)
      assert.match(text, /refunds made\s+2 \(issue_refund requested 3 times\)\n/)
      assert.deepStrictEqual([summary.refundsMade, summary.refundsRequested, summary.reused], [2, 3, 1])
    }))

  it.effect("a model that refunds nothing: none made, none requested", () =>
    Effect.gen(function*() {
      const { summary, text } = yield* summaries([
        { toolCalls: [{ id: "o-1", name: "lookup_order", arguments: "{\"order_id\":\"ord-4821\"}" }] },
        { text: "Nothing to refund." }
      ])
      assert.match(text, /refunds made\s+0 \(issue_refund requested 0 times\)\n/)
      assert.deepStrictEqual([summary.refundsMade, summary.refundsRequested], [0, 0])
    }))

  it.effect("a refund billing refused: requested once, none made", () =>
    Effect.gen(function*() {
      const { text } = yield* summaries([
        { toolCalls: [{ id: "r-1", name: "issue_refund", arguments: "{\"order_id\":\"ord-0000\",\"amount\":5}" }] },
        { text: "No such order." }
      ])
      assert.match(text, /failures\s+1\n/)
      assert.match(text, /refunds made\s+0 \(issue_refund requested 1 time\)\n/)
    }))
})
