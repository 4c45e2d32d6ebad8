/**
 * The pipeline behind `Invocation.run` (design: Input, Error text, Deadlines, Retries, Call context), and its fast
 * path for loops that start many calls at once (the agent loop): a call started on the caller's
 * stack that completes synchronously is its `ToolResult`, with no fiber switch; one that suspends is
 * an effect awaiting it. Public callers use `Invocation.run`; only the agent loop starts calls here.
 *
 * The stages, in order: `traced` (the call's span) -> `admit` (deadline check, strict decode) ->
 * `withHooks` (the tool hooks around the rest) -> `runHandler` (the attempts, then `toResult`) ->
 * `withRetries` (re-runs a failed attempt) -> `runAttempt` (one run of the handler, within the
 * deadline) -> `toResult` (output encode, JSON and limits check, the failure's kind and text).
 * Every failure on the way becomes a failed `ToolResult`; nothing escapes as a defect.
 *
 * The configuration, the observer and the options are declared here and re-exported by
 * `Invocation`, so that this module needs nothing of it (no import cycle).
 */
import {
  Cause,
  Clock,
  DefaultServices,
  Context,
  Duration,
  Effect,
  Either,
  Exit,
  Fiber,
  FiberId,
  FiberRef,
  FiberRefs,
  LogLevel,
  Option,
  ParseResult,
  Runtime,
  RuntimeFlags,
  type Schedule,
  type SchemaAST,
  Tracer
} from "effect"
import { formatIssues } from "../util/issues.js"
import * as Json from "../util/json.js"
import * as Reuse from "./reuse.js"
import { awaitStarted, type Started } from "./reuse.js"
import { stepper } from "../util/schedule.js"
import { listening } from "../util/tracing.js"
import * as Logs from "./logs.js"
import { ToolWorkers } from "../worker/service.js"
import { mayRun, notApproved, type RunState, runToolHooks, type ToolCall, ToolHooks } from "../hooks/tool.js"
import { CaptureContent } from "../../Telemetry.js"
import * as Metrics from "../util/metrics.js"
import { Timing } from "../../Timing.js"
import * as Tool from "../../Tool.js"
import { CallContext, ToolContext, type ToolCallInfo } from "../../ToolContext.js"
import {
  DeadlinePassed,
  errorText,
  HandlerFailed,
  Interrupted,
  InvalidInput,
  InvalidOutput,
  TimedOut,
  type ToolFailure,
  ToolResult
} from "../../ToolResult.js"
import { formatDuration } from "../util/duration.js"

/** Limits of the pipeline. */
export interface Config {
  /** Arguments, and outputs, larger than this (UTF-8 bytes of the JSON) are refused. Default 1 MiB. */
  readonly maxPayloadBytes: number
  /** Outputs nested deeper than this (arrays and objects) are refused. Default 128. */
  readonly maxDepth: number
  /** Error texts are cut to this many characters. Default 2,048. */
  readonly maxErrorLength: number
  /** `ToolContext.isExpiring` turns true when this little time is left. Default 1 second. */
  readonly expiringThreshold: Duration.DurationInput
  /**
   * The level of the log line of a handler's raw failure (a throw, a rejection, a defect), written
   * where the handler ran, with its stack; `"None"`: no line. Default `"Error"`. A typed failure
   * (`Effect.fail`) is the tool's answer and is not logged.
   */
  readonly failureLogLevel?: LogLevel.Literal | undefined
  /**
   * A synchronous body on the event loop that holds it longer than this logs a warning naming the
   * tool and the line that moves it to a worker thread. Default 100 ms.
   */
  readonly blockingThreshold?: Duration.DurationInput | undefined
}

/** The defaults of `Config`. */
export const defaultConfig: Config = {
  maxPayloadBytes: 1024 * 1024,
  maxDepth: 128,
  maxErrorLength: 2048,
  expiringThreshold: "1 second",
  failureLogLevel: "Error",
  blockingThreshold: "100 millis"
}

/** The limits in force: a `Context.Reference`, so a bare `Invocation.run` gets `defaultConfig`. */
export class InvocationConfig extends Context.Reference<InvocationConfig>()("agent-tools/InvocationConfig", {
  defaultValue: (): Config => defaultConfig
}) {}

/** A retry about to happen (design: Retries), for progress views and logs. */
export interface RetryEvent {
  readonly tool: string
  readonly toolCallId: string
  /** The attempt that will run next (2, 3, ...). */
  readonly attempt: number
  readonly delayMillis: number
  /** The error text of the failure being retried. */
  readonly error: string
}

/** Observers of the pipeline: a `Context.Reference` whose default observes nothing. */
export class InvocationObserver extends Context.Reference<InvocationObserver>()("agent-tools/InvocationObserver", {
  defaultValue: (): { readonly onRetry: (event: RetryEvent) => void } => ({ onRetry: () => {} })
}) {}

/** Who is calling, and by when the call must be done. */
export interface Options {
  /** Default `"local"`. */
  readonly taskId?: string | undefined
  /** Default: a fresh `local-<n>` id. */
  readonly toolCallId?: string | undefined
  /** The delivered deadline (epoch milliseconds or a Date): the call ends at the earlier of this and its timeout. */
  readonly deadlineAt?: number | Date | undefined
  /**
   * Called just before the handler runs (after decoding, the deadline check and the hooks that
   * come first): a call interrupted before it never had an effect (design: Interruption and shutdown).
   */
  readonly onStart?: (() => void) | undefined
  /** The run whose state hooks may keep (design: Hooks): `Agent` sets it per run, `Serve` per task, `Mcp` per session. */
  readonly run?: RunState | undefined
  /**
   * A person approved this call through the run's journal or the platform (design: Durable runs); `Agent` and
   * `Serve` set it. Without it, a tool with `needsApproval` runs only if a hook approves (`Hooks.approved`).
   */
  readonly approved?: boolean | undefined
  /**
   * The scope whose outcomes an idempotent tool's call reuses and adds to (design: Per-run reuse): the same
   * call (`sameCall`: the tool and its decoded input) is answered by the first one's outcome. `Agent`
   * gives one per run, `Mcp` one per session.
   */
  readonly reuse?: Reuse.Outcomes | undefined
  /**
   * The store in which the call's delivery (task id, call id) runs once, however often it comes
   * (design: Delivery dedupe): `Serve` gives its `Idempotency` store.
   */
  readonly dedupe?: Reuse.Deliveries | undefined
  /**
   * The span the call's span is a child of, in place of the caller's current one: a span of another
   * process, named by the W3C `traceparent` a call carried (MCP's `_meta`, a platform's delivery).
   */
  readonly parentSpan?: Tracer.AnySpan | undefined
  /**
   * The caller's step once the input is decoded, in place of the plain reuse-or-run: an agent's
   * journaled replay and approvals (design: Durable runs). It decides from the `Admitted` call.
   */
  readonly gate?: Gate | undefined
}

/** A decoded call as a `gate` sees it, with what it may do with it. */
export interface Admitted {
  readonly tool: Tool.Any
  readonly toolCallId: string
  /** The decoded input. */
  readonly input: unknown
  /** Its input's part of the `sameCall` key (an approval is bound to it). */
  readonly inputKey: string
  /** The outcome of the same call in the `reuse` scope, for an idempotent tool (the call is then marked reused). */
  readonly reused: () => Started | undefined
  /** Keeps `started` as the same call's outcome in the `reuse` scope, for an idempotent tool; gives what to await. */
  readonly keep: (started: Started) => Started
  /**
   * Runs it (hooks, then the handler), on the fiber that runs the effect; `deadlineAt` and `approved`
   * take the place of the options' (a journaled call keeps its journaled deadline).
   */
  readonly run: (overrides?: {
    readonly deadlineAt?: number | undefined
    readonly approved?: boolean | undefined
  }) => Effect.Effect<ToolResult>
}

/** See `Options.gate`. */
export type Gate = (admitted: Admitted) => Started

const succeeded = (value: unknown): ToolResult => new ToolResult(value, undefined)
/** A failed result, its text cut to the limit of `config`. */
const failed = (failure: ToolFailure, config: Config): ToolResult =>
  new ToolResult(undefined, failure, config.maxErrorLength)

/**
 * The fiber that makes a call, as the call needs it: its services, limits and clock, and its fiber
 * refs for the handler's fiber. Made once per batch of calls by loops that start many (`Agent`).
 */
export class CallingFiber {
  readonly context: Context.Context<never>
  readonly clock: Clock.Clock
  readonly config: Config
  readonly tracing: boolean
  /** A telemetry layer exports the metrics (`Metrics.Exporting`): the call's are counted. */
  readonly exporting: boolean
  constructor(readonly fiber: Fiber.RuntimeFiber<unknown, unknown>, readonly runtimeFlags: RuntimeFlags.RuntimeFlags) {
    this.context = fiber.currentContext
    this.clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    this.config = Context.get(this.context, InvocationConfig)
    this.tracing = listening(fiber)
    this.exporting = Context.get(this.context, Metrics.Exporting)
  }
}

export { awaitStarted, type Started } from "./reuse.js"

/**
 * THE entry of the pipeline: `Invocation.run` is it as an effect; loops that start many calls at once
 * (the agent loop) call it on their own stack. A call that completes synchronously is its result,
 * with no fiber switch; one that suspends is already running when this returns, and the returned
 * effect awaits it within its deadline. Reuse (`reuse`, `dedupe`) and a caller's `gate` are options
 * here, so no caller decodes or keys an input itself.
 */
export const start = (calling: CallingFiber, tool: Tool.Any, args: unknown, options?: Options): Started =>
  options?.dedupe === undefined ? traced(calling, tool, args, options) : deduped(options.dedupe, tool, args, options)

/**
 * A handler's value that is the call's result as it is, neither encoded nor checked again: the
 * platform's remote tools give a served answer so (it was checked on arrival, and its failure keeps
 * its kind: a served `TimedOut` stays `TimedOut`). Not exported by the package.
 */
export class Verbatim {
  constructor(readonly result: ToolResult) {}
}

/**
 * A call's arguments as JSON text, with the value `Json.parse` made of it (refused keys checked), for a
 * caller that parsed them already (`Agent`'s records show them): the pipeline checks the text's size
 * and decodes the value, without parsing the text again.
 */
export class ParsedArguments {
  constructor(readonly text: string, readonly value: unknown) {}
}

// ---------------------------------------------------------------------------------------------
// Per-tool compiled parts, made once on first use.

interface Compiled {
  readonly decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
  /** For a flat input (`flatInput`): its keys, and `decode` without the check of unexpected keys. */
  readonly flat: FlatInput | undefined
  readonly encode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
  readonly timeoutMillis: number
  readonly spanName: string
  /** `Schema.Struct({})`: Effect's `{}` accepts any value, so its strictness is checked here. */
  readonly emptyInput: boolean
}

const compiledTools = new WeakMap<Tool.Any, Compiled>()

const compile = (tool: Tool.Any): Compiled => {
  const known = compiledTools.get(tool)
  if (known !== undefined) return known
  const compiled: Compiled = {
    decode: ParseResult.decodeUnknownEither(tool.input, { onExcessProperty: "error", errors: "all" }),
    flat: flatInput(tool),
    encode: ParseResult.encodeUnknownEither(tool.output, { errors: "all" }),
    timeoutMillis: Duration.toMillis(tool.timeout),
    spanName: `execute_tool ${tool.name}`,
    emptyInput: tool.input.ast._tag === "TypeLiteral" && tool.input.ast.propertySignatures.length === 0 &&
      tool.input.ast.indexSignatures.length === 0
  }
  compiledTools.set(tool, compiled)
  return compiled
}

/**
 * A flat input: a struct with no index signature, and no struct below it. Effect's check of
 * unexpected keys (`onExcessProperty: "error"`) parses each key against a union of the expected ones;
 * for a flat input, the only struct that reads the option is the top one, so when the value has no
 * key but the expected ones (`onlyKeysIn`), `decode` without the option gives the same result.
 */
interface FlatInput {
  readonly keys: ReadonlySet<PropertyKey>
  readonly decode: (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>
}

const flatInput = (tool: Tool.Any): FlatInput | undefined => {
  const ast = tool.input.ast
  if (ast._tag !== "TypeLiteral" || ast.indexSignatures.length > 0) return undefined
  for (const ps of ast.propertySignatures) if (!isFlat(ps.type)) return undefined
  return {
    keys: new Set(ast.propertySignatures.map((ps) => ps.name)),
    decode: ParseResult.decodeUnknownEither(tool.input, { errors: "all" })
  }
}

/**
 * No struct, class, transformation or suspended Schema anywhere in `ast`: nothing that reads
 * `onExcessProperty` or hands the options to user code (a refinement's filter is given them too; the
 * built-in filters do not read them).
 */
const isFlat = (ast: SchemaAST.AST): boolean => {
  switch (ast._tag) {
    case "TypeLiteral":
    case "Declaration":
    case "Transformation":
    case "Suspend":
      return false
    case "Union":
      return ast.types.every(isFlat)
    case "Refinement":
      return isFlat(ast.from)
    case "TupleType":
      return ast.elements.every((e) => isFlat(e.type)) && ast.rest.every((r) => isFlat(r.type))
    default:
      // Keywords, literals, enums, template literals: a check of the value alone.
      return true
  }
}

/**
 * True when every own key of `value` is one of `keys`: the keys Effect's check of unexpected keys
 * looks at (`Reflect.ownKeys`). Parsed JSON has only enumerable string keys: `Object.keys`, much cheaper.
 */
const onlyKeysIn = (value: object, keys: ReadonlySet<PropertyKey>, parsed: boolean): boolean => {
  const own: ReadonlyArray<PropertyKey> = parsed ? Object.keys(value) : Reflect.ownKeys(value)
  for (let i = 0; i < own.length; i++) if (!keys.has(own[i]!)) return false
  return true
}

let localCallIds = 0

const thresholds = new WeakMap<Config, number>()
const expiringThresholdMillis = (config: Config): number => {
  let millis = thresholds.get(config)
  if (millis === undefined) {
    millis = Duration.toMillis(config.expiringThreshold)
    thresholds.set(config, millis)
  }
  return millis
}

// ---------------------------------------------------------------------------------------------
// The stages.

/**
 * Stage 0, `deduped`: a delivered call (task id, call id) through the delivery store around the
 * rest (design: Delivery dedupe): it runs once however often it is delivered. Whether its handler started
 * tells the store what an interruption leaves behind (design: Interruption and shutdown).
 */
const deduped = (dedupe: Reuse.Deliveries, tool: Tool.Any, args: unknown, options: Options): Started => {
  let handlerStarted = false
  const inner: Options = {
    ...options,
    dedupe: undefined,
    onStart: () => {
      handlerStarted = true
      options.onStart?.()
    }
  }
  const key = { taskId: options.taskId ?? "local", toolCallId: options.toolCallId ?? `local-${++localCallIds}` }
  const claim = { toolName: tool.name, timeout: tool.timeout, idempotent: tool.idempotent, started: () => handlerStarted }
  const run = Effect.withFiberRuntime<ToolResult>((fiber, status) =>
    awaitStarted(traced(new CallingFiber(fiber, status.runtimeFlags), tool, args, { ...inner, toolCallId: key.toolCallId }))
  )
  return Effect.map(dedupe.once(key, claim, run), ({ result }) => result)
}

/** Stage 1, `traced`: the call's span `execute_tool <name>` around the other stages, when tracing is on. */
const traced = (calling: CallingFiber, tool: Tool.Any, args: unknown, options: Options | undefined): Started => {
  const toolCallId = options?.toolCallId ?? `local-${++localCallIds}`
  if (!calling.tracing) return counted(calling, tool, admit(calling, tool, args, options, toolCallId, undefined))
  const span = openSpan(calling, tool, toolCallId, options, args)
  return counted(calling, tool, endWhenDone(calling, span, admit(calling, tool, args, options, toolCallId, span)))
}

/** The call counted by its outcome (`agent_tools.tool.calls`), while a telemetry layer exports metrics. */
const counted = (calling: CallingFiber, tool: Tool.Any, started: Started): Started => {
  if (!calling.exporting) return started
  const count = (result: ToolResult): ToolResult => {
    Metrics.toolCalls.unsafeUpdate(1, Metrics.toolLabels(tool.name, result.failure?._tag ?? "success"))
    return result
  }
  return started instanceof ToolResult ? count(started) : Effect.map(started, count)
}

/**
 * The call's span, on OpenTelemetry's GenAI conventions (`execute_tool <name>`, `gen_ai.*`), ours under
 * `agent_tools.*`; the arguments only when contents are captured (`Telemetry.CaptureContent`).
 */
const openSpan = (
  calling: CallingFiber,
  tool: Tool.Any,
  toolCallId: string,
  options: Options | undefined,
  args: unknown
): Tracer.Span => {
  const span = calling.fiber.currentTracer.span(
    compile(tool).spanName,
    Option.fromNullable(options?.parentSpan ?? calling.fiber.currentSpan),
    Context.empty(),
    [],
    calling.clock.unsafeCurrentTimeNanos(),
    "internal"
  )
  span.attribute("gen_ai.operation.name", "execute_tool")
  span.attribute("gen_ai.tool.name", tool.name)
  span.attribute("gen_ai.tool.type", "function")
  span.attribute("gen_ai.tool.call.id", toolCallId)
  if (options?.taskId !== undefined) span.attribute("gen_ai.conversation.id", options.taskId)
  span.attribute("agent_tools.attempt", 1)
  span.attribute("agent_tools.reused", false)
  if (Context.get(calling.context, CaptureContent)) span.attribute("gen_ai.tool.call.arguments", argumentsText(args))
  return span
}

/** The arguments as the span shows them when contents are captured: their JSON text. */
const argumentsText = (args: unknown): string => {
  if (typeof args === "string") return args
  if (args instanceof ParsedArguments) return args.text
  try {
    return JSON.stringify(args) ?? ""
  } catch {
    return String(args)
  }
}

const endWhenDone = (calling: CallingFiber, span: Tracer.Span, started: Started): Started => {
  if (started instanceof ToolResult) return endSpan(calling, span, started)
  return started.pipe(
    Effect.map((result) => endSpan(calling, span, result)),
    Effect.onInterrupt(() =>
      Effect.sync(() => span.end(calling.clock.unsafeCurrentTimeNanos(), Exit.interrupt(FiberId.none)))
    )
  )
}

const endSpan = (calling: CallingFiber, span: Tracer.Span, result: ToolResult): ToolResult => {
  const failure = result.failure
  span.attribute("agent_tools.outcome", failure === undefined ? "success" : failure._tag)
  if (failure !== undefined) span.attribute("error.type", failure._tag)
  if (Context.get(calling.context, CaptureContent)) {
    span.attribute("gen_ai.tool.call.result", failure === undefined ? argumentsText(result.value) : result.error ?? "")
  }
  span.end(calling.clock.unsafeCurrentTimeNanos(), result.success ? Exit.void : Exit.fail(result.error))
  return result
}

/** A call past `admit`: decoded, its delivered deadline known, its span open (when tracing). */
interface Call {
  readonly tool: Tool.Any
  readonly compiled: Compiled
  readonly input: unknown
  readonly toolCallId: string
  readonly span: Tracer.Span | undefined
  readonly options: Options | undefined
  /** The delivered deadline, if any. */
  readonly deliveredAt: number | undefined
}

/**
 * Stage 2, `admit`: refuses a call whose delivered deadline has passed (`DeadlinePassed`) or whose
 * arguments do not decode strictly (`InvalidInput`); else goes on, to the gate or reuse.
 */
const admit = (
  calling: CallingFiber,
  tool: Tool.Any,
  args: unknown,
  options: Options | undefined,
  toolCallId: string,
  span: Tracer.Span | undefined
): Started => {
  const config = calling.config
  const compiled = compile(tool)
  const given = options?.deadlineAt
  const deliveredAt = given === undefined ? undefined : typeof given === "number" ? given : given.getTime()
  if (deliveredAt !== undefined && deliveredAt <= calling.clock.unsafeCurrentTimeMillis()) {
    return failed(new DeadlinePassed({ toolName: tool.name }), config)
  }
  const decoded = decodeArgs(tool, compiled, args, config)
  if (typeof decoded === "string") return failed(new InvalidInput({ toolName: tool.name, reason: decoded }), config)
  const call: Call = { tool, compiled, input: decoded.value, toolCallId, span, options, deliveredAt }
  if (options?.gate === undefined && (options?.reuse === undefined || !tool.idempotent)) {
    return withHooks(calling, call, deliveredAt, options?.approved === true)
  }
  return reuseOrGate(calling, call)
}

/**
 * Stage 3, `reuseOrGate`: an idempotent tool's same call in the `reuse` scope answers it (design: Per-run reuse),
 * else it runs and its outcome is kept there; with a `gate`, the gate decides instead, from the `Admitted` call.
 */
const reuseOrGate = (calling: CallingFiber, call: Call): Started => {
  const { options, span, tool } = call
  const reuse = tool.idempotent ? options?.reuse : undefined
  // Keyed when something reads the key: reuse, or a gate's approval (a gate's other calls need none).
  let inputKey: string | undefined
  const inputKeyOf = () => inputKey ??= Reuse.inputKey(tool, call.input)
  const reused = (): Started | undefined => {
    const known = reuse?.get(Reuse.sameCall(tool.name, inputKeyOf()))
    if (known === undefined) return undefined
    reuse!.markReused(call.toolCallId)
    if (calling.exporting) Metrics.toolReused.unsafeUpdate(1, Metrics.toolLabels(tool.name))
    span?.attribute("agent_tools.reused", true)
    return known
  }
  const keep = (started: Started): Started =>
    reuse === undefined ? started : reuse.keep(Reuse.sameCall(tool.name, inputKeyOf()), started)
  const gate = options?.gate
  if (gate === undefined) return reused() ?? keep(withHooks(calling, call, call.deliveredAt, options?.approved === true))
  return gate({
    tool,
    toolCallId: call.toolCallId,
    input: call.input,
    get inputKey() {
      return inputKeyOf()
    },
    reused,
    keep,
    run: (overrides) =>
      Effect.withFiberRuntime((fiber, status) => {
        const running = new CallingFiber(fiber, status.runtimeFlags)
        const deadlineAt = overrides?.deadlineAt ?? call.deliveredAt
        if (deadlineAt !== undefined && deadlineAt <= running.clock.unsafeCurrentTimeMillis()) {
          return Effect.succeed(failed(new DeadlinePassed({ toolName: tool.name }), running.config))
        }
        return awaitStarted(withHooks(running, call, deadlineAt, overrides?.approved ?? options?.approved === true))
      })
  })
}

/** The call's context as of `now`: its deadline the earlier of `now` + the tool's timeout and `deadlineAt`. */
const infoAt = (calling: CallingFiber, call: Call, now: number, deadlineAt: number | undefined): ToolCallInfo => {
  const byTimeout = now + call.compiled.timeoutMillis
  return {
    taskId: call.options?.taskId ?? "local",
    toolCallId: call.toolCallId,
    attempt: 1,
    deadlineAt: deadlineAt === undefined ? byTimeout : Math.min(byTimeout, deadlineAt),
    expiringThresholdMillis: expiringThresholdMillis(calling.config)
  }
}

/**
 * Stage 4, `withHooks`: the installed tool hooks (design: Hooks) around the run of the call; `proceed` may
 * run it again, or not at all. None installed: straight on, at the cost of one context lookup. The
 * handler's time starts when the handler does, not when the hooks do: a hook that waits (an approval
 * asking a person) takes nothing from the tool's timeout; only a delivered deadline bounds both. A call whose
 * tool needs approval, not `approved` and not approved by a hook (`Hooks.approved`), is refused unrun (`Denied`).
 */
const withHooks = (calling: CallingFiber, call: Call, deadlineAt: number | undefined, approved: boolean): Started => {
  const hooks = Context.get(calling.context, ToolHooks)
  const onStart = call.options?.onStart
  const now = calling.clock.unsafeCurrentTimeMillis()
  if (hooks.length === 0) {
    // Approvals fail closed: with no hook, only the journal or the platform can have given one.
    if (call.tool.needsApproval) call.span?.attribute("agent_tools.approval", approved ? "approved" : "denied")
    if (call.tool.needsApproval && !approved) return failed(notApproved(call.tool.name), calling.config)
    onStart?.()
    return runHandler(calling, call, infoAt(calling, call, now, deadlineAt), now, undefined)
  }
  const progress = { attempt: 1 }
  const { input, tool } = call
  const context = infoAt(calling, call, now, deadlineAt)
  let handler: { readonly info: ToolCallInfo; readonly start: number } | undefined
  const run = call.options?.run
  const hookCall: ToolCall = { tool, input, context, attempts: () => progress.attempt, run, approved }
  return runToolHooks(
    hooks,
    hookCall,
    Effect.suspend(() => {
      // Innermost, after every hook: a call that needs approval runs only if one was given (`Hooks.approved`).
      const may = mayRun(hookCall)
      if (tool.needsApproval) call.span?.attribute("agent_tools.approval", may ? "approved" : "denied")
      if (!may) return Effect.succeed(failed(notApproved(tool.name), calling.config))
      const now = calling.clock.unsafeCurrentTimeMillis()
      // The hooks took until the delivered deadline: the handler would have no time at all.
      if (deadlineAt !== undefined && deadlineAt <= now) {
        return Effect.succeed(failed(new DeadlinePassed({ toolName: tool.name }), calling.config))
      }
      // Fixed when the handler first starts: a hook that proceeds again shares it, as retries do.
      handler ??= { info: infoAt(calling, call, now, deadlineAt), start: now }
      onStart?.()
      return awaitStarted(runHandler(calling, call, handler.info, handler.start, progress))
    })
  )
}

/**
 * Stage 5, `runHandler`: the handler's attempts (one, or `withRetries` for a tool with retries),
 * and `toResult` of the outcome. A handler that completes synchronously costs no closure and no timer.
 */
const runHandler = (
  calling: CallingFiber,
  call: Call,
  info: ToolCallInfo,
  start: number,
  progress: { attempt: number } | undefined
): Started => {
  const { compiled, input, span, tool } = call
  const config = calling.config
  const allowed = info.deadlineAt - start
  span?.attribute("agent_tools.deadline", new Date(info.deadlineAt).toISOString())
  if (tool.retries <= 0) {
    const outcome = runAttempt(calling, tool, input, info, span)
    if (Exit.isExit(outcome)) return toResult(tool, compiled, outcome, config, allowed)
    return Effect.map(outcome, (outcome) => toResult(tool, compiled, outcome, config, allowed))
  }
  return Effect.map(
    // The retries run on whichever fiber awaits them: take its context there, not the starter's.
    Effect.withFiberRuntime<Outcome>((fiber, status) =>
      withRetries(new CallingFiber(fiber, status.runtimeFlags), tool, input, info, start, span, progress)
    ),
    (outcome) => toResult(tool, compiled, outcome, config, allowed)
  )
}

/** The decoded input, or why it is refused (`InvalidInput`'s reason). */
const decodeArgs = (
  tool: Tool.Any,
  compiled: Compiled,
  args: unknown,
  config: Config
): { readonly value: unknown } | string => {
  let value: unknown
  // The JSON text's length: a text of n characters nests at most n / 2 levels deep.
  let length = 0
  // JSON text (perhaps parsed already): only enumerable string keys, sized by its text.
  const fromText = typeof args === "string" || args instanceof ParsedArguments
  if (fromText) {
    const text = typeof args === "string" ? args : args.text
    length = text.length
    // A character is at least one UTF-8 byte and at most three (surrogate pairs: four per two).
    if (text.length > config.maxPayloadBytes ||
      (text.length * 3 > config.maxPayloadBytes && Buffer.byteLength(text, "utf8") > config.maxPayloadBytes)) {
      return `the arguments exceed ${config.maxPayloadBytes} bytes`
    }
    if (typeof args === "string") {
      const parsed = Json.parse(args)
      if ("problem" in parsed) return parsed.problem
      value = parsed.value
    } else {
      value = args.value
    }
  } else {
    let text: string | undefined
    try {
      text = JSON.stringify(args)
    } catch (error) {
      return `the arguments are not JSON (${errorMessage(error)})`
    }
    // A character is at most three UTF-8 bytes: only a long text is measured.
    if (text !== undefined && text.length * 3 > config.maxPayloadBytes && Buffer.byteLength(text, "utf8") > config.maxPayloadBytes) {
      return `the arguments exceed ${config.maxPayloadBytes} bytes`
    }
    length = text?.length ?? 0
    const refused = Json.refusedKeyIn(args)
    if (refused !== undefined) return refused
    value = args
  }
  // Arguments are a JSON object (design: What the model sees; the parameters' type is object), whatever the input Schema says.
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return `(root): Expected an object, actual ${Array.isArray(value) ? "an array" : JSON.stringify(value)}`
  }
  // Nothing past here walks a value deeper than the limit (a Schema of `unknown` would take it; keying it,
  // hooks and journals would exhaust the stack): refused whatever the input Schema says.
  if (length > 2 * config.maxDepth) {
    const deep = tooDeep(value, config)
    if (deep !== undefined) return deep
  }
  if (compiled.emptyInput) {
    const keys = Object.keys(value)
    if (keys.length > 0) return keys.map((key) => `${key}: is unexpected`).join("; ")
  }
  try {
    // A flat input's keys are checked here, far cheaper than by Effect; with none unexpected, the same decode.
    const flat = compiled.flat
    const decoded = flat !== undefined && onlyKeysIn(value, flat.keys, fromText)
      ? flat.decode(value)
      : compiled.decode(value)
    if (Either.isRight(decoded)) return { value: decoded.right }
    return formatIssues(decoded.left)
  } catch (error) {
    // A recursive Schema or the issue formatter on a deeply nested value can exhaust the stack.
    return tooDeep(value, config) ?? `the arguments could not be checked (${errorMessage(error)})`
  }
}

/** The reason a value is refused for its nesting, or undefined. */
const tooDeep = (value: unknown, config: Config): string | undefined =>
  Json.deeperThan(value, config.maxDepth) ? `the value is nested deeper than ${config.maxDepth} levels` : undefined

/** What the pipeline reads of a config on every call, worked out once per config. */
interface Derived {
  readonly limits: Json.Limits
  readonly blockingMillis: number
  readonly failureLogLevel: LogLevel.Literal
}
const derivedCache = new WeakMap<Config, Derived>()
const derived = (config: Config): Derived => {
  let out = derivedCache.get(config)
  if (out === undefined) {
    out = {
      limits: { maxDepth: config.maxDepth ?? defaultConfig.maxDepth, maxBytes: config.maxPayloadBytes },
      blockingMillis: Duration.toMillis(Duration.decode(config.blockingThreshold ?? defaultConfig.blockingThreshold!)),
      failureLogLevel: config.failureLogLevel ?? defaultConfig.failureLogLevel!
    }
    derivedCache.set(config, out)
  }
  return out
}
/** The output limits of `config`. */
const outputLimits = (config: Config): Json.Limits => derived(config).limits

/**
 * `result` as the platform may accept it from a serving process for a call of `toolName`: a value
 * past `config`'s output limits becomes the invalid-output result, an error text is cut.
 */
export const checkResult = (toolName: string, result: ToolResult, config: Config = defaultConfig): ToolResult => {
  if (result.failure !== undefined) {
    return result.error!.length <= config.maxErrorLength ? result : failed(result.failure, config)
  }
  const problem = Json.problemIn(result.value, outputLimits(config))
  return problem === undefined ? result : failed(new InvalidOutput({ toolName, reason: problem }), config)
}

// ---------------------------------------------------------------------------------------------
// Running the handler.

/** The outcome of an attempt stopped at the deadline. */
const ReachedDeadline = Symbol.for("agent-tools/pipeline/ReachedDeadline")
type Outcome = Exit.Exit<unknown, unknown> | typeof ReachedDeadline

/**
 * Stage 6, `runAttempt`: one run of the handler, within the deadline. The handler's body may be an Effect, a `PromiseLike` or the output itself (design: Handler shapes): a
 * plain value, or an `Exit` (`Effect.succeed(x)`, `Effect.fail(e)`), is done: there is nothing to
 * run or to interrupt. Any other runs in a fiber of its own, so that the deadline can interrupt it
 * without interrupting the caller; the fiber starts at once on this stack, and a handler that
 * completes synchronously costs no timer and no scheduling.
 */
const runAttempt = (
  calling: CallingFiber,
  tool: Tool.Any,
  input: unknown,
  info: ToolCallInfo,
  span: Tracer.Span | undefined
): Exit.Exit<unknown, unknown> | Effect.Effect<Outcome> => {
  // Real time, whatever the clock: how long the body's synchronous part held the event loop.
  const started = Date.now()
  const outcome = attempt(calling, tool, input, info, span)
  const held = Date.now() - started
  if (held > derived(calling.config).blockingMillis && tool.worker === undefined) Logs.blockedLoop(calling, tool, info, held)
  // Logged once timed (a line's writing is not the body's time); a body's synchronous end is never a worker's.
  return Exit.isExit(outcome) ? logged(calling, tool, info, false, outcome) : outcome
}

/** `runAttempt`'s run of the body by its shape; a raw failure that ends later is logged then (`logged`). */
const attempt = (
  calling: CallingFiber,
  tool: Tool.Any,
  input: unknown,
  info: ToolCallInfo,
  span: Tracer.Span | undefined
): Exit.Exit<unknown, unknown> | Effect.Effect<Outcome> => {
  const call = new CallContext(info, calling.clock, calling, span)
  let body: unknown
  try {
    // A body made to run on a worker thread (`worker: import.meta.url`) is an Effect here: its pool's job.
    body = tool.worker === undefined ? tool.handler(input, call) : Context.get(calling.context, ToolWorkers).run(tool, input, info)
  } catch (defect) {
    // Toolkit.make refuses a handler that is not a function; a tool run without one says the same.
    const problem = Tool.handlerProblem(tool)
    return problem === undefined ? Exit.die(defect) : Exit.fail(new HandlerShapeError(problem))
  }
  if (Exit.isExit(body)) return body
  if (!Effect.isEffect(body)) {
    if (!isThenable(body)) return Exit.succeed(body)
    return Effect.map(awaitPromise(calling, tool, body, call, info), (outcome) => logged(calling, tool, info, true, outcome))
  }
  // A worker's failure is a throw in the body there; an Effect's typed failure is the tool's answer.
  const raw = tool.worker !== undefined
  // The R of the handler is in the caller's context: `Invocation.run` demands it of its caller.
  const effect = body as Effect.Effect<unknown, unknown, never>
  const context = Context.add(calling.context, ToolContext, info)
  const runtime = Runtime.make({
    context: span === undefined ? context : Context.add(context, Tracer.ParentSpan, span),
    // Its failure is the call's outcome, reported as such: not an "unhandled error" log line.
    fiberRefs: FiberRefs.updateAs(calling.fiber.getFiberRefs(), {
      fiberId: FiberId.none,
      fiberRef: FiberRef.unhandledErrorLogLevel,
      value: Option.none()
    }),
    // The caller may be in an uninterruptible region; the handler must still be stoppable.
    runtimeFlags: RuntimeFlags.enable(calling.runtimeFlags, RuntimeFlags.Interruption)
  })
  const fiber = Runtime.runFork(runtime, effect, { immediate: true })
  const done = fiber.unsafePoll()
  if (done !== null) return done
  // It suspended: arm the deadline, on the caller's clock. On the live clock a plain timer;
  // on any other (TestClock) a timer fiber. Either interrupts the handler at the deadline (its
  // finalizers run before Fiber.await returns); no race, no second fork per call.
  let timedOut = false
  const cancel = armDeadline(calling, info, runtime, () => {
    timedOut = true
    call.abort(deadlineReason(tool))
    fiber.unsafeInterruptAsFork(FiberId.none)
  })
  return Fiber.await(fiber).pipe(
    Effect.map((exit): Outcome => {
      cancel()
      return timedOut && Exit.isInterrupted(exit) ? ReachedDeadline : logged(calling, tool, info, raw, exit)
    }),
    Effect.onInterrupt(() => Effect.zipRight(Effect.sync(cancel), Fiber.interrupt(fiber)))
  )
}

/**
 * `outcome`, its raw failure logged where the handler ran (design: Logs): a defect always; a failure
 * when `raw` (a rejection, a worker's throw), not an Effect's typed failure; never an interruption.
 */
const logged = <O extends Outcome>(calling: CallingFiber, tool: Tool.Any, info: ToolCallInfo, raw: boolean, outcome: O): O => {
  if (outcome !== ReachedDeadline && Exit.isFailure(outcome as Exit.Exit<unknown, unknown>)) {
    const cause = (outcome as Exit.Failure<unknown, unknown>).cause
    if (raw ? !Cause.isInterruptedOnly(cause) : Cause.isDie(cause)) {
      Logs.handlerFailed(calling, tool, info, cause, derived(calling.config).failureLogLevel)
    }
  }
  return outcome
}

/** A handler that cannot be called: `Tool.handlerProblem`'s text as the call's failure. */
class HandlerShapeError extends Error {
  override readonly name = "HandlerShapeError"
}

const isThenable = (u: unknown): u is PromiseLike<unknown> =>
  typeof u === "object" && u !== null && typeof (u as { then?: unknown }).then === "function"

/**
 * Awaits an async body (design: Handler shapes) on the awaiting fiber: no fiber of its own, since there is nothing of
 * Effect's to interrupt; the deadline and an interruption abort `call.signal` instead. Both callbacks
 * are attached at once, whatever becomes of the call, so a promise that rejects after the deadline
 * is handled, never an unhandled rejection. A rejection is the call's failure (error text of the reason).
 */
const awaitPromise = (
  calling: CallingFiber,
  tool: Tool.Any,
  promise: PromiseLike<unknown>,
  call: CallContext,
  info: ToolCallInfo
): Effect.Effect<Outcome> => {
  let outcome: Outcome | undefined
  let resume: ((effect: Effect.Effect<Outcome>) => void) | undefined
  let cancel: () => void = noop
  const settle = (settled: Outcome) => {
    if (outcome !== undefined) return
    outcome = settled
    cancel()
    resume?.(Effect.succeed(settled))
  }
  try {
    promise.then((value) => settle(Exit.succeed(value)), (error) => settle(Exit.fail(error)))
  } catch (defect) {
    // A hand-made thenable whose `then` throws.
    settle(Exit.die(defect))
  }
  if (outcome === undefined) {
    cancel = armDeadline(calling, info, Runtime.defaultRuntime, () => {
      call.abort(deadlineReason(tool))
      settle(ReachedDeadline)
    })
  }
  return Effect.async<Outcome>((callback) => {
    if (outcome !== undefined) return callback(Effect.succeed(outcome))
    resume = callback
    return Effect.sync(() => {
      resume = undefined
      cancel()
      call.abort(new DOMException("the call was interrupted", "AbortError"))
    })
  })
}

const noop = () => {}

const deadlineReason = (tool: Tool.Any) => new DOMException(`${tool.name} reached its deadline`, "TimeoutError")

/**
 * Calls `expire` at the call's deadline, on the caller's clock: on the live clock a plain timer, on
 * any other (TestClock) a timer fiber run by `runtime`. Returns the cancel.
 */
const armDeadline = (
  calling: CallingFiber,
  info: ToolCallInfo,
  runtime: Runtime.Runtime<never>,
  expire: () => void
): () => void => {
  const wait = Math.max(0, info.deadlineAt - calling.clock.unsafeCurrentTimeMillis())
  if (calling.clock === liveClock) {
    const handle = setTimeout(expire, Math.min(wait, maxTimerMillis))
    return () => clearTimeout(handle)
  }
  const timer = Runtime.runFork(runtime, Effect.flatMap(calling.clock.sleep(Duration.millis(wait)), () => Effect.sync(expire)))
  return () => timer.unsafeInterruptAsFork(FiberId.none)
}

/** The clock fibers have unless one is provided (a TestClock, say). */
const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)
/** Node's timers hold at most 2^31 - 1 ms. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * Stage 5, `withRetries`: re-runs a failed attempt up to `tool.retries` times while the tool's rules call
 * the failure retryable (`mayRetry`), each retry starting before the deadline (design: Retries).
 */
const withRetries = (
  calling: CallingFiber,
  tool: Tool.Any,
  input: unknown,
  first: ToolCallInfo,
  start: number,
  span: Tracer.Span | undefined,
  progress: { attempt: number } | undefined
): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    const schedule = Context.get(calling.context, Timing).toolRetry
    yield* warnIfRetriesCannotFit(tool, schedule, start, first.deadlineAt)
    const steps = stepper(schedule)
    let info = first
    while (true) {
      span?.attribute("agent_tools.attempt", info.attempt)
      const step = runAttempt(calling, tool, input, info, span)
      const outcome = Exit.isExit(step) ? step : yield* step
      if (outcome === ReachedDeadline || Exit.isSuccess(outcome) || info.attempt > tool.retries) return outcome
      if (Cause.isInterruptedOnly(outcome.cause) || !mayRetry(tool, outcome.cause)) return outcome
      const now = calling.clock.unsafeCurrentTimeMillis()
      const retryAt = yield* steps.next(now, Cause.squash(outcome.cause))
      // A retry that cannot start before the deadline is skipped: the last failure stands.
      if (retryAt === undefined || retryAt >= info.deadlineAt) return outcome
      if (calling.exporting) Metrics.toolRetries.unsafeUpdate(1, Metrics.toolLabels(tool.name))
      Context.get(calling.context, InvocationObserver).onRetry({
        tool: tool.name,
        toolCallId: info.toolCallId,
        attempt: info.attempt + 1,
        delayMillis: retryAt - now,
        error: handlerFailure(tool, outcome.cause).text
      })
      yield* calling.clock.sleep(Duration.millis(retryAt - now))
      info = { ...info, attempt: info.attempt + 1 }
      if (progress !== undefined) progress.attempt = info.attempt
    }
  })

/**
 * The tool's rules for a failed attempt (design: Retries): every failure and defect of the cause must be
 * retryable. A `permanent` `_tag` never is; `retryable` judges failures of the error channel (not
 * defects, which are not of its type) and only `true` retries. Malformed rules retry nothing.
 */
const mayRetry = (tool: Tool.Any, cause: Cause.Cause<unknown>): boolean => {
  const { permanent, retryable } = tool
  // Toolkit.make refuses these; a tool run without one fails closed: its side effect is not repeated.
  if (!Tool.isPermanentList(permanent) || (retryable !== undefined && typeof retryable !== "function")) return false
  const isPermanent = (u: unknown) => {
    const tag = typeof u === "object" && u !== null && "_tag" in u ? u._tag : undefined
    return typeof tag === "string" && permanent.includes(tag)
  }
  for (const defect of Cause.defects(cause)) if (isPermanent(defect)) return false
  for (const failure of Cause.failures(cause)) {
    if (isPermanent(failure)) return false
    if (retryable === undefined) continue
    try {
      if (retryable(failure) !== true) return false
    } catch {
      return false
    }
  }
  return true
}

/** Logs once, at the start, when the nominal backoff of every retry does not fit before the deadline. */
const warnIfRetriesCannotFit = (
  tool: Tool.Any,
  schedule: Schedule.Schedule<unknown, unknown>,
  start: number,
  deadline: number
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const steps = stepper(schedule)
    let now = start
    for (let retry = 1; retry <= tool.retries; retry++) {
      const retryAt = yield* steps.next(now, undefined)
      if (retryAt === undefined) return
      now = retryAt
      if (now >= deadline) {
        return yield* Effect.logWarning(
          `${tool.name}: ${tool.retries} retries do not fit before the deadline ` +
            `(${formatDuration(deadline - start)} away); retry ${retry} and later will be skipped`
        ).pipe(Effect.annotateLogs({ tool: tool.name }))
      }
    }
  })

// ---------------------------------------------------------------------------------------------
// Outcome -> ToolResult, and the error texts.

/**
 * Stage 7, `toResult`: the outcome as the caller gets it: the output encoded by the tool's Schema and
 * checked against the limits, or the failure by its kind, its text cut to `maxErrorLength`.
 */
const toResult = (
  tool: Tool.Any,
  compiled: Compiled,
  outcome: Outcome,
  config: Config,
  allowedMillis: number
): ToolResult => {
  if (outcome === ReachedDeadline) return failed(new TimedOut({ toolName: tool.name, allowedMillis }), config)
  if (Exit.isFailure(outcome)) return failed(handlerFailure(tool, outcome.cause), config)
  if (outcome.value instanceof Verbatim) return outcome.value.result
  const value = outcome.value === undefined ? null : outcome.value
  let encoded: Either.Either<unknown, ParseResult.ParseIssue>
  try {
    encoded = compiled.encode(value)
    if (Either.isLeft(encoded)) {
      return failed(new InvalidOutput({ toolName: tool.name, reason: formatIssues(encoded.left) }), config)
    }
  } catch (error) {
    // A recursive Schema or the issue formatter on a deeply nested value can exhaust the stack.
    const reason = tooDeep(value, config) ?? `the output could not be encoded (${errorMessage(error)})`
    return failed(new InvalidOutput({ toolName: tool.name, reason }), config)
  }
  // Bounded in depth and size, so a served answer always fits the platform's frames (design: Hostile clients).
  return checkResult(tool.name, succeeded(encoded.right), config)
}

/** The failure of a handler that failed, died or was interrupted (by itself: not at its deadline). */
const handlerFailure = (tool: Tool.Any, cause: Cause.Cause<unknown>): HandlerFailed | Interrupted => {
  const failure = Cause.failureOption(cause)
  const defect = failure._tag === "Some" ? failure : Cause.dieOption(cause)
  if (defect._tag === "None") return new Interrupted({ toolName: tool.name })
  return new HandlerFailed({ toolName: tool.name, cause, text: failureText(tool, defect.value) })
}

/** The error text of a handler's failure or defect `error` (design: Error text): the tool's `errorTransform`'s, else `errorText`'s. */
const failureText = (tool: Tool.Any, error: unknown): string => {
  if (tool.errorTransform !== undefined) {
    try {
      const text: unknown = tool.errorTransform(error)
      if (typeof text === "string") return text
    } catch {
      // fail closed below
    }
    return `tool ${tool.name} failed`
  }
  return errorText(error)
}

const errorMessage = (error: unknown): string => error instanceof Error ? error.message : String(error)
