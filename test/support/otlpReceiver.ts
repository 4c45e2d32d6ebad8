/**
 * An OTLP/HTTP receiver on 127.0.0.1, as a collector would be: it takes what `@effect/opentelemetry`'s
 * exporter really sends (`http/json`: spans, log records and metrics as OTLP's JSON) and keeps it,
 * flattened, for a test to read.
 */
import { createServer, type Server } from "node:http"

/** An OTLP attribute value, as JSON carries it. */
interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: string | number
  readonly doubleValue?: number
  readonly boolValue?: boolean
  readonly arrayValue?: { readonly values?: ReadonlyArray<AnyValue> }
}
interface KeyValue {
  readonly key: string
  readonly value: AnyValue
}

const valueOf = (value: AnyValue): unknown =>
  value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.doubleValue ??
    value.boolValue ?? value.arrayValue?.values?.map(valueOf)

const attributesOf = (list: ReadonlyArray<KeyValue> | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]))

/** A span as received. */
export interface ReceivedSpan {
  readonly service: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  readonly status: { readonly code?: number; readonly message?: string } | undefined
}

/** A log record as received. */
export interface ReceivedLog {
  readonly service: string
  readonly body: unknown
  readonly traceId: string | undefined
  readonly spanId: string | undefined
  readonly attributes: Record<string, unknown>
}

/** A metric as received: its name, and the data points' attributes and values. */
export interface ReceivedMetric {
  readonly service: string
  readonly name: string
  readonly points: ReadonlyArray<{ readonly attributes: Record<string, unknown>; readonly value: unknown }>
}

export interface Receiver {
  readonly url: string
  readonly spans: Array<ReceivedSpan>
  readonly logs: Array<ReceivedLog>
  readonly metrics: Array<ReceivedMetric>
  /** Every request body as received, in its JSON text (to search for what must never be exported). */
  readonly bodies: Array<string>
  readonly close: () => Promise<void>
}

const serviceOf = (resource: { readonly attributes?: ReadonlyArray<KeyValue> } | undefined): string =>
  String(attributesOf(resource?.attributes)["service.name"] ?? "")

/** Starts a receiver on a free port of 127.0.0.1. */
export const startReceiver = async (): Promise<Receiver> => {
  const spans: Array<ReceivedSpan> = []
  const logs: Array<ReceivedLog> = []
  const metrics: Array<ReceivedMetric> = []
  const bodies: Array<string> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      bodies.push(text)
      try {
        receive(request.url ?? "", JSON.parse(text))
        response.writeHead(200, { "content-type": "application/json" }).end("{}")
      } catch (error) {
        response.writeHead(400).end(String(error))
      }
    })
  })
  const receive = (path: string, body: any): void => {
    if (path.endsWith("/v1/traces")) {
      for (const rs of body.resourceSpans ?? []) {
        for (const ss of rs.scopeSpans ?? []) {
          for (const span of ss.spans ?? []) {
            spans.push({
              service: serviceOf(rs.resource),
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === "" ? undefined : span.parentSpanId,
              name: span.name,
              kind: span.kind,
              attributes: attributesOf(span.attributes),
              links: (span.links ?? []).map((l: { traceId: string; spanId: string }) => ({ traceId: l.traceId, spanId: l.spanId })),
              status: span.status
            })
          }
        }
      }
    } else if (path.endsWith("/v1/logs")) {
      for (const rl of body.resourceLogs ?? []) {
        for (const sl of rl.scopeLogs ?? []) {
          for (const record of sl.logRecords ?? []) {
            logs.push({
              service: serviceOf(rl.resource),
              body: record.body === undefined ? undefined : valueOf(record.body),
              traceId: record.traceId || undefined,
              spanId: record.spanId || undefined,
              attributes: attributesOf(record.attributes)
            })
          }
        }
      }
    } else if (path.endsWith("/v1/metrics")) {
      for (const rm of body.resourceMetrics ?? []) {
        for (const sm of rm.scopeMetrics ?? []) {
          for (const metric of sm.metrics ?? []) {
            const data = metric.sum ?? metric.gauge ?? metric.histogram ?? metric.summary ?? {}
            metrics.push({
              service: serviceOf(rm.resource),
              name: metric.name,
              points: (data.dataPoints ?? []).map((p: { attributes?: ReadonlyArray<KeyValue>; asInt?: string; asDouble?: number; count?: string; sum?: number }) => ({
                attributes: attributesOf(p.attributes),
                value: p.asInt !== undefined ? Number(p.asInt) : p.asDouble ?? (p.count !== undefined ? { count: Number(p.count), sum: p.sum } : undefined)
              }))
            })
          }
        }
      }
    }
  }
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    logs,
    metrics,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
