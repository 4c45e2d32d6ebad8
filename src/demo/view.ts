/**
 * The demo's live view: one line per event with the elapsed time, a spinner for calls in flight
 * when stdout is a terminal, NDJSON with `--json`, and a summary at the end. The demo's log lines
 * come into it too (`logsInto`), so that one view on stdout has every line in order.
 */
import { Cause, Effect, FiberRef, HashMap, HashSet, Logger, type Scope } from "effect"
import type { RetryEvent } from "../Invocation.js"
import type { TaskEvent } from "../protocol/Protocol.js"
import type { Refund } from "./Backend.js"
import { issueRefund } from "./tools.js"

/** What the summary counts. */
export interface Summary {
  turns: number
  toolCalls: number
  reused: number
  retries: number
  redelivered: number
  failures: number
  inputTokens: number
  outputTokens: number
  /** The `issue_refund` calls the model made, reused ones included: from the events. */
  refundsRequested: number
  /** The refunds billing made: from the backend, whatever the model asked. */
  refundsMade: number
}

const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/** Renders a task's events as they come. */
export class LiveView {
  readonly summary: Summary = {
    turns: 0,
    toolCalls: 0,
    reused: 0,
    retries: 0,
    redelivered: 0,
    failures: 0,
    inputTokens: 0,
    outputTokens: 0,
    refundsRequested: 0,
    refundsMade: 0
  }
  private readonly started = performance.now()
  private readonly inFlight = new Map<string, { readonly name: string; readonly at: number }>()
  private readonly seen = new Set<string>()
  /** Calls completed: a resumed task replays its journaled ones, which are not counted twice. */
  private readonly completed = new Set<string>()
  /** The last model turn seen: a resumed task replays the turns up to it from its journal. */
  private lastTurn = 0
  private replaying = false
  private spinner: ReturnType<typeof setInterval> | undefined
  private frame = 0
  /**
   * Lines about a call the view has not shown yet, by its id: a call runs (and logs, and retries) as
   * soon as it is delivered, before the task's stream has brought its events this far. They follow
   * the call's line.
   */
  private readonly waiting = new Map<string, Array<string>>()

  constructor(
    private readonly options: {
      readonly json: boolean
      /** Spinner and colours only on a terminal; plain lines otherwise. */
      readonly tty: boolean
      readonly write: (text: string) => void
    }
  ) {}

  private elapsed(): string {
    return `${((performance.now() - this.started) / 1000).toFixed(3)}s`
  }

  /** A line of the view (the spinner's line is cleared first). */
  line(text: string): void {
    if (this.options.json) return
    this.clearSpinner()
    this.options.write(`[${this.elapsed()}] ${text}\n`)
    this.drawSpinner()
  }

  /** A line about call `toolCallId`: now if its line is shown, else right after it (timed then, as every line). */
  private callLine(toolCallId: string, text: string): void {
    if (this.options.json) return
    if (this.seen.has(toolCallId)) return this.line(text)
    const lines = this.waiting.get(toolCallId) ?? []
    lines.push(text)
    this.waiting.set(toolCallId, lines)
  }

  /** The lines that waited for call `toolCallId`, now that its line is shown (or the view ends without it). */
  private release(toolCallId: string): void {
    const lines = this.waiting.get(toolCallId)
    this.waiting.delete(toolCallId)
    for (const text of lines ?? []) this.line(text)
  }

  /** A log line of the demo: level, message and annotations; one about a call (`toolCallId`) follows its line. */
  log(level: string, message: string, annotations: ReadonlyArray<readonly [string, unknown]>): void {
    const pairs = annotations.map(([key, value]) => {
      const text = typeof value === "string" ? value : JSON.stringify(value)
      return `${key}=${/\s/.test(text) ? JSON.stringify(text) : text}`
    })
    const text = [level, message, ...pairs].join(" ")
    const call = annotations.find(([key]) => key === "toolCallId")?.[1]
    if (typeof call === "string") return this.callLine(call, text)
    this.line(text)
  }

  private record(kind: string, data: object): void {
    if (this.options.json) {
      this.options.write(`${JSON.stringify({ elapsedMillis: Math.round(performance.now() - this.started), kind, ...data })}\n`)
    }
  }

  /** A task event. */
  event(event: TaskEvent): void {
    switch (event._tag) {
      case "TaskStarted":
        this.record("task_started", { taskId: event.taskId })
        return this.line(`task ${event.taskId} submitted`)
      case "TurnStarted":
        this.replaying = event.step <= this.lastTurn
        if (this.replaying) {
          this.record("turn_replayed", { step: event.step })
          return this.line(`model turn ${event.step} replayed from the journal (the model is not asked again)`)
        }
        this.lastTurn = event.step
        this.summary.turns++
        this.record("turn", { step: event.step })
        return this.line(`model turn ${event.step}`)
      case "ModelText":
        if (this.replaying) return
        this.record("text", { text: event.text })
        return this.line(`model: ${event.text}`)
      case "ToolCallRequested": {
        if (this.seen.has(event.toolCallId)) {
          this.summary.redelivered++
          this.record("redelivered", { toolCallId: event.toolCallId, name: event.name })
          return this.line(`↻ ${event.name} (${event.toolCallId}) delivered again`)
        }
        this.seen.add(event.toolCallId)
        this.inFlight.set(event.toolCallId, { name: event.name, at: performance.now() })
        this.record("call_started", { toolCallId: event.toolCallId, name: event.name, arguments: event.arguments })
        this.line(`→ ${event.name} ${event.arguments}`)
        return this.release(event.toolCallId)
      }
      case "ToolCallCompleted": {
        if (this.completed.has(event.toolCallId)) return this.record("call_replayed", { toolCallId: event.toolCallId })
        this.completed.add(event.toolCallId)
        this.summary.toolCalls++
        const started = this.inFlight.get(event.toolCallId)
        this.inFlight.delete(event.toolCallId)
        const millis = started === undefined ? 0 : Math.round(performance.now() - started.at)
        if (event.cached) this.summary.reused++
        if (event.name === issueRefund.name) this.summary.refundsRequested++
        if (event.result.error !== undefined) this.summary.failures++
        this.record("call_finished", {
          toolCallId: event.toolCallId,
          name: event.name,
          durationMillis: millis,
          reused: event.cached,
          ...(event.result.error === undefined ? { value: event.result.value } : { error: event.result.error })
        })
        if (event.cached) return this.line(`↺ ${event.name} (${event.toolCallId}) reused the earlier outcome, not run again`)
        return this.line(
          event.result.error === undefined
            ? `✓ ${event.name} (${event.toolCallId}) ${millis} ms`
            : `✗ ${event.name} (${event.toolCallId}) ${millis} ms: ${event.result.error}`
        )
      }
      case "TaskCompleted":
        this.summary.inputTokens = event.usage.inputTokens
        this.summary.outputTokens = event.usage.outputTokens
        this.record("task_completed", { output: event.output, steps: event.steps, usage: event.usage })
        return this.line("task completed")
      case "TaskFailed":
        this.record("task_failed", { reason: event.reason })
        return this.line(`task failed: ${event.reason}`)
      case "TaskSuspended":
        this.record("task_suspended", { pending: event.pending })
        return this.line(
          `⏸ task waits for approval of ${
            event.pending.map((p) => `${p.toolName} ${JSON.stringify(p.input)} (${p.toolCallId})`).join(", ")
          }`
        )
    }
  }

  /** A call approved by the demo's own code, not a person (the demo is not interactive). */
  approvedByDemo(toolCallId: string, toolName: string): void {
    this.record("approval", { toolCallId, toolName, decision: "approved", by: "demo code" })
    this.line(`✔ ${toolName} (${toolCallId}) approved by the demo's code, not a person: this demo is not interactive`)
  }

  /** A call the task waited for, decided by the person at the terminal. */
  decidedByPerson(toolCallId: string, toolName: string, approved: boolean): void {
    this.record("approval", { toolCallId, toolName, decision: approved ? "approved" : "denied", by: "person" })
    this.line(`${approved ? "✔" : "✘"} ${toolName} (${toolCallId}) ${approved ? "approved" : "denied"} at the terminal`)
  }

  /** A retry inside a served call. */
  retry(event: RetryEvent): void {
    this.summary.retries++
    this.record("retry", { ...event })
    this.callLine(
      event.toolCallId,
      `⟳ ${event.tool} failed (${event.error}); attempt ${event.attempt} in ${Math.round(event.delayMillis)} ms`
    )
  }

  /** The summary table, or its NDJSON line; `refunds` are those the backend's billing made. */
  finish(refunds: ReadonlyArray<Refund>): void {
    this.stopSpinner()
    // Lines about a call whose event never came: shown, not dropped.
    for (const toolCallId of [...this.waiting.keys()]) this.release(toolCallId)
    const wall = `${((performance.now() - this.started) / 1000).toFixed(2)} s`
    const s = this.summary
    s.refundsMade = refunds.length
    const requested = `${s.refundsRequested} time${s.refundsRequested === 1 ? "" : "s"}`
    const rows: ReadonlyArray<readonly [string, string]> = [
      ["model turns", String(s.turns)],
      ["tool calls", String(s.toolCalls)],
      ["reused", String(s.reused)],
      ["retries", String(s.retries)],
      ["redelivered", String(s.redelivered)],
      ["failures", String(s.failures)],
      ["tokens", `${s.inputTokens} in, ${s.outputTokens} out`],
      ["refunds made", `${s.refundsMade} (${issueRefund.name} requested ${requested})`],
      ["wall time", wall]
    ]
    if (this.options.json) {
      this.record("summary", { ...s, wallTime: wall })
      return
    }
    const width = Math.max(...rows.map(([k]) => k.length))
    this.options.write("\nsummary\n")
    for (const [k, v] of rows) this.options.write(`  ${k.padEnd(width)}  ${v}\n`)
  }

  /** Starts the spinner (terminals only). */
  startSpinner(): void {
    if (!this.options.tty || this.options.json || this.spinner !== undefined) return
    this.spinner = setInterval(() => {
      this.clearSpinner()
      this.frame = (this.frame + 1) % frames.length
      this.drawSpinner()
    }, 80)
  }

  stopSpinner(): void {
    if (this.spinner !== undefined) clearInterval(this.spinner)
    this.spinner = undefined
    this.clearSpinner()
  }

  private drawSpinner(): void {
    if (this.spinner === undefined || this.inFlight.size === 0) return
    const names = [...this.inFlight.values()].map((c) => c.name).join(", ")
    this.options.write(`${frames[this.frame]} ${this.inFlight.size} in flight: ${names}`)
  }

  private clearSpinner(): void {
    if (this.spinner !== undefined) this.options.write("\r\x1b[2K")
  }
}

/**
 * For the rest of the scope, the log lines (the demo's hooks, Serve's, the in-process platform's) go
 * into `view`, in their place among its lines, instead of to stderr, where they came out of order with
 * stdout. With `--json` they stay on stderr: stdout is NDJSON.
 */
export const logsInto = (
  view: LiveView,
  options: { readonly json: boolean }
): Effect.Effect<void, never, Scope.Scope> =>
  options.json ? Effect.void : Effect.locallyScopedWith(FiberRef.currentLoggers, (loggers) =>
    // The tracer's logger stays (log lines as span events); the others, the stderr one among them, give way.
    HashSet.add(
      HashSet.filter(loggers, (logger) => logger === Logger.tracerLogger),
      Logger.make(({ annotations, cause, logLevel, message }) => {
        const text = (Array.isArray(message) ? message : [message]).map(String).join(" ")
        view.log(
          logLevel.label,
          Cause.isEmpty(cause) ? text : `${text}: ${Cause.pretty(cause)}`,
          [...HashMap.toEntries(annotations)]
        )
      })
    ))

/** A view, with the log lines in it for the rest of the scope (`logsInto`): on stderr they came out of order. */
export const viewWithLogs = (
  options: ConstructorParameters<typeof LiveView>[0]
): Effect.Effect<LiveView, never, Scope.Scope> =>
  Effect.tap(Effect.sync(() => new LiveView(options)), (view) => logsInto(view, options))
