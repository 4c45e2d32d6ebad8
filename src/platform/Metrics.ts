/**
 * The platform's task metrics and task log lines (docs: operations), and the Prometheus text of every metric.
 *
 * The metrics live in Effect's registry, as the others (internal/util/metrics.ts): `@effect/opentelemetry`'s
 * exporter sends them over OTLP, and `layerPrometheus` serves the same registry as Prometheus text at `/metrics`
 * on the platform's port (a name's dots become underscores there). They are updated only while one of them is
 * on (`Exporting`); the log lines are written always, at INFO.
 */
import {
  Clock,
  Context,
  Effect,
  FiberRef,
  FiberRefs,
  Layer,
  LogLevel,
  Metric,
  MetricBoundaries,
  MetricLabel,
  type MetricPair,
  MetricState,
  Option,
  Runtime
} from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"
import { Exporting } from "../internal/util/metrics.js"
import type { TaskEvent } from "../protocol/Protocol.js"

// --- the metrics ---

/** `agent_tools.platform.tasks.submitted`: tasks made here (submitted, or started by an `exec_agent` call), by agent. */
export const tasksSubmitted = Metric.counter("agent_tools.platform.tasks.submitted", {
  description: "Tasks submitted (or started by exec_agent) on this platform process, by agent",
  incremental: true
})

/** `agent_tools.platform.tasks.started`: a task's loop started here (again after a suspension, a restart, a failover). */
export const tasksStarted = Metric.counter("agent_tools.platform.tasks.started", {
  description: "Task loops started on this platform process (again after a suspension, restart or failover), by agent",
  incremental: true
})

/** `agent_tools.platform.tasks.ended`: tasks ended here, by agent and outcome (completed, failed, cancelled). */
export const tasksEnded = Metric.counter("agent_tools.platform.tasks.ended", {
  description: "Tasks ended on this platform process, by agent and outcome",
  incremental: true
})

/** `agent_tools.platform.tasks.suspended`: a task suspended for approvals, by agent. */
export const tasksSuspended = Metric.counter("agent_tools.platform.tasks.suspended", {
  description: "Tasks suspended to wait for approvals, by agent",
  incremental: true
})

/** `agent_tools.platform.tasks.waiting`: a task told its stream it waits (its database, or a process of its agent). */
export const tasksWaiting = Metric.counter("agent_tools.platform.tasks.waiting", {
  description: "TaskWaiting said on a task's stream (its database unreachable, or no process of its agent attached), by agent",
  incremental: true
})

/** `agent_tools.platform.tasks.open`: tasks held here and not ended, by agent. */
export const tasksOpen = Metric.gauge("agent_tools.platform.tasks.open", {
  description: "Tasks held on this platform process and not ended, by agent"
})

/** `agent_tools.platform.delivery.latency`: seconds from a call's first delivery to its answer. */
export const deliveryLatency = Metric.histogram(
  "agent_tools.platform.delivery.latency",
  MetricBoundaries.fromIterable([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]),
  "Seconds from a tool call's first delivery to a serving process until its answer"
)

const agentLabels = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()

/** The labels of an agent (and outcome), made once each. */
const labelsOf = (agentId: string, outcome?: string): ReadonlyArray<MetricLabel.MetricLabel> => {
  const key = outcome === undefined ? agentId : `${agentId}\u0000${outcome}`
  let known = agentLabels.get(key)
  if (known === undefined) {
    known = [
      MetricLabel.make("agent_tools.agent", agentId),
      ...(outcome === undefined ? [] : [MetricLabel.make("agent_tools.outcome", outcome)])
    ]
    // Agents are the platform's tokens': a bound keeps the map small whatever happens.
    if (agentLabels.size < 10_000) agentLabels.set(key, known)
  }
  return known
}

// --- a task's life: its metrics and log lines ---

/** Whether a line at INFO passes `minimum`, the fiber's minimum level. */
const infoLogged = (minimum: LogLevel.LogLevel): boolean => !LogLevel.greaterThan(minimum, LogLevel.Info)

/** What the book of tasks (TaskBook.ts) tells of each task's life. */
export interface TaskLife {
  /** An event of the task, as it is emitted: its end, its suspension, its waiting. */
  readonly event: (task: { readonly taskId: string; readonly agentId: string }, event: TaskEvent) => void
  /** The task says it waits for its database (`Task.waiting`, not an emitted event). */
  readonly waiting: (agentId: string) => void
  /** The agent now holds `tasks` tasks here not ended. */
  readonly open: (agentId: string, tasks: number) => void
}

const outcomes = { TaskCompleted: "completed", TaskFailed: "failed", TaskCancelled: "cancelled" } as const

/** A task's life as the book tells it: counted while `Exporting`, logged at INFO (the runtime's logger). */
export const taskLife: Effect.Effect<TaskLife> = Effect.gen(function*() {
  const exporting = yield* Exporting
  const runtime = yield* Effect.runtime<never>()
  const log = Runtime.runSync(runtime)
  // The runtime's level is that of the layer's build: a platform that logs warnings only builds no line (nor a fiber).
  const logged = infoLogged(FiberRefs.getOrDefault(runtime.fiberRefs, FiberRef.currentMinimumLogLevel))
  const info = (taskId: string, agentId: string, message: string) => {
    if (logged) log(Effect.annotateLogs(Effect.logInfo(`task ${taskId} of agent ${agentId}: ${message}`), { taskId, agentId }))
  }
  return {
    event: ({ agentId, taskId }, event) => {
      switch (event._tag) {
        case "TaskCompleted":
        case "TaskFailed":
        case "TaskCancelled": {
          if (exporting) tasksEnded.unsafeUpdate(1, labelsOf(agentId, outcomes[event._tag]))
          return event._tag === "TaskCompleted"
            ? info(taskId, agentId, "completed")
            : event._tag === "TaskFailed"
            ? info(taskId, agentId, `failed: ${event.reason.slice(0, 500)}`)
            : info(taskId, agentId, `cancelled by ${event.by}`)
        }
        case "TaskSuspended": {
          if (exporting) tasksSuspended.unsafeUpdate(1, labelsOf(agentId))
          return info(taskId, agentId, `suspended for ${event.pending.length} approval(s)`)
        }
        case "TaskWaiting":
          if (exporting) tasksWaiting.unsafeUpdate(1, labelsOf(agentId))
          return
      }
    },
    waiting: (agentId) => {
      if (exporting) tasksWaiting.unsafeUpdate(1, labelsOf(agentId))
    },
    open: (agentId, tasks) => {
      if (exporting) tasksOpen.unsafeUpdate(tasks, labelsOf(agentId))
    }
  }
})

/**
 * A step of a task's life: `counter` counted while `Exporting`, and its INFO line, made only when the fiber logs INFO
 * (a platform that logs warnings only builds no line, annotations and all, twice a task).
 */
const lifeStep = (counter: typeof tasksSubmitted, taskId: string, agentId: string, step: string): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    if (Context.get(fiber.currentContext, Exporting)) counter.unsafeUpdate(1, labelsOf(agentId))
    return infoLogged(fiber.getFiberRef(FiberRef.currentMinimumLogLevel))
      ? Effect.annotateLogs(Effect.logInfo(`task ${taskId} of agent ${agentId}: ${step}`), { taskId, agentId })
      : Effect.void
  })

/** A task made here (submitted, or started by an `exec_agent` call): counted and logged. */
export const submitted = (taskId: string, agentId: string): Effect.Effect<void> =>
  lifeStep(tasksSubmitted, taskId, agentId, "submitted")

/** A task's loop starts here: counted and logged. */
export const started = (taskId: string, agentId: string): Effect.Effect<void> => lifeStep(tasksStarted, taskId, agentId, "started")

/**
 * An open task whose loop had run elsewhere (`turns` journaled) taken up here: its holder stopped, died or lost its
 * shard (a failover), or this process restarted. Logged.
 */
export const takenUp = (taskId: string, agentId: string, turns: number): Effect.Effect<void> =>
  Effect.annotateLogs(
    Effect.logInfo(`task ${taskId} of agent ${agentId}: taken up from the journal after ${turns} turn(s) ` +
      "(its holder stopped or its shard moved here); it goes on"),
    { taskId, agentId }
  )

/** `answer`, a delivered call's wait for its answer, timed from `sentAt` into `deliveryLatency` while `exporting`. */
export const timedAnswer = <A>(answer: Effect.Effect<A>, sentAt: number, exporting: boolean): Effect.Effect<A> =>
  exporting
    ? Effect.tap(answer, () => Effect.map(Clock.currentTimeMillis, (now) => deliveryLatency.unsafeUpdate((now - sentAt) / 1000, [])))
    : answer

// --- Prometheus ---

/** Where the Prometheus text is served on the platform's port. */
export const metricsPath = "/metrics"

/** Whether `url` is the Prometheus path. */
export const isMetricsPath = (url: string | undefined): boolean => (url ?? "").split("?")[0] === metricsPath

/** A name as Prometheus takes it: what is not a letter, digit, `_` (or `:` in a metric's name) becomes `_`. */
const promName = (name: string, metric: boolean): string => {
  const cleaned = name.replace(metric ? /[^a-zA-Z0-9_:]/g : /[^a-zA-Z0-9_]/g, "_")
  return /^[0-9]/.test(cleaned) ? `_${cleaned}` : cleaned
}

const escapeValue = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")

const escapeHelp = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const numberText = (value: number | bigint): string =>
  typeof value === "bigint"
    ? value.toString()
    : Number.isNaN(value)
    ? "NaN"
    : value === Infinity
    ? "+Inf"
    : value === -Infinity
    ? "-Inf"
    : String(value)

const labelText = (labels: ReadonlyArray<readonly [string, string]>): string =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${promName(k, false)}="${escapeValue(v)}"`).join(",")}}`

/** One metric's samples, as lines, and its Prometheus type. */
const samplesOf = (
  name: string,
  pair: MetricPair.MetricPair.Untyped
): { readonly type: string; readonly lines: Array<string> } | undefined => {
  const labels = pair.metricKey.tags.map((tag) => [tag.key, tag.value] as const)
  const state = pair.metricState
  if (MetricState.isCounterState(state)) return { type: "counter", lines: [`${name}${labelText(labels)} ${numberText(state.count)}`] }
  if (MetricState.isGaugeState(state)) return { type: "gauge", lines: [`${name}${labelText(labels)} ${numberText(state.value)}`] }
  if (MetricState.isHistogramState(state)) {
    const buckets = state.buckets.filter(([boundary]) => boundary !== Infinity).map(([boundary, count]) =>
      `${name}_bucket${labelText([...labels, ["le", numberText(boundary)]])} ${count}`
    )
    return {
      type: "histogram",
      lines: [
        ...buckets,
        `${name}_bucket${labelText([...labels, ["le", "+Inf"]])} ${state.count}`,
        `${name}_sum${labelText(labels)} ${numberText(state.sum)}`,
        `${name}_count${labelText(labels)} ${state.count}`
      ]
    }
  }
  if (MetricState.isSummaryState(state)) {
    return {
      type: "summary",
      lines: [
        ...state.quantiles.flatMap(([q, value]) =>
          value._tag === "Some" ? [`${name}${labelText([...labels, ["quantile", String(q)]])} ${numberText(value.value)}`] : []
        ),
        `${name}_sum${labelText(labels)} ${numberText(state.sum)}`,
        `${name}_count${labelText(labels)} ${state.count}`
      ]
    }
  }
  if (MetricState.isFrequencyState(state)) {
    return {
      type: "counter",
      lines: [...state.occurrences].map(([key, count]) => `${name}${labelText([...labels, ["key", key]])} ${count}`)
    }
  }
  return undefined
}

/** The Prometheus text format (0.0.4) of `pairs`: one `# HELP` and `# TYPE` a name, then its samples. */
export const prometheusText = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped>): string => {
  const byName = new Map<string, { type: string; help: string | undefined; lines: Array<string> }>()
  for (const pair of pairs) {
    const name = promName(pair.metricKey.name, true)
    const samples = samplesOf(name, pair)
    if (samples === undefined) continue
    const known = byName.get(name)
    if (known === undefined) {
      byName.set(name, { type: samples.type, help: Option.getOrUndefined(pair.metricKey.description), lines: [...samples.lines] })
    } else if (known.type === samples.type) {
      known.lines.push(...samples.lines)
    }
  }
  const out: Array<string> = []
  for (const [name, { help, lines, type }] of [...byName].sort(([a], [b]) => a.localeCompare(b))) {
    if (help !== undefined && help !== "") out.push(`# HELP ${name} ${escapeHelp(help)}`)
    out.push(`# TYPE ${name} ${type}`, ...lines)
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}

/** The Prometheus endpoint, when it is on: what `layerWebSocket` serves at `/metrics`. */
export class Prometheus extends Context.Tag("agent-tools/platform/Prometheus")<Prometheus, {
  readonly listener: (run: (effect: Effect.Effect<void>) => void) => (request: IncomingMessage, response: ServerResponse) => void
}>() {}

/**
 * The metrics on (`Exporting`) and served as Prometheus text at `/metrics` on the platform's port, unauthenticated
 * (as Prometheus scrapes): provide it beneath `layerWebSocket` and the handlers (`--metrics`, `PLATFORM_METRICS`).
 */
export const layerPrometheus: Layer.Layer<Prometheus> = Layer.merge(
  Layer.succeed(Prometheus, {
    listener: (run) => (request, response) => {
      if (request.method !== "GET" && request.method !== "HEAD") {
        response.writeHead(405, { "content-type": "text/plain" })
        return void response.end("GET only\n")
      }
      run(Effect.map(Metric.snapshot, (pairs) => {
        response.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8", "cache-control": "no-store" })
        response.end(request.method === "HEAD" ? undefined : prometheusText(pairs))
      }))
    }
  }),
  Layer.succeed(Exporting, true)
)
