/**
 * Trace sampling (design: Observability; docs: observability), as OpenTelemetry's SDKs do it from
 * `OTEL_TRACES_SAMPLER`: a tracer around the exporter's that decides at each span whether it is exported. A root
 * span is sampled by the sampler (`traceidratio`: by its trace id, so that every process with the same ratio decides
 * alike); under a `parentbased_*` sampler a span with a parent, local or remote (`traceparent`'s flag), follows it.
 * A trace is whole or absent: a span is exported only when its trace's root was. The database's spans (`sql.*`, the
 * `@effect/sql` statements') are left out, their children with them, unless asked for.
 */
import { Option, Tracer } from "effect"

/** The samplers of `OTEL_TRACES_SAMPLER` this runtime honours. */
export const samplerNames = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
] as const

/** A sampler of `samplerNames`. */
export type SamplerName = typeof samplerNames[number]

/** How spans are sampled: the sampler, and the ratio of `traceidratio` (0..1). */
export interface Sampler {
  readonly name: SamplerName
  readonly ratio?: number | undefined
}

/** 2^52: the trace id's last 13 hex digits, a whole number JavaScript holds exactly, over it. */
const scale = 2 ** 52

/** Whether a trace with `traceId` is among `ratio` of them (its last 13 hex digits, uniform, against the ratio). */
export const traceIdSampled = (traceId: string, ratio: number): boolean =>
  ratio >= 1 ? true : ratio <= 0 ? false : parseInt(traceId.slice(-13), 16) < ratio * scale

/** Whether a span of trace `traceId` with `parent` is sampled under `sampler`. */
const decide = (sampler: Sampler, parent: Tracer.AnySpan | undefined, traceId: string): boolean => {
  if (sampler.name.startsWith("parentbased_") && parent !== undefined) return parent.sampled
  switch (sampler.name) {
    case "always_on":
    case "parentbased_always_on":
      return true
    case "always_off":
    case "parentbased_always_off":
      return false
    default:
      return traceIdSampled(traceId, sampler.ratio ?? 1)
  }
}

/** `span` as a span nobody exports: its identity kept (children and `traceparent` name it), `sampled` false. */
const unexported = (span: Tracer.Span): Tracer.Span => {
  let status: Tracer.SpanStatus = span.status
  return {
    _tag: "Span",
    name: span.name,
    spanId: span.spanId,
    traceId: span.traceId,
    parent: span.parent,
    context: span.context,
    get status() {
      return status
    },
    attributes: new Map(),
    links: [],
    sampled: false,
    kind: span.kind,
    end: (endTime, exit) => {
      status = { _tag: "Ended", startTime: status.startTime, endTime, exit }
    },
    attribute: () => {},
    event: () => {},
    addLinks: () => {}
  }
}

/** Whether a span named `name` is the database's (`@effect/sql`'s `sql.execute`, `sql.transaction`...). */
export const isDatabaseSpan = (name: string): boolean => name.startsWith("sql.")

/**
 * `inner` (an exporter's tracer) sampled by `sampler`, the database's spans left out unless `databaseSpans`. With
 * `always_on` and database spans, `inner` itself.
 */
export const sampled = (inner: Tracer.Tracer, sampler: Sampler, databaseSpans: boolean): Tracer.Tracer => {
  if (sampler.name === "always_on" && databaseSpans) return inner
  // Left out for being the database's (or beneath one): their children are left out whatever the sampler.
  const database = new WeakSet<Tracer.AnySpan>()
  return Tracer.make({
    span(name, parent, context, links, startTime, kind, options) {
      const span = inner.span(name, parent, context, links, startTime, kind, options)
      const above = Option.getOrUndefined(parent)
      const left = !databaseSpans && (isDatabaseSpan(name) || (above !== undefined && database.has(above)))
      if (!left && decide(sampler, above, span.traceId)) return span
      const silent = unexported(span)
      if (left) database.add(silent)
      return silent
    },
    context: (f, fiber) => inner.context(f, fiber)
  })
}
