/**
 * The agent loop (design: Per-run reuse, Calls in a turn, The loop, Built-ins): ask the model, run the tools it calls through `Invocation`,
 * feed the results back, repeat until it answers (or calls `task_complete`).
 */
import { Data, Duration, Effect, Either, FiberRef, type Layer, Mailbox, Schema, Stream } from "effect"
import * as Builtins from "./Builtins.js"
import { Ids } from "./Ids.js"
import * as Pipeline from "./internal/pipeline.js"
import { RunCache } from "./internal/runCache.js"
import { RunState } from "./internal/toolHooks.js"
import { runTurnHooks, type TurnHook, TurnHooks } from "./internal/turnHooks.js"
import { ToolResult, ToolResultFromJson, UnknownTool } from "./ToolResult.js"
import * as LanguageModel from "./LanguageModel.js"
import { retryAfterFailure, Timing } from "./Timing.js"
import type * as Tool from "./Tool.js"
import type { ToolContext } from "./ToolContext.js"
import * as Toolkit from "./Toolkit.js"

/** Identifies an `Agent` value at run time. */
export const TypeId: unique symbol = Symbol.for("agent-tools/Agent")

/** How the calls of one model turn run (design: Calls in a turn). */
export type ToolExecution = "concurrent" | "sequential"

/** How a run ends: when the model answers without a tool call, or only through `task_complete` (design: Built-ins). */
export type Completion = "implicit" | "explicit"

/** Options of `Agent.make` (design: The loop). */
export interface Options<Tools extends ReadonlyArray<Tool.Any>> {
  /** Shown in spans and logs. Default `"agent"`. */
  readonly name?: string | undefined
  readonly tools: Tools
  /** The system instructions. */
  readonly instructions?: string | undefined
  /** Default `"concurrent"`: all calls of a turn at once. */
  readonly toolExecution?: ToolExecution | undefined
  /** With `"concurrent"`: at most this many calls of a turn at once. Default: no limit. */
  readonly maxConcurrency?: number | undefined
  /** Default `"implicit"`. `"explicit"` adds `task_complete` and `ask_user`. */
  readonly completion?: Completion | undefined
  /** Model turns allowed per run. Default 20. */
  readonly maxSteps?: number | undefined
}

/** An agent: tools, instructions and how to run them. `R` is what its tools' handlers need. */
export interface Agent<R = never> {
  readonly [TypeId]: { readonly _R: (_: never) => R }
  readonly name: string
  /** The tools offered to the model, built-ins included. */
  readonly tools: ReadonlyArray<Tool.Any>
  readonly instructions: string | undefined
  readonly toolExecution: ToolExecution
  readonly maxConcurrency: number | undefined
  readonly completion: Completion
  readonly maxSteps: number
}

/** Makes an agent. Synchronous: the toolkit's limits check runs at the first `Agent.run`. */
export const make = <const Tools extends ReadonlyArray<Tool.Any>>(
  options: Options<Tools>
): Agent<Tool.Requirements<Tools[number]>> => {
  const completion = options.completion ?? "implicit"
  return {
    [TypeId]: { _R: (_: never) => _ },
    name: options.name ?? "agent",
    tools: completion === "explicit" ? [...options.tools, Builtins.taskComplete, Builtins.askUser] : options.tools,
    instructions: options.instructions,
    toolExecution: options.toolExecution ?? "concurrent",
    maxConcurrency: options.maxConcurrency,
    completion,
    maxSteps: options.maxSteps ?? 20
  }
}

// ---------------------------------------------------------------------------------------------
// What a run returns.

/** One tool call of a run: what was asked, what came back, whether it was reused (design: Per-run reuse), how long it took. */
export const ToolCallRecord = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  /** The arguments as parsed JSON (the raw text when they were not JSON). */
  input: Schema.Unknown,
  result: ToolResultFromJson,
  cached: Schema.Boolean,
  durationMillis: Schema.Number
})
/** One tool call of a run. */
export type ToolCallRecord = typeof ToolCallRecord.Type

/** The record of a run (design: The loop). */
export const RunResult = Schema.Struct({
  /** The final text, or `task_complete`'s result. */
  output: Schema.String,
  /** Model turns taken. */
  steps: Schema.Number,
  toolCalls: Schema.Array(ToolCallRecord),
  usage: LanguageModel.Usage
})
/** The record of a run. */
export type RunResult = typeof RunResult.Type

/** The model was still calling tools after `maxSteps` turns; `partial` is the run so far. */
export class MaxStepsExceeded extends Schema.TaggedError<MaxStepsExceeded>("agent-tools/MaxStepsExceeded")(
  "MaxStepsExceeded",
  { maxSteps: Schema.Number, partial: RunResult }
) {
  override get message(): string {
    return `the run did not finish within ${this.maxSteps} model turns`
  }
}

/** Why a run failed: its toolkit broke a limit, the model failed for good, or it ran out of steps. */
export type AgentError = Toolkit.ManifestError | LanguageModel.ModelFailure | MaxStepsExceeded

/** What `Agent.stream` reports, in order, as a run goes. */
export type AgentEvent = Data.TaggedEnum<{
  TurnStarted: { readonly step: number }
  Text: { readonly step: number; readonly text: string }
  ToolCallStarted: { readonly step: number; readonly id: string; readonly name: string; readonly input: unknown }
  ToolCallFinished: { readonly step: number; readonly call: ToolCallRecord }
  Done: { readonly result: RunResult }
}>

/** Constructors and matchers of `AgentEvent`. */
export const AgentEvent = Data.taggedEnum<AgentEvent>()

// ---------------------------------------------------------------------------------------------
// Running.

/**
 * Runs the agent on `prompt` until the model is done. Tool failures, unknown tools and malformed
 * arguments go back to the model as error results; the run fails only with an `AgentError`.
 */
export const run = <R>(
  agent: Agent<R>,
  prompt: string
): Effect.Effect<RunResult, AgentError, LanguageModel.LanguageModel | Exclude<R, ToolContext>> =>
  traced(agent, loop(agent, prompt, undefined))

/** The same run as a stream of `AgentEvent`s, ending with `Done` (or the run's error). */
export const stream = <R>(
  agent: Agent<R>,
  prompt: string
): Stream.Stream<AgentEvent, AgentError, LanguageModel.LanguageModel | Exclude<R, ToolContext>> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const mailbox = yield* Mailbox.make<AgentEvent, AgentError>()
    yield* traced(agent, loop(agent, prompt, (event) => mailbox.unsafeOffer(event))).pipe(
      Effect.matchCauseEffect({
        onSuccess: () => mailbox.end,
        onFailure: (cause) => mailbox.failCause(cause)
      }),
      Effect.forkScoped
    )
    return Mailbox.toStream(mailbox)
  }))

/**
 * The run of `Agent.run`, telling `onEvent` each `AgentEvent` as it happens, synchronously and in
 * order: for hosts that forward events themselves (the platform's task runner) without a stream.
 */
export const runWithEvents = <R>(
  agent: Agent<R>,
  prompt: string,
  onEvent: (event: AgentEvent) => void
): Effect.Effect<RunResult, AgentError, LanguageModel.LanguageModel | Exclude<R, ToolContext>> =>
  traced(agent, loop(agent, prompt, onEvent))

/** For callers outside Effect: runs the agent with `layer` providing the model and the tools' services. */
export const runPromise = <R, E>(
  agent: Agent<R>,
  prompt: string,
  layer: Layer.Layer<LanguageModel.LanguageModel | Exclude<R, ToolContext>, E>
): Promise<RunResult> => Effect.runPromise(Effect.provide(run(agent, prompt), layer))

/** The run's span, `invoke_agent <name>`, when tracing is on; nothing at all when it is off. */
const traced = <A, E, R>(agent: Agent<any>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(FiberRef.get(FiberRef.currentTracerEnabled), (on) =>
    on
      ? Effect.withSpan(effect, `invoke_agent ${agent.name}`, {
        attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.name },
        // A stack trace per span costs more than the rest of the span: the names say where.
        captureStackTrace: false
      })
      : effect)

const toolkits = new WeakMap<Agent<any>, Either.Either<Toolkit.Toolkit, Toolkit.ManifestError>>()

/** The agent's toolkit, checked (design: Limits) once, at its first run. */
const toolkitOf = (agent: Agent<any>): Effect.Effect<Toolkit.Toolkit, Toolkit.ManifestError> =>
  Effect.suspend(() => {
    let toolkit = toolkits.get(agent)
    if (toolkit === undefined) {
      toolkit = Toolkit.makeEither(agent.tools)
      toolkits.set(agent, toolkit)
    }
    return toolkit
  })

type Emit = (event: AgentEvent) => void

const loop = (
  agent: Agent<any>,
  prompt: string,
  emit: Emit | undefined
): Effect.Effect<RunResult, AgentError, LanguageModel.LanguageModel> =>
  Effect.gen(function*() {
    const toolkit = yield* toolkitOf(agent)
    const model = yield* LanguageModel.LanguageModel
    const policy = yield* Timing
    const tracing = yield* FiberRef.get(FiberRef.currentTracerEnabled)
    const turnHooks = yield* TurnHooks
    const runId = (yield* Ids).make("run")
    const state = new Run(runId, agent, toolkit, model, policy.modelRetry, tracing, turnHooks, prompt, emit)
    for (let step = 1; step <= agent.maxSteps; step++) {
      emit?.(AgentEvent.TurnStarted({ step }))
      const turn = yield* state.ask(step)
      state.usage.inputTokens += turn.usage.inputTokens
      state.usage.outputTokens += turn.usage.outputTokens
      if (turn.text !== undefined && turn.text !== "") emit?.(AgentEvent.Text({ step, text: turn.text }))
      const said: LanguageModel.Message = { _tag: "AssistantMessage", text: turn.text, toolCalls: turn.toolCalls }
      if (turn.toolCalls.length === 0) {
        if (agent.completion === "implicit") return state.finish(turn.text ?? "", step)
        state.messages = [...state.messages, said, { _tag: "UserMessage", text: Builtins.reminder }]
        continue
      }
      const records = yield* state.execute(step, turn.toolCalls)
      state.records.push(...records)
      state.messages = [...state.messages, said, ...records.map(toMessage)]
      if (agent.completion === "explicit") {
        // A task_complete beside other calls ends the run once they have all finished (design: Built-ins).
        const complete = records.find((r) => r.name === Builtins.taskCompleteName && r.result.success)
        if (complete !== undefined) return state.finish(complete.result.value as string, step)
      }
    }
    return yield* new MaxStepsExceeded({ maxSteps: agent.maxSteps, partial: state.result("", agent.maxSteps) })
  })

const toMessage = (record: ToolCallRecord): LanguageModel.Message => ({
  _tag: "ToolResultMessage",
  toolCallId: record.id,
  name: record.name,
  content: record.result.error ?? JSON.stringify(record.result.value),
  isError: record.result.error !== undefined
})

const parseInput = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** The state of one run: its messages, records, usage and idempotency cache (design: Per-run reuse), owned by the run. */
class Run {
  messages: ReadonlyArray<LanguageModel.Message>
  readonly records: Array<ToolCallRecord> = []
  readonly usage = { inputTokens: 0, outputTokens: 0 }
  readonly cache = new RunCache()
  /** How many calls of a turn may run at once: 1 when sequential. */
  readonly limit: number
  /** What hooks keep for this run (a call budget's counts): it goes when the run does. */
  readonly hookState = new RunState()

  constructor(
    /** The run's id: the task id its tool calls carry (per-run budgets and logs key on it). */
    readonly runId: string,
    readonly agent: Agent<any>,
    readonly toolkit: Toolkit.Toolkit,
    readonly model: LanguageModel.LanguageModel["Type"],
    readonly modelRetry: Timing["Type"]["modelRetry"],
    readonly tracing: boolean,
    readonly turnHooks: ReadonlyArray<TurnHook>,
    prompt: string,
    readonly emit: Emit | undefined
  ) {
    this.messages = [{ _tag: "UserMessage", text: prompt }]
    this.limit = agent.toolExecution === "sequential" ? 1 : agent.maxConcurrency ?? Infinity
  }

  result(output: string, steps: number): RunResult {
    return { output, steps, toolCalls: this.records, usage: this.usage }
  }

  finish(output: string, steps: number): RunResult {
    const result = this.result(output, steps)
    this.emit?.(AgentEvent.Done({ result }))
    return result
  }

  /** One model turn: turn hooks around it (design: Hooks), transient failures retried on `modelRetry`, a span when tracing. */
  ask(step: number): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> {
    const turn = this.turnHooks.length === 0
      ? this.generate(this.agent.instructions, this.toolkit.definitions)
      : runTurnHooks(
        this.turnHooks,
        { step, instructions: this.agent.instructions, tools: this.toolkit.definitions },
        (adjusted) => this.generate(adjusted.instructions, adjusted.tools)
      )
    if (!this.tracing) return turn
    return Effect.withSpan(turn, "chat", {
      kind: "client",
      attributes: { "gen_ai.operation.name": "chat", "agent_tools.step": step },
      captureStackTrace: false
    })
  }

  private generate(
    instructions: string | undefined,
    tools: ReadonlyArray<LanguageModel.ToolDefinition>
  ): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> {
    const generate = this.model.generate({ instructions, messages: this.messages, tools })
    return Effect.catchIf(
      generate,
      LanguageModel.isTransient,
      (first) =>
        retryAfterFailure(generate, first as LanguageModel.ModelFailure, this.modelRetry, {
          retryable: LanguageModel.isTransient,
          minDelayMillis: (error) => error._tag === "ModelError" ? error.retryAfterMillis : undefined,
          onRetry: (error, delay) =>
            Effect.logWarning(`model request failed (${error.message}); retrying in ${Duration.format(delay)}`)
        })
    )
  }

  /**
   * Runs the calls of one turn (design: Calls in a turn); records come back in call order. At most `limit` run
   * at once (1: sequential). Calls start on this stack, in order, until `limit` of them are waiting:
   * one that completes synchronously is recorded at once and costs no fiber; the rest start as the
   * waiting ones finish.
   */
  execute(step: number, calls: ReadonlyArray<LanguageModel.ToolCall>): Effect.Effect<Array<ToolCallRecord>> {
    return Effect.withFiberRuntime((fiber, status) => {
      if (this.emit !== undefined) {
        for (const call of calls) {
          this.emit(AgentEvent.ToolCallStarted({ step, id: call.id, name: call.name, input: parseInput(call.arguments) }))
        }
      }
      const records = new Array<ToolCallRecord>(calls.length)
      // Starts call `i` on the stack of `calling`: undefined once recorded, else the wait for its record.
      const begin = (calling: Pipeline.CallingFiber, i: number): Effect.Effect<void> | undefined => {
        const call = calls[i]!
        const startedAt = calling.clock.unsafeCurrentTimeMillis()
        const { cached, started } = this.start(calling, call)
        if (started instanceof ToolResult) {
          records[i] = this.record(calling, step, call, started, cached, startedAt)
          return undefined
        }
        return Effect.map(started, (result) => {
          records[i] = this.record(calling, step, call, result, cached, startedAt)
        })
      }
      const limit = this.limit
      const calling = new Pipeline.CallingFiber(fiber, status.runtimeFlags)
      const waits: Array<Effect.Effect<void>> = []
      let next = 0
      while (next < calls.length && waits.length < limit) {
        const wait = begin(calling, next++)
        if (wait !== undefined) waits.push(wait)
      }
      for (let i = next; i < calls.length; i++) {
        waits.push(Effect.withFiberRuntime((fiber, status) =>
          begin(new Pipeline.CallingFiber(fiber, status.runtimeFlags), i) ?? Effect.void
        ))
      }
      if (waits.length === 0) return Effect.succeed(records)
      // One call left to wait for: wait in this fiber, no fork.
      if (waits.length === 1) return Effect.as(waits[0]!, records)
      const concurrency = limit === 1 ? undefined : limit === Infinity ? "unbounded" as const : limit
      return Effect.as(Effect.all(waits, { concurrency, discard: true }), records)
    })
  }

  /** Starts one call: unknown tool -> `UnknownTool`; an idempotent one through the run's cache (design: Per-run reuse). */
  private start(
    calling: Pipeline.CallingFiber,
    call: LanguageModel.ToolCall
  ): { readonly started: Pipeline.Started; readonly cached: boolean } {
    const tool = this.toolkit.byName.get(call.name)
    if (tool === undefined) {
      const available = this.toolkit.tools.map((t) => t.name)
      return { started: ToolResult.failure(new UnknownTool({ toolName: call.name, available })), cached: false }
    }
    const options = { taskId: this.runId, toolCallId: call.id, run: this.hookState }
    if (!tool.idempotent) return { started: Pipeline.start(calling, tool, call.arguments, options), cached: false }
    const decoded = Pipeline.decodeInput(calling, tool, call.arguments)
    if (decoded instanceof ToolResult) return { started: decoded, cached: false }
    const key = `${tool.name}\n${Pipeline.inputKey(tool, decoded.input)}`
    const use = this.cache.use(key, () => Pipeline.startDecoded(calling, tool, decoded.input, options))
    if (!use.cached) return use
    return { started: Pipeline.traceReuse(calling, tool, call.id, use.started), cached: true }
  }

  private record(
    calling: Pipeline.CallingFiber,
    step: number,
    call: LanguageModel.ToolCall,
    result: ToolResult,
    cached: boolean,
    startedAt: number
  ): ToolCallRecord {
    const record: ToolCallRecord = {
      id: call.id,
      name: call.name,
      input: parseInput(call.arguments),
      result,
      cached,
      durationMillis: calling.clock.unsafeCurrentTimeMillis() - startedAt
    }
    this.emit?.(AgentEvent.ToolCallFinished({ step, call: record }))
    return record
  }
}
