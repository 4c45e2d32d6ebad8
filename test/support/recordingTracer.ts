/** A tracer that keeps each span's name and attributes, for tests that read what a span carried. */
import { Tracer } from "effect"

export interface RecordedSpan {
  readonly name: string
  readonly attributes: Map<string, unknown>
  readonly spanId: string
  /** The id of the span it is a child of: undefined for a root span. */
  readonly parentSpanId: string | undefined
}

/** The tracer, and the spans it has made so far, in order. */
export const recordingTracer = (): { readonly tracer: Tracer.Tracer; readonly spans: Array<RecordedSpan> } => {
  const spans: Array<RecordedSpan> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      const spanId = `s${spans.length + 1}`
      const parentSpanId = parent._tag === "Some" ? parent.value.spanId : undefined
      spans.push({ name, attributes, spanId, parentSpanId })
      return {
        _tag: "Span",
        name,
        spanId,
        traceId: "t",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end: () => {},
        attribute: (key, value) => void attributes.set(key, value),
        event: () => {},
        addLinks: () => {}
      }
    },
    context: (f) => f()
  })
  return { tracer, spans }
}
