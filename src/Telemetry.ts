/**
 * OpenTelemetry export (design: Observability): the runs', turns' and calls' spans, the log lines
 * inside them and the metrics, sent to any OTLP/HTTP backend (Jaeger, Grafana Tempo, Honeycomb, an
 * OpenTelemetry Collector) through `@effect/opentelemetry`'s exporter, with no OpenTelemetry SDK in
 * the process. `layerFromEnv` reads the standard variables a user already sets; `layer` is the same
 * configured in code. With neither, nothing is exported and no span is made (internal/util/tracing.ts).
 *
 * Message contents (prompts, model texts, tool arguments and results) are never exported unless
 * `captureContent` is on: they may hold personal data.
 */
import { Config, type ConfigError, Context, Duration, Effect, Either, Layer, Option, Schema } from "effect"
import { Exporting } from "./internal/util/metrics.js"
import { type Sampler, samplerNames, sampled } from "./internal/util/sampling.js"

export type { Sampler, SamplerName } from "./internal/util/sampling.js"

/** How the exporter sends: protobuf (OTLP's default) or JSON, both over HTTP. */
export type Protocol = "http/protobuf" | "http/json"

/** Where and how to export. */
export interface Options {
  /** The collector's base URL (`http://localhost:4318`): spans go to `/v1/traces`, logs to `/v1/logs`, metrics to `/v1/metrics`. */
  readonly endpoint: string
  /** Headers every export request carries (an API key, say). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** `service.name` of the resource. Default `agent-tools`. */
  readonly serviceName?: string | undefined
  readonly serviceVersion?: string | undefined
  /** More resource attributes (`deployment.environment`, ...), beside those of `OTEL_RESOURCE_ATTRIBUTES`. */
  readonly attributes?: Readonly<Record<string, string>> | undefined
  /** Default `http/protobuf`. */
  readonly protocol?: Protocol | undefined
  /** Export prompts, model texts, tool arguments and results on the spans. Default false. */
  readonly captureContent?: boolean | undefined
  /** How often spans and logs are sent. Default 5 s (and at the end of the layer's scope). */
  readonly exportInterval?: Duration.DurationInput | undefined
  /** How often metrics are sent. Default 10 s. */
  readonly metricsExportInterval?: Duration.DurationInput | undefined
  /**
   * Which traces are exported (`OTEL_TRACES_SAMPLER`'s samplers: `parentbased_traceidratio` with `ratio: 0.1` exports
   * about a tenth of the traces, each whole). Default `parentbased_always_on`: every trace.
   */
  readonly sampler?: Sampler | undefined
  /** Export the database's spans (`sql.execute`, `sql.transaction`: about ten a platform task). Default false. */
  readonly databaseSpans?: boolean | undefined
}

/**
 * Whether message contents go on the spans (`Options.captureContent`): a `Context.Reference`, off
 * unless a telemetry layer with `captureContent` is provided.
 */
export class CaptureContent extends Context.Reference<CaptureContent>()("agent-tools/Telemetry/CaptureContent", {
  defaultValue: () => false
}) {}

/** A telemetry variable that cannot be used: named, with the form it needs (its value is not echoed: it may hold a key). */
export class TelemetryConfigError extends Schema.TaggedError<TelemetryConfigError>("agent-tools/TelemetryConfigError")(
  "TelemetryConfigError",
  { variable: Schema.String, expected: Schema.String }
) {
  override get message(): string {
    return `${this.variable} is malformed: ${this.expected}`
  }
}

/**
 * Exports to `options.endpoint`: every span (runs, turns, calls, and the user's own), the log lines
 * (added beside the logger in place, not replacing it), and the metrics. What is pending is sent when
 * the layer's scope ends.
 */
export const layer = (options: Options): Layer.Layer<never> => {
  // Loaded only when asked for: a program that exports nothing does not pay for the exporter's modules.
  const otlp: Layer.Layer<never> = Layer.unwrapEffect(Effect.promise(async () => {
    const [FetchHttpClient, OtlpLogger, OtlpMetrics, OtlpTracer, OtlpSerialization] = await Promise.all([
      import("@effect/platform/FetchHttpClient"),
      import("@effect/opentelemetry/OtlpLogger"),
      import("@effect/opentelemetry/OtlpMetrics"),
      import("@effect/opentelemetry/OtlpTracer"),
      import("@effect/opentelemetry/OtlpSerialization")
    ])
    const base = options.endpoint.replace(/\/+$/, "")
    const common = {
      resource: {
        serviceName: options.serviceName ?? defaultServiceName,
        serviceVersion: options.serviceVersion,
        attributes: options.attributes ?? {}
      },
      headers: options.headers ?? {},
      shutdownTimeout: Duration.seconds(3)
    }
    // Otlp.layer's three, the tracer behind the sampler.
    const tracer = Layer.unwrapScoped(Effect.map(
      OtlpTracer.make({ ...common, url: `${base}/v1/traces`, exportInterval: options.exportInterval }),
      (otlpTracer) =>
        Layer.setTracer(sampled(otlpTracer, options.sampler ?? { name: "parentbased_always_on" }, options.databaseSpans === true))
    ))
    return Layer.mergeAll(
      OtlpLogger.layer({ ...common, url: `${base}/v1/logs`, exportInterval: options.exportInterval }),
      OtlpMetrics.layer({
        ...common,
        url: `${base}/v1/metrics`,
        exportInterval: options.metricsExportInterval ?? Duration.seconds(10)
      }),
      tracer
    ).pipe(
      Layer.provide(options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
      Layer.provide(FetchHttpClient.layer)
    )
  }))
  const exporting = Layer.merge(otlp, Layer.succeed(Exporting, true))
  return options.captureContent === true ? Layer.merge(exporting, Layer.succeed(CaptureContent, true)) : exporting
}

/** The default `service.name`. */
export const defaultServiceName = "agent-tools"

/** `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs, comma-separated, values percent-encoded (W3C Baggage's form). */
export const parseHeaders = (text: string): Either.Either<Record<string, string>, TelemetryConfigError> =>
  parsePairs(text, "OTEL_EXPORTER_OTLP_HEADERS", {
    expected: "key=value pairs, comma-separated, values percent-encoded (e.g. x-api-key=abc,x-team=a%20b)",
    // An HTTP header's name is a token; its value has no line break (a CR LF would start another header).
    key: /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/,
    keyIs: "an HTTP header name"
  })

/** The most `OTEL_EXPORTER_OTLP_HEADERS` or `OTEL_RESOURCE_ATTRIBUTES` may hold: 8 KiB, the headers most servers take at all. */
export const maxPairsLength = 8 * 1024

/**
 * `key=value` pairs, comma-separated, values percent-encoded (the form of `OTEL_EXPORTER_OTLP_HEADERS` and
 * `OTEL_RESOURCE_ATTRIBUTES`): each key matching `options.key`, no value with a control character (CR, LF, NUL),
 * at most `maxPairsLength` in all. Else the error names the variable, the entry (by number, not its text: a header
 * may hold a secret) and the form.
 */
const parsePairs = (
  text: string,
  variable: string,
  options: { readonly expected: string; readonly key: RegExp; readonly keyIs: string }
): Either.Either<Record<string, string>, TelemetryConfigError> => {
  const refused = (why: string) => Either.left(new TelemetryConfigError({ variable, expected: `${why}; the form is ${options.expected}` }))
  if (text.length > maxPairsLength) return refused(`it holds ${text.length} characters, over ${maxPairsLength}`)
  const pairs: Record<string, string> = Object.create(null)
  const entries = text.split(",").map((p) => p.trim()).filter((p) => p !== "")
  for (let i = 0; i < entries.length; i++) {
    const pair = entries[i]!
    const equals = pair.indexOf("=")
    const key = equals <= 0 ? "" : pair.slice(0, equals).trim()
    let value: string | undefined
    try {
      value = equals <= 0 ? undefined : decodeURIComponent(pair.slice(equals + 1).trim())
    } catch {
      value = undefined
    }
    const at = `entry ${i + 1} of ${entries.length}`
    if (key === "" || value === undefined) return refused(`${at} is not key=value`)
    if (!options.key.test(key)) return refused(`${at}'s key is not ${options.keyIs}`)
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(value)) return refused(`${at}'s value holds a control character (a line break?)`)
    pairs[key] = value
  }
  return Either.right({ ...pairs })
}

/** `OTEL_RESOURCE_ATTRIBUTES`: `key=value` pairs as the OpenTelemetry SDKs read them; checked here, read by the exporter. */
export const parseResourceAttributes = (text: string): Either.Either<Record<string, string>, TelemetryConfigError> =>
  parsePairs(text, "OTEL_RESOURCE_ATTRIBUTES", {
    expected: "key=value pairs, comma-separated, values percent-encoded (e.g. deployment.environment=prod,team=a%20b)",
    key: /^[A-Za-z0-9_.\-/]+$/,
    keyIs: "an attribute name (letters, digits, . _ - /)"
  })

const optional = (name: string) => Config.option(Config.string(name)).pipe(Config.map(Option.getOrUndefined))

/**
 * The sampler `OTEL_TRACES_SAMPLER` names (default `parentbased_always_on`) with the ratio of `OTEL_TRACES_SAMPLER_ARG`
 * (a number from 0 to 1, default 1) for the `*traceidratio` ones; a sampler not honoured here, or a ratio that is no
 * such number, is an error naming the variable and the form.
 */
export const samplerFromEnv: Effect.Effect<Sampler, TelemetryConfigError | ConfigError.ConfigError> = Effect.gen(function*() {
  const name = ((yield* optional("OTEL_TRACES_SAMPLER")) ?? "").trim().toLowerCase() || "parentbased_always_on"
  const known = samplerNames.find((sampler) => sampler === name)
  if (known === undefined) {
    return yield* new TelemetryConfigError({ variable: "OTEL_TRACES_SAMPLER", expected: `one of ${samplerNames.join(", ")}` })
  }
  if (!known.endsWith("traceidratio")) return { name: known }
  const arg = ((yield* optional("OTEL_TRACES_SAMPLER_ARG")) ?? "").trim()
  const ratio = arg === "" ? 1 : Number(arg)
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    return yield* new TelemetryConfigError({
      variable: "OTEL_TRACES_SAMPLER_ARG",
      expected: `the ratio of traces ${known} exports, a number from 0 to 1 (e.g. 0.1)`
    })
  }
  return { name: known, ratio }
})

/** `AGENT_TOOLS_DATABASE_SPANS`: true (or 1) exports the database's spans; false, 0 or unset does not. */
const databaseSpansFromEnv = Effect.flatMap(optional("AGENT_TOOLS_DATABASE_SPANS"), (text) => {
  const value = (text ?? "").trim().toLowerCase()
  return ["", "true", "false", "1", "0"].includes(value)
    ? Effect.succeed(value === "true" || value === "1")
    : Effect.fail(
      new TelemetryConfigError({
        variable: "AGENT_TOOLS_DATABASE_SPANS",
        expected: "true (or 1) to export the database's spans, false (or 0, or unset) not to"
      })
    )
})

/**
 * The export the standard variables ask for: `OTEL_EXPORTER_OTLP_ENDPOINT` (none set: nothing is
 * exported, and this layer is empty), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_PROTOCOL`
 * (`http/protobuf`, the default, or `http/json`), `OTEL_SERVICE_NAME` (else `serviceName`, else
 * `agent-tools`), `OTEL_RESOURCE_ATTRIBUTES` (read by the exporter itself); and, as OpenTelemetry's GenAI instrumentations read it,
 * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` for the contents; `OTEL_TRACES_SAMPLER` and
 * `OTEL_TRACES_SAMPLER_ARG` for the traces exported (`samplerFromEnv`), `AGENT_TOOLS_DATABASE_SPANS=true` for the
 * database's spans. The CLI's commands use it.
 */
export const layerFromEnv = (
  defaults?: { readonly serviceName?: string | undefined; readonly attributes?: Readonly<Record<string, string>> | undefined }
): Layer.Layer<never, TelemetryConfigError | ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const endpoint = yield* optional("OTEL_EXPORTER_OTLP_ENDPOINT")
    if (endpoint === undefined || endpoint.trim() === "") return Layer.empty
    if (!/^https?:\/\/[^\s]+$/.test(endpoint.trim())) {
      return yield* new TelemetryConfigError({
        variable: "OTEL_EXPORTER_OTLP_ENDPOINT",
        expected: "an http:// or https:// URL, the collector's base (e.g. http://localhost:4318)"
      })
    }
    const headers = yield* Either.match(parseHeaders((yield* optional("OTEL_EXPORTER_OTLP_HEADERS")) ?? ""), {
      onLeft: Effect.fail,
      onRight: Effect.succeed
    })
    const protocol = ((yield* optional("OTEL_EXPORTER_OTLP_PROTOCOL")) ?? "http/protobuf").trim()
    if (protocol !== "http/protobuf" && protocol !== "http/json") {
      return yield* new TelemetryConfigError({
        variable: "OTEL_EXPORTER_OTLP_PROTOCOL",
        expected: "http/protobuf (the default) or http/json; grpc is not supported"
      })
    }
    yield* Either.match(parseResourceAttributes((yield* optional("OTEL_RESOURCE_ATTRIBUTES")) ?? ""), {
      onLeft: Effect.fail,
      onRight: () => Effect.void
    })
    const capture = ((yield* optional("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")) ?? "").trim().toLowerCase()
    if (!["", "true", "false", "1", "0"].includes(capture)) {
      return yield* new TelemetryConfigError({
        variable: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        expected: "true (or 1) to capture the messages, false (or 0, or unset) not to"
      })
    }
    return layer({
      endpoint: endpoint.trim(),
      headers,
      protocol,
      serviceName: (yield* optional("OTEL_SERVICE_NAME"))?.trim() || defaults?.serviceName,
      attributes: defaults?.attributes,
      captureContent: capture === "true" || capture === "1",
      sampler: yield* samplerFromEnv,
      databaseSpans: yield* databaseSpansFromEnv
    })
  }))
