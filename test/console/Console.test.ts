/**
 * The console (docs: console) in a real Chromium (Debian's, driven by playwright-core) against an embedded
 * platform on a real port with its operator API: signing in, a submitted task appearing live in the list, an
 * approval decided with the keyboard alone in the inbox and the task going on, a task cancelled, a tool result
 * and a prompt holding HTML shown as text (no script runs, the CSP allows no inline script), a viewer offered no
 * approve, deny or cancel (and refused by the API when forging one), a task of 5,000 calls rendered with a
 * bounded number of rows and scrolled end to end, and axe-core finding no serious or critical violation on each
 * page. A screenshot of each page goes to the test's temporary folder.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, LogLevel, Runtime, Schema, Scope, Stream } from "effect"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import type { BrowserContext, Page } from "playwright-core"
import { LanguageModel, Tool, Toolkit, ToolResult } from "../../src/index.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { launchChromium } from "../support/chromium.js"
import { eventually, start } from "../support/queue.js"
import { admin, agentSettings as settings, operatorTokens, startOperatedPlatform, viewer } from "../support/operators.js"
import { resultsOf } from "../support/refundTools.js"

const hostile = "<img src=x onerror=alert(1)><script>window.__ran=1</script>"

/**
 * The prompt says what to call: `refund <order>` (needs approval), or `lookup <order>` (and a refund, which keeps
 * the task waiting); then the model says what it read.
 */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  (request) => {
    const first = request?.messages.find((message) => message._tag === "UserMessage")
    const [verb = "", orderId = ""] = (first?._tag === "UserMessage" ? first.text : "").split(" ")
    const refund = { id: "c1", name: "refund", arguments: JSON.stringify({ orderId, amount: 5 }) }
    // A lookup, and a refund that keeps the task waiting (its calls are journaled while it runs).
    const lookup = [{ id: "c1", name: "lookup", arguments: JSON.stringify({ orderId }) }, { ...refund, id: "c2" }]
    return { toolCalls: verb === "refund" ? [refund] : lookup }
  },
  (request) => ({ text: `model read ${resultsOf(request).join(" | ")}` })
]

const makeToolkit = Toolkit.make(
  Tool.make("refund", {
    description: "Refunds an order.",
    input: { orderId: Schema.String, amount: Schema.Number },
    output: Schema.String,
    timeout: "5 seconds",
    needsApproval: true
  }, ({ amount, orderId }) => Effect.succeed(`refunds made 1: ${amount} on ${orderId}`)),
  Tool.make("lookup", {
    description: "Looks an order up.",
    input: { orderId: Schema.String },
    output: Schema.String,
    timeout: "5 seconds"
  }, ({ orderId }) => Effect.succeed(`order ${orderId}: ${hostile}`))
)

/** The embedded platform with its console, agent-1's tools served in this process; a submit, the journal, the port. */
const startPlatform = Effect.gen(function*() {
  const { client, journal, port, scope } = yield* startOperatedPlatform({
    script,
    operatorTokens,
    console: { traceUrl: "http://jaeger.example/trace/{traceId}" }
  })
  const toolkit = yield* Effect.orDie(makeToolkit)
  const served = yield* Serve.makeConfig(toolkit).pipe(
    Effect.provideService(PlatformClient.PlatformClient, client),
    Effect.withConfigProvider(settings),
    Scope.extend(scope)
  )
  // Each task's events are read to its end in the background: the console decides and cancels them.
  const runtime = yield* Effect.runtime<never>()
  const submit = (prompt: string) =>
    void Runtime.runFork(runtime)(
      Stream.runDrain(served.submitTask(prompt)).pipe(Effect.ignore, Effect.provideService(PlatformClient.PlatformClient, client))
    )
  return { port, journal, submit }
})

type Platform = Effect.Effect.Success<typeof startPlatform>

/** A task of `count` calls written to the journal as a platform would, each answered. */
const manyCalls = (p: Platform, count: number) =>
  Effect.gen(function*() {
    const taskId = "task-many-calls"
    if (count === 0) return taskId
    yield* p.journal.started({ runId: taskId, kind: "task", agentId: "agent-1", processId: "p-1", prompt: "many", tools: [] })
    for (let i = 0; i < count; i++) {
      const call = { toolCallId: `c${String(i).padStart(4, "0")}`, name: "lookup", arguments: JSON.stringify({ orderId: `A-${i}` }), deadlineAt: Date.now() + 60_000 }
      yield* p.journal.callStarted(taskId, call)
      yield* p.journal.callEnded(taskId, call.toolCallId, ToolResult.ToolResult.success(`order A-${i}: paid`))
    }
    return taskId
  })

const signIn = async (page: Page, port: number, token: string) => {
  await page.goto(`http://127.0.0.1:${port}/console`)
  await page.fill("#token", token)
  await page.keyboard.press("Enter")
  await page.waitForSelector("h1:text-is('Tasks')")
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8")

/** axe-core's violations of impact serious or critical on the page as it is, as `rule: target`. */
const seriousViolations = async (page: Page): Promise<Array<string>> => {
  // Evaluated over the DevTools protocol: as a script element it would be refused by the page's CSP.
  await page.evaluate(axeSource)
  const violations = await page.evaluate(async () => {
    const browser = globalThis as any
    const results = await browser.axe.run(browser.document, { resultTypes: ["violations"] })
    return results.violations.map((v: any) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n: any) => String(n.target)) }))
  }) as Array<{ id: string; impact: string; targets: Array<string> }>
  return violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => `${v.id}: ${v.targets.join(", ")}`)
}

const shot = async (page: Page, folder: string, name: string) => {
  const path = join(folder, `${name}.png`)
  await page.screenshot({ path, fullPage: true })
  console.log(`console screenshot: ${path}`)
}

/** Tabs until the focused element matches `selector` (at most 40 presses); the keyboard alone. */
const tabTo = async (page: Page, selector: string) => {
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press("Tab")
    if (await page.evaluate((s) => (globalThis as any).document.activeElement?.matches(s) === true, selector)) return
  }
  throw new Error(`no Tab reached ${selector}`)
}

const browser = Effect.acquireRelease(
  Effect.promise(launchChromium),
  ({ close }) => Effect.promise(close)
)

/** Runs `body` with the browser and the platform, as one step of the test. */
const withConsole = <A>(
  body: (p: Platform, context: BrowserContext, folder: string, taskId: string) => Promise<A>,
  calls = 0
) =>
  Effect.gen(function*() {
    const p = yield* startPlatform
    const taskId = yield* manyCalls(p, calls)
    const { context, folder } = yield* browser
    return yield* Effect.promise(() => body(p, context, folder, taskId))
  }).pipe(Logger.withMinimumLogLevel(LogLevel.Error))

describe("the console in Chromium", () => {
  it.scopedLive("signs in, follows tasks live, approves by keyboard, cancels, renders hostile text as text, bounds rows, passes axe", () =>
    withConsole(async (p, context, folder) => {
      // The pages' headers: a strict CSP, nosniff, no cookie.
      const index = await fetch(`http://127.0.0.1:${p.port}/console`)
      const csp = index.headers.get("content-security-policy") ?? ""
      assert.include(csp, "script-src 'self'")
      assert.include(csp, "default-src 'none'")
      assert.notInclude(csp, "unsafe-inline")
      assert.strictEqual(index.headers.get("x-content-type-options"), "nosniff")
      assert.isNull(index.headers.get("set-cookie"))

      const page = await context.newPage()
      const dialogs: Array<string> = []
      page.on("dialog", (dialog) => (dialogs.push(dialog.message()), void dialog.dismiss()))
      await page.goto(`http://127.0.0.1:${p.port}/console`)
      await page.waitForSelector("#token")
      assert.deepStrictEqual(await seriousViolations(page), [], "sign-in page")
      await shot(page, folder, "sign-in")
      await signIn(page, p.port, admin)
      assert.deepStrictEqual(await seriousViolations(page), [], "Tasks page")
      await shot(page, folder, "tasks")

      // A task submitted now appears in the list, live (the page is not reloaded).
      const submittedAt = Date.now()
      p.submit("refund A-1")
      const row = await page.waitForSelector("tr[data-task]", { timeout: 10_000 })
      // The target is a second; the bound asserted is five, so that a loaded machine does not fail the suite.
      const appeared = Date.now() - submittedAt
      console.log(`console: a submitted task appeared in the list ${appeared} ms after its submit (target 1,000 ms)`)
      assert.isBelow(appeared, 5000)
      const taskId = (await row.getAttribute("data-task"))!
      await page.waitForSelector(`tr[data-task="${taskId}"] .status-waiting-for-approval`, { timeout: 10_000 })

      // The inbox: the refund approved with the keyboard alone; the task goes on and ends completed.
      await page.goto(`http://127.0.0.1:${p.port}/console#/approvals`)
      await page.waitForSelector(`[data-approval="${taskId}/c1"]`)
      assert.deepStrictEqual(await seriousViolations(page), [], "Approvals page")
      await shot(page, folder, "approvals")
      await tabTo(page, "button.approve")
      await page.keyboard.press("Enter")
      await page.waitForSelector(".decided li")
      await page.goto(`http://127.0.0.1:${p.port}/console#/task/${encodeURIComponent(taskId)}`)
      await page.waitForSelector("[data-status='ended']", { timeout: 10_000 })
      assert.include(await page.textContent("pre.final"), "refunds made 1")
      assert.deepStrictEqual(await seriousViolations(page), [], "Task page")
      await shot(page, folder, "task")

      // A tool result and a prompt holding HTML: shown as text, no element made of them, no script run.
      p.submit(`lookup ${hostile}`)
      await page.goto(`http://127.0.0.1:${p.port}/console#/tasks`)
      const hostileRow = await page.waitForSelector("tr[data-task]:not([data-task='" + taskId + "'])", { timeout: 10_000 })
      const hostileId = (await hostileRow.getAttribute("data-task"))!
      await page.goto(`http://127.0.0.1:${p.port}/console#/task/${encodeURIComponent(hostileId)}`)
      await page.waitForSelector("[data-status='waiting-for-approval']", { timeout: 10_000 })
      await page.click(".calls .row[data-call='c1']")
      assert.include(await page.textContent(".card .result"), "<img src=x onerror=alert(1)>")
      assert.include(await page.textContent("pre.prompt"), "<script>")
      assert.strictEqual(await page.locator("main img, main script").count(), 0)
      // An inline script the page itself tried to add is refused by the CSP.
      const inline = await page.evaluate(() => {
        const browser = globalThis as any
        const script = browser.document.createElement("script")
        script.textContent = "window.__inline = 1"
        browser.document.body.append(script)
        return browser.__inline === undefined && browser.__ran === undefined
      })
      assert.isTrue(inline, "no inline script ran")
      assert.deepStrictEqual(dialogs, [], "no dialog opened")

      // A task cancelled with its button.
      p.submit("refund B-2")
      await page.goto(`http://127.0.0.1:${p.port}/console#/approvals`)
      const waiting = await page.waitForSelector("[data-approval]:has-text('B-2')", { timeout: 10_000 })
      const cancelId = (await waiting.getAttribute("data-approval"))!.split("/")[0]!
      await page.goto(`http://127.0.0.1:${p.port}/console#/task/${encodeURIComponent(cancelId)}`)
      await page.click("button.cancel")
      await page.waitForSelector("[data-status='ended']", { timeout: 10_000 })
      assert.include(await page.textContent("[data-status]"), "cancelled")

      // The viewer: no approve, deny or cancel anywhere; a forged decision is refused by the API.
      p.submit("refund C-3")
      const viewerPage = await context.newPage()
      await signIn(viewerPage, p.port, viewer)
      await viewerPage.goto(`http://127.0.0.1:${p.port}/console#/approvals`)
      const pending = await viewerPage.waitForSelector("[data-approval]:has-text('C-3')", { timeout: 10_000 })
      const [pendingTask, pendingCall] = (await pending.getAttribute("data-approval"))!.split("/") as [string, string]
      assert.strictEqual(await viewerPage.locator("button.approve, button.deny").count(), 0)
      await viewerPage.goto(`http://127.0.0.1:${p.port}/console#/task/${encodeURIComponent(pendingTask)}`)
      await viewerPage.waitForSelector(`li[data-approval="${pendingCall}"]`)
      assert.strictEqual(await viewerPage.locator("button.approve, button.deny, button.cancel").count(), 0)
      const forged = await viewerPage.evaluate(async ([task, call]) => {
        const token = (globalThis as any).sessionStorage.getItem("agent-tools.console.operator-token")
        const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
        const decide = await fetch(`/api/v1/approvals/${task}/${call}`, { method: "POST", headers, body: "{\"decision\":\"approve\"}" })
        const cancel = await fetch(`/api/v1/tasks/${task}/cancel`, { method: "POST", headers, body: "{}" })
        return [decide.status, cancel.status]
      }, [pendingTask, pendingCall])
      assert.deepStrictEqual(forged, [403, 403])
      // Approved elsewhere (the API, as an approver): the viewer's open page shows the call's outcome as it ends.
      const approvedAt = Date.now()
      const approved = await fetch(`http://127.0.0.1:${p.port}/api/v1/approvals/${pendingTask}/${pendingCall}`, {
        method: "POST",
        headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
        body: "{\"decision\":\"approve\"}"
      })
      assert.strictEqual(approved.status, 200)
      await viewerPage.waitForSelector(`.calls .row[data-call='${pendingCall}'] .outcome-succeeded`, { timeout: 10_000 })
      // The target is a second from the call's end (here, the decision: the call ends at once); the bound asserted
      // is five, so that a loaded machine does not fail the suite.
      const shown = Date.now() - approvedAt
      console.log(`console: a call's outcome shown ${shown} ms after its decision (target 1,000 ms)`)
      assert.isBelow(shown, 5000)

      // Agents: the serving process, live, its tools.
      await page.goto(`http://127.0.0.1:${p.port}/console#/agents`)
      await page.waitForSelector("section[aria-label='agent agent-1'] td:text-is('live, watching for tasks')")
      assert.deepStrictEqual(await seriousViolations(page), [], "Agents page")
      await shot(page, folder, "agents")
    }), 90_000)

  it.scopedLive("a task of 5,000 calls: a bounded number of rows in the document, scrolled end to end", () =>
    withConsole(async (p, context, folder, taskId) => {
      const page = await context.newPage()
      await signIn(page, p.port, viewer)
      await page.evaluate(() => {
        const browser = globalThis as any
        browser.__longTasks = []
        new PerformanceObserver((list) => {
          for (const entry of list.getEntries()) browser.__longTasks.push(Math.round(entry.duration))
        }).observe({ type: "longtask" as any, buffered: true })
      })
      await page.goto(`http://127.0.0.1:${p.port}/console#/task/${taskId}`)
      await page.waitForSelector("[data-call='c0000']", { timeout: 20_000 })
      const rows = await page.locator(".calls .row").count()
      assert.isAtMost(rows, 100, "only the rows on screen are in the document")
      assert.isAtLeast(rows, 5)
      // End to end, a screenful at a time.
      const steps = await page.evaluate(() => {
        const viewport = (globalThis as any).document.querySelector(".calls")
        return Math.ceil(viewport.scrollHeight / viewport.clientHeight)
      })
      for (let step = 1; step <= steps; step += 20) {
        await page.evaluate((s) => {
          const viewport = (globalThis as any).document.querySelector(".calls")
          viewport.scrollTop = s * viewport.clientHeight
        }, step)
        await page.waitForTimeout(16)
        assert.isAtMost(await page.locator(".calls .row").count(), 100)
      }
      await page.evaluate(() => {
        const viewport = (globalThis as any).document.querySelector(".calls")
        viewport.scrollTop = viewport.scrollHeight
      })
      await page.waitForSelector("[data-call='c4999']")
      assert.isAtMost(await page.locator(".calls .row").count(), 100)
      await shot(page, folder, "task-5000-calls")
      // Long tasks: the target is none over 200 ms; the bound asserted is a second, so that a loaded machine does not
      // fail the suite (measured here: 0-89 ms with the machine's two cores busy).
      const longTasks: ReadonlyArray<number> = await page.evaluate(() => (globalThis as any).__longTasks)
      console.log(`console: 5,000-call task, long tasks (ms): ${JSON.stringify(longTasks)} (target: none over 200)`)
      assert.isBelow(Math.max(0, ...longTasks), 1000)
    }, 5000), 60_000)

  it.scopedLive("the demo (npm start) with DEMO_APPROVALS=console: its refund approved in the inbox by keyboard alone; its page says refunds made 1", () =>
    Effect.gen(function*() {
      const demo = yield* start("src/main.ts", { DEMO_APPROVALS: "console", NO_COLOR: "1" })
      /** The first line of the demo's that includes `text` (its lines begin with the time since its start). */
      const including = (text: string, seconds: number) =>
        Effect.map(
          eventually(() => demo.lines.some((l) => l.includes(text)), `a line with "${text}"`, seconds),
          () => demo.lines.find((l) => l.includes(text))!
        )
      const said = yield* including("platform listening on ", 120)
      const [, consoleAt, token] = /console at (\S+) while the demo runs \(operator token (\S+)\)/.exec(said) ?? []
      assert.isDefined(consoleAt, said)
      const port = Number(new URL(consoleAt!).port)
      const { context, folder } = yield* browser
      yield* Effect.promise(async () => {
        const page = await context.newPage()
        await signIn(page, port, token!)
        await page.goto(`http://127.0.0.1:${port}/console#/approvals`)
        const waiting = await page.waitForSelector("[data-approval]", { timeout: 60_000 })
        const taskId = (await waiting.getAttribute("data-approval"))!.split("/")[0]!
        // The model asked for the refund twice in its turn: both calls wait; each approved with the keyboard alone.
        for (let decided = 1; decided <= 2; decided++) {
          await page.waitForSelector(`[data-approval^="${taskId}/"] button.approve`)
          await tabTo(page, "button.approve")
          await page.keyboard.press("Enter")
          await page.waitForFunction((n) => (globalThis as any).document.querySelectorAll(".decided li").length >= n, decided)
        }
        await page.goto(`http://127.0.0.1:${port}/console#/task/${encodeURIComponent(taskId)}`)
        await page.waitForSelector("[data-status='ended']", { timeout: 30_000 })
        assert.include(await page.textContent("pre.final"), "refunds made 1")
        await shot(page, folder, "demo-task")
      })
      // The demo's own summary agrees: one refund made, though the model asked for two.
      yield* including("the platform and its console stay up", 60)
      assert.isTrue(demo.lines.some((l) => l.includes("refunds made 1")), demo.lines.join("\n"))
    }).pipe(Logger.withMinimumLogLevel(LogLevel.Error)), 180_000)
})
