/** A tracer that keeps each span's name and attributes, for tests that read what a span carried. */
import { Tracer } from "effect"

export interface RecordedSpan {
  readonly name: string
  readonly attributes: Map<string, unknown>
}

/** The tracer, and the spans it has made so far, in order. */
export const recordingTracer = (): { readonly tracer: Tracer.Tracer; readonly spans: Array<RecordedSpan> } => {
  const spans: Array<RecordedSpan> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      spans.push({ name, attributes })
      return {
        _tag: "Span",
        name,
        spanId: `s${spans.length}`,
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
