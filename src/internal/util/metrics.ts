/**
 * The metrics (design: Observability): OpenTelemetry's GenAI client metrics and ours, updated only
 * while a telemetry layer exports them (`Exporting`), so that a program that exports nothing does
 * not pay for them. Effect's metric registry holds them; `@effect/opentelemetry`'s exporter reads it.
 */
import { Context, Metric, MetricBoundaries, MetricLabel } from "effect"

/** True while a telemetry layer exports (`Telemetry.layer`): the metrics below are updated only then. */
export class Exporting extends Context.Reference<Exporting>()("agent-tools/Telemetry/Exporting", {
  defaultValue: () => false
}) {}

/** `gen_ai.client.token.usage`: tokens a model request used, by `gen_ai.token.type` (input, output). */
export const tokenUsage = Metric.histogram(
  "gen_ai.client.token.usage",
  MetricBoundaries.fromIterable([1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]),
  "Measures number of input and output tokens used"
)

/** `gen_ai.client.operation.duration`: seconds a model request took. */
export const operationDuration = Metric.histogram(
  "gen_ai.client.operation.duration",
  MetricBoundaries.fromIterable([0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]),
  "GenAI operation duration"
)

/** `agent_tools.tool.calls`: calls through the pipeline, by tool and outcome (`success` or the failure's kind). */
export const toolCalls = Metric.counter("agent_tools.tool.calls", {
  description: "Tool calls through the pipeline, by tool and outcome",
  incremental: true
})

/** `agent_tools.tool.retries`: a failed attempt run again, by tool. */
export const toolRetries = Metric.counter("agent_tools.tool.retries", { description: "Tool handler retries", incremental: true })

/** `agent_tools.tool.reused`: a call answered by an earlier same call's outcome, by tool. */
export const toolReused = Metric.counter("agent_tools.tool.reused", {
  description: "Calls answered from an earlier same call's outcome",
  incremental: true
})

const labels = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()

/** The labels of one tool (and outcome), made once. */
export const toolLabels = (tool: string, outcome?: string): ReadonlyArray<MetricLabel.MetricLabel> => {
  const key = outcome === undefined ? tool : `${tool}\u0000${outcome}`
  let known = labels.get(key)
  if (known === undefined) {
    known = outcome === undefined
      ? [MetricLabel.make("gen_ai.tool.name", tool)]
      : [MetricLabel.make("gen_ai.tool.name", tool), MetricLabel.make("agent_tools.outcome", outcome)]
    // Tool names are a toolkit's (at most 64 each); a bound keeps a hostile stream of names from growing it.
    if (labels.size < 10_000) labels.set(key, known)
  }
  return known
}

/** The labels of a model request's metrics. */
export const modelLabels = (
  provider: string | undefined,
  model: string | undefined,
  tokenType?: "input" | "output"
): ReadonlyArray<MetricLabel.MetricLabel> => [
  MetricLabel.make("gen_ai.operation.name", "chat"),
  MetricLabel.make("gen_ai.provider.name", provider ?? "unknown"),
  MetricLabel.make("gen_ai.request.model", model ?? "unknown"),
  ...(tokenType === undefined ? [] : [MetricLabel.make("gen_ai.token.type", tokenType)])
]

/** `agent_tools.platform.deliveries`: calls the platform delivered to a serving process, first time or again. */
export const deliveries = Metric.counter("agent_tools.platform.deliveries", {
  description: "Tool calls delivered to serving processes (delivery: first or again)",
  incremental: true
})

/** `agent_tools.claims.taken_over`: a crashed owner's claim taken over by another process. */
export const claimsTakenOver = Metric.counter("agent_tools.claims.taken_over", {
  description: "Dedupe claims taken over after their owner's lease expired",
  incremental: true
})

/** The labels of a delivery. */
export const deliveryLabels = {
  first: [MetricLabel.make("agent_tools.delivery", "first")],
  again: [MetricLabel.make("agent_tools.delivery", "again")]
} as const
