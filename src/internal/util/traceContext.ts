/**
 * W3C Trace Context (`traceparent`, https://www.w3.org/TR/trace-context/): how a span's identity
 * crosses a process boundary our own protocols do not carry it over: MCP's `_meta` and a delivered
 * call of the platform (design: Observability).
 */
import { Tracer } from "effect"

const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** `span`'s `traceparent`: version 00, its trace and span ids, sampled or not. */
export const traceparentOf = (span: Tracer.AnySpan): string =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/**
 * The remote span a `traceparent` names, to parent the spans made for it here; undefined for anything
 * else (another version, ids of the wrong length, all zeros), which starts a trace of its own.
 */
export const parseTraceparent = (text: unknown): Tracer.ExternalSpan | undefined => {
  if (typeof text !== "string" || text.length !== 55) return undefined
  const match = traceparentPattern.exec(text)
  if (match === null || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return undefined
  return Tracer.externalSpan({ traceId: match[1]!, spanId: match[2]!, sampled: (parseInt(match[3]!, 16) & 1) === 1 })
}
