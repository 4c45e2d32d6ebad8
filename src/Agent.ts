/**
 * The agent loop (design: Per-run reuse, Calls in a turn, The loop, Built-ins): ask the model, run the tools it calls through `Invocation`,
 * feed the results back, repeat until it answers (or calls `task_complete`).
 */
import { Cause, Clock, Context, Data, Duration, Effect, Either, FiberRef, type Layer, Mailbox, Option, Schema, Stream } from "effect"
import { createHash } from "node:crypto"
import * as Builtins from "./Builtins.js"
import * as Content from "./Content.js"
import { Ids } from "./Ids.js"
import * as Journal from "./Journal.js"
import * as Json from "./internal/util/json.js"
import * as Pipeline from "./internal/call/pipeline.js"
import * as Reuse from "./internal/call/reuse.js"
import { RunState } from "./internal/hooks/tool.js"
import { askApproval } from "./internal/hooks/shipped.js"
import { runTurnHooks, type TurnHook, TurnHooks } from "./internal/hooks/turn.js"
import { Denied, OutcomeUnknown, TimedOut, ToolResult, ToolResultFromJson, UnknownTool } from "./ToolResult.js"
import { UserPrompt } from "./UserPrompt.js"
import * as LanguageModel from "./LanguageModel.js"
import { retryAfterFailure, Timing } from "./Timing.js"
import * as Tool from "./Tool.js"
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
  /**
   * With a `Journal`: how long an approval a suspended run asks for stays valid (design: Durable runs);
   * no decision counts after it, and the call does not run. Default 24 hours.
   */
  readonly approvalExpiry?: Duration.DurationInput | undefined
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
  readonly approvalExpiry: Duration.Duration
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
    maxSteps: options.maxSteps ?? 20,
    approvalExpiry: Duration.decode(options.approvalExpiry ?? Duration.hours(24))
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

/** A call a suspended run waits to have approved or denied (design: Durable runs). */
export const PendingApproval = Schema.Struct({
  toolCallId: Schema.String,
  toolName: Schema.String,
  /** The decoded input, as JSON. */
  input: Schema.Unknown,
  /** Epoch milliseconds: no decision counts at or after it. */
  expiresAt: Schema.Number
})
/** A call a suspended run waits to have approved or denied. */
export type PendingApproval = typeof PendingApproval.Type

/**
 * A journaled run stopped to wait for a person (design: Durable runs): each call in `pending` needs
 * approval. `Agent.approve` / `Agent.deny` give the decisions (from any process with the journal),
 * then `Agent.resume(agent, runId)` goes on.
 */
export class RunSuspended extends Schema.TaggedError<RunSuspended>("agent-tools/RunSuspended")("RunSuspended", {
  runId: Schema.String,
  pending: Schema.Array(PendingApproval)
}) {
  override get message(): string {
    const calls = this.pending.map((p) => `${p.toolName} (${p.toolCallId})`).join(", ")
    return `the run ${this.runId} waits for approval of ${calls}`
  }
}

/** `Agent.run` was given a `runId` the journal already has: resume it with `Agent.resume` instead. */
export class RunIdInUse extends Schema.TaggedError<RunIdInUse>("agent-tools/RunIdInUse")("RunIdInUse", {
  runId: Schema.String
}) {
  override get message(): string {
    return `the journal already has a run ${this.runId}: resume it with Agent.resume, or give another runId`
  }
}

/** `Agent.resume` was given a run id the journal does not have. */
export class UnknownRun extends Schema.TaggedError<UnknownRun>("agent-tools/UnknownRun")("UnknownRun", {
  runId: Schema.String
}) {
  override get message(): string {
    return `the journal has no run ${this.runId}`
  }
}

/** `Agent.approve` / `Agent.deny` found no approval to decide: none asked, expired, or decided already. */
export class NoPendingApproval extends Schema.TaggedError<NoPendingApproval>("agent-tools/NoPendingApproval")(
  "NoPendingApproval",
  { runId: Schema.String, toolCallId: Schema.String }
) {
  override get message(): string {
    return `the run ${this.runId} has no pending approval for call ${this.toolCallId} ` +
      `(none was asked, it expired, or it was decided already)`
  }
}

/**
 * Why a run failed: its toolkit broke a limit, the model failed for good, it ran out of steps; with a
 * journal, it suspended for approvals or its given id was in use.
 */
export type AgentError =
  | Toolkit.ManifestError
  | LanguageModel.ModelFailure
  | MaxStepsExceeded
  | RunSuspended
  | RunIdInUse

/** What `Agent.stream` reports, in order, as a run goes. */
export type AgentEvent = Data.TaggedEnum<{
  TurnStarted: { readonly step: number }
  Text: { readonly step: number; readonly text: string }
  ToolCallStarted: { readonly step: number; readonly id: string; readonly name: string; readonly input: unknown }
  ToolCallFinished: { readonly step: number; readonly call: ToolCallRecord }
  /** A journaled run goes on from its journal (design: Durable runs): its first `step` not journaled yet. */
  Resumed: { readonly runId: string; readonly step: number }
  /** A journaled model turn (`id` undefined) or call outcome (`id`) used instead of asking or running again. */
  Replayed: { readonly step: number; readonly id: string | undefined }
  /** The run stopped to wait for approvals; nothing follows (resume it once they are given). */
  Suspended: { readonly runId: string; readonly pending: ReadonlyArray<PendingApproval> }
  Done: { readonly result: RunResult }
}>

/** Constructors and matchers of `AgentEvent`. */
export const AgentEvent = Data.taggedEnum<AgentEvent>()

// ---------------------------------------------------------------------------------------------
// Running.

/** Options of one run. */
export interface RunOptions {
  /**
   * With a `Journal`: the run's id, by which `Agent.resume` finds it (design: Durable runs). Default: a
   * new id from the id service (`RunSuspended` names it; so does `Agent.stream`'s `Resumed`).
   */
  readonly runId?: string | undefined
}

/**
 * Runs the agent on `prompt` until the model is done. Tool failures, unknown tools and malformed
 * arguments go back to the model as error results; the run fails only with an `AgentError`. With a
 * `Journal` in context the run is journaled as it goes (design: Durable runs), so that
 * `Agent.resume` can take it up in any process with the same store.
 */
export const run = <R>(
  agent: Agent<R>,
  prompt: string,
  options?: RunOptions
): Effect.Effect<RunResult, AgentError, LanguageModel.LanguageModel | Exclude<R, ToolContext>> =>
  // Only a resume can name a run the journal does not have.
  traced(agent, loop(agent, { prompt, runId: options?.runId }, undefined) as Effect.Effect<RunResult, AgentError, LanguageModel.LanguageModel>)

/**
 * Goes on with the journaled run `runId` (design: Durable runs), in this process or any other with
 * the same store: its journaled turns are replayed, not asked again; its journaled outcomes are
 * reused (the per-run reuse of idempotent tools too); a call journaled as started without an
 * outcome runs again if its tool is not idempotent, and reads "outcome unknown" if it is. A run
 * that had ended answers its stored result.
 */
export const resume = <R>(
  agent: Agent<R>,
  runId: string
): Effect.Effect<
  RunResult,
  AgentError | UnknownRun,
  LanguageModel.LanguageModel | Journal.Journal | Exclude<R, ToolContext>
> => traced(agent, loop(agent, { resume: runId }, undefined))

/**
 * The same run as a stream of `AgentEvent`s, ending with `Done` (or the run's error); a run that
 * suspends for approvals ends with `Suspended`. `resume` streams a resumed run the same way.
 */
export const stream = <R>(
  agent: Agent<R>,
  prompt: string,
  options?: RunOptions & { readonly resume?: boolean | undefined }
): Stream.Stream<AgentEvent, AgentError | UnknownRun, LanguageModel.LanguageModel | Exclude<R, ToolContext>> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const mailbox = yield* Mailbox.make<AgentEvent, AgentError | UnknownRun>()
    const start: Start = options?.resume === true && options.runId !== undefined
      ? { resume: options.runId }
      : { prompt, runId: options?.runId }
    yield* traced(agent, loop(agent, start, (event) => mailbox.unsafeOffer(event))).pipe(
      Effect.matchCauseEffect({
        onSuccess: () => mailbox.end,
        onFailure: (cause) =>
          Cause.failureOption(cause).pipe(Option.exists((e) => e._tag === "RunSuspended"))
            ? mailbox.end
            : mailbox.failCause(cause)
      }),
      Effect.forkScoped
    )
    return Mailbox.toStream(mailbox)
  }))

/** What a host that journals runs itself (the platform's task runner) tells the loop. */
export interface HostOptions {
  /** The run's id in the journal in context, where the host wrote it first; it is resumed from there. */
  readonly runId: string
  /**
   * A call journaled as started without an outcome runs again whatever its tool: its executor
   * dedupes by (run id, call id) (the platform's serving processes), so a repeat has no second effect.
   */
  readonly rerunUnfinished: boolean
}

/**
 * The run of `Agent.run`, telling `onEvent` each `AgentEvent` as it happens, synchronously and in
 * order: for hosts that forward events themselves (the platform's task runner) without a stream.
 * With `host`, the run is the host's journaled one (a task), ended in the journal by the host.
 */
export const runWithEvents = <R>(
  agent: Agent<R>,
  prompt: string,
  onEvent: (event: AgentEvent) => void,
  host?: HostOptions
): Effect.Effect<RunResult, AgentError, LanguageModel.LanguageModel | Exclude<R, ToolContext>> =>
  traced(
    agent,
    loop(agent, host === undefined ? { prompt } : { prompt, runId: host.runId, host }, onEvent) as Effect.Effect<
      RunResult,
      AgentError,
      LanguageModel.LanguageModel
    >
  )

/**
 * Approves the call `toolCallId` a suspended run `runId` waits for (design: Durable runs), from any
 * process with the run's journal; `Agent.resume` then runs it. Only a pending, unexpired approval can
 * be given: else `NoPendingApproval`. The approval holds for that call, with that input, of that
 * tool as it was defined when the run asked.
 */
export const approve = (
  runId: string,
  toolCallId: string
): Effect.Effect<void, NoPendingApproval | Journal.JournalUnavailable, Journal.Journal> =>
  decide(runId, toolCallId, true, undefined)

/**
 * Denies the call `toolCallId` a suspended run `runId` waits for: it never runs, and the model reads
 * the denial, with `reason` when given, once the run resumes.
 */
export const deny = (
  runId: string,
  toolCallId: string,
  options?: { readonly reason?: string | undefined }
): Effect.Effect<void, NoPendingApproval | Journal.JournalUnavailable, Journal.Journal> =>
  decide(runId, toolCallId, false, options?.reason)

const decide = (runId: string, toolCallId: string, approved: boolean, reason: string | undefined) =>
  Effect.gen(function*() {
    const journal = yield* Journal.Journal
    const now = yield* Clock.currentTimeMillis
    const decided = yield* journal.decide(runId, toolCallId, { approved, reason, now })
    if (!decided) return yield* new NoPendingApproval({ runId, toolCallId })
    yield* Effect.logInfo(`run ${runId}: call ${toolCallId} ${approved ? "approved" : "denied"}`)
  })

/** For callers outside Effect: runs the agent with `layer` providing the model and the tools' services. */
export const runPromise = <R, E>(
  agent: Agent<R>,
  prompt: string,
  layer: Layer.Layer<LanguageModel.LanguageModel | Exclude<R, ToolContext>, E>
): Promise<RunResult> => Effect.runPromise(Effect.provide(run(agent, prompt), layer))

/** The run's span, `invoke_agent <name>`, when tracing is on; nothing at all when it is off. */
const traced = <A, E, R>(agent: Agent<any>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    fiber.getFiberRef(FiberRef.currentTracerEnabled)
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

/** How a run starts: new (a prompt, maybe its id; a host's task), or resumed from the journal. */
type Start =
  | { readonly prompt: string; readonly runId?: string | undefined; readonly host?: HostOptions | undefined }
  | { readonly resume: string }

/** A journaled run's journal, what it held when the run (re)started, and how to treat it. */
interface Journaled {
  readonly journal: Journal.Journal["Type"]
  readonly turns: ReadonlyArray<LanguageModel.ModelTurn>
  readonly calls: ReadonlyMap<string, Journal.JournaledCall>
  readonly approvals: ReadonlyMap<string, Journal.Approval>
  readonly rerunUnfinished: boolean
  /** The host ends the run in the journal (with its own final record), not the loop. */
  readonly hostEnds: boolean
}

/** A run ready to go: its id and prompt, its journal if it has one, and whether it goes on from there. */
interface Opened {
  readonly runId: string
  readonly prompt: string
  readonly journaled: Journaled | undefined
  readonly resumed: boolean
}

const RunResultJson = Schema.parseJson(RunResult)

/** Opens the run `start` names (design: Durable runs): a new one, or one the journal holds; an ended one is its result. */
const open = (
  agent: Agent<any>,
  start: Start,
  journal: Journal.Journal["Type"]
): Effect.Effect<Opened | { readonly ended: RunResult }, UnknownRun | RunIdInUse> =>
  Effect.gen(function*() {
    const from = (known: Journal.OpenRun, host: HostOptions | undefined): Opened => ({
      runId: known.runId,
      prompt: known.prompt,
      journaled: {
        journal,
        turns: known.turns,
        calls: known.calls,
        approvals: known.approvals,
        rerunUnfinished: host?.rerunUnfinished ?? false,
        hostEnds: host !== undefined
      },
      resumed: known.turns.length > 0 || known.status === "suspended"
    })
    if ("resume" in start) {
      const known = yield* Effect.orDie(journal.run(start.resume))
      if (known === undefined) return yield* new UnknownRun({ runId: start.resume })
      if (!Journal.isOpen(known)) {
        if (known.result === undefined) return yield* new UnknownRun({ runId: start.resume })
        return { ended: yield* Effect.orDie(Schema.decode(RunResultJson)(known.result)) }
      }
      if (known.status === "suspended") yield* journal.resumed(known.runId)
      return from(known, undefined)
    }
    if (start.host !== undefined) {
      // The host wrote the run first (a platform task), and may be taking it back after a restart.
      const known = yield* Effect.orDie(journal.run(start.host.runId))
      if (known === undefined || !Journal.isOpen(known)) {
        return yield* Effect.dieMessage(`the journal has no open run ${start.host.runId} for its host`)
      }
      return from(known, start.host)
    }
    const runId = start.runId ?? (yield* Ids).make("run")
    if (start.runId !== undefined && (yield* Effect.orDie(journal.run(runId))) !== undefined) {
      return yield* new RunIdInUse({ runId })
    }
    yield* journal.started({ runId, kind: "run", agentId: agent.name, processId: "", prompt: start.prompt, tools: [] })
    return {
      runId,
      prompt: start.prompt,
      journaled: {
        journal,
        turns: [],
        calls: new Map(),
        approvals: new Map(),
        rerunUnfinished: false,
        hostEnds: false
      },
      resumed: false
    }
  })

const loop = (
  agent: Agent<any>,
  start: Start,
  emit: Emit | undefined
): Effect.Effect<RunResult, AgentError | UnknownRun, LanguageModel.LanguageModel> =>
  Effect.gen(function*() {
    const { journal, ...services } = yield* runServices
    const toolkit = yield* toolkitOf(agent)
    // Without a journal a run is new, and opening it costs nothing more than its id.
    const opened = journal !== undefined
      ? yield* open(agent, start, journal)
      : "resume" in start
      ? yield* new UnknownRun({ runId: start.resume })
      : { runId: start.runId ?? services.ids.make("run"), prompt: start.prompt, journaled: undefined, resumed: false }
    if ("ended" in opened) {
      emit?.(AgentEvent.Done({ result: opened.ended }))
      return opened.ended
    }
    const { model, policy, tracing, turnHooks } = services
    const { journaled, runId } = opened
    const state = new Run(runId, agent, toolkit, model, policy.modelRetry, tracing, turnHooks, opened.prompt, emit, journaled)
    if (opened.resumed) yield* state.note(AgentEvent.Resumed({ runId, step: (journaled?.turns.length ?? 0) + 1 }))
    for (let step = 1; step <= agent.maxSteps; step++) {
      emit?.(AgentEvent.TurnStarted({ step }))
      const turn = yield* state.ask(step)
      state.usage.inputTokens += turn.usage.inputTokens
      state.usage.outputTokens += turn.usage.outputTokens
      if (turn.text !== undefined && turn.text !== "") emit?.(AgentEvent.Text({ step, text: turn.text }))
      const said: LanguageModel.Message = { _tag: "AssistantMessage", text: turn.text, toolCalls: turn.toolCalls }
      if (turn.toolCalls.length === 0) {
        if (agent.completion === "implicit") return yield* state.finish(turn.text ?? "", step)
        state.messages = [...state.messages, said, { _tag: "UserMessage", text: Builtins.reminder }]
        continue
      }
      const records = yield* state.execute(step, turn.toolCalls)
      // Calls waiting for approval: their turn's other outcomes are journaled; the run stops here.
      if (state.pending.length > 0) return yield* state.suspend()
      state.records.push(...records)
      state.messages = [...state.messages, said, ...records.map(toMessage(toolkit))]
      if (agent.completion === "explicit") {
        // A task_complete beside other calls ends the run once they have all finished (design: Built-ins).
        const complete = records.find((r) => r.name === Builtins.taskCompleteName && r.result.success)
        if (complete !== undefined) return yield* state.finish(complete.result.value as string, step)
      }
    }
    return yield* new MaxStepsExceeded({ maxSteps: agent.maxSteps, partial: state.result("", agent.maxSteps) })
  })

/** The result of a call waiting for approval: never recorded, never shown to the model. */
const awaitingApproval = ToolResult.failure("awaiting approval")

/** What a run reads from its fiber, in one step rather than one a service (a run's start is on the hot path). */
const runServices = Effect.withFiberRuntime<{
  readonly journal: Journal.Journal["Type"] | undefined
  readonly ids: Ids["Type"]
  readonly model: LanguageModel.LanguageModel["Type"]
  readonly policy: Timing["Type"]
  readonly tracing: boolean
  readonly turnHooks: ReadonlyArray<TurnHook>
}, never, LanguageModel.LanguageModel>((fiber) => {
  const context = fiber.currentContext as Context.Context<LanguageModel.LanguageModel>
  return Effect.succeed({
    journal: Option.getOrUndefined(Context.getOption(context, Journal.Journal)),
    ids: Context.get(context, Ids),
    model: Context.get(context, LanguageModel.LanguageModel),
    policy: Context.get(context, Timing),
    tracing: fiber.getFiberRef(FiberRef.currentTracerEnabled),
    turnHooks: Context.get(context, TurnHooks)
  })
})

const fingerprints = new WeakMap<Tool.Any, string>()

/** A digest of what a tool is to the model and to its caller: name, description, schemas (design: Durable runs). */
const fingerprintOf = (tool: Tool.Any): string => {
  let known = fingerprints.get(tool)
  if (known === undefined) {
    const schemas = Either.getOrUndefined(tool.schemas)
    const definition = { name: tool.name, description: tool.description, schemas: schemas ?? null }
    known = createHash("sha256").update(Json.canonical(definition)).digest("hex")
    fingerprints.set(tool, known)
  }
  return known
}

/** A call's outcome as the model reads it: the error text, a content output's rendering (design: Content), or JSON. */
const toMessage = (toolkit: Toolkit.Toolkit<any>) => (record: ToolCallRecord): LanguageModel.Message => ({
  _tag: "ToolResultMessage",
  toolCallId: record.id,
  name: record.name,
  content: record.result.error ?? contentText(toolkit, record) ?? JSON.stringify(record.result.value),
  isError: record.result.error !== undefined
})

const contentText = (toolkit: Toolkit.Toolkit<any>, record: ToolCallRecord): string | undefined => {
  const tool = toolkit.byName.get(record.name)
  return tool !== undefined && Content.isContentSchema(tool.output)
    ? Content.render(record.result.value as Content.Item | Content.Items)
    : undefined
}

/**
 * A call's arguments as a record and an event show them: the parsed JSON, or the raw text when it is
 * not JSON within the limits (design: Hostile clients). A value nested past them stays text, so no
 * consumer of the record (a stream, a journal writing the run's result) can exhaust its stack on it.
 */
const parseInput = (text: string): unknown => {
  const parsed = Json.parse(text)
  return "value" in parsed && !Json.deeperThan(parsed.value, Json.defaultLimits.maxDepth) ? parsed.value : text
}

/** The state of one run: its messages, records, usage and idempotency cache (design: Per-run reuse), owned by the run. */
class Run {
  messages: ReadonlyArray<LanguageModel.Message>
  readonly records: Array<ToolCallRecord> = []
  readonly usage = { inputTokens: 0, outputTokens: 0 }
  /** The run's outcomes of idempotent tools, by input (design: Per-run reuse). */
  readonly outcomes = new Reuse.Outcomes({ joinInFlight: true })
  /** How many calls of a turn may run at once: 1 when sequential. */
  readonly limit: number
  /** What hooks keep for this run (a call budget's counts): it goes when the run does. */
  readonly hookState = new RunState()
  /** The approvals this turn's calls wait for (design: Durable runs): the run suspends after the turn. */
  readonly pending: Array<Omit<Journal.Approval, "decision" | "reason">> = []

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
    readonly emit: Emit | undefined,
    /** Its journal, when it has one (design: Durable runs). */
    readonly journaled: Journaled | undefined
  ) {
    this.messages = [{ _tag: "UserMessage", text: prompt }]
    this.limit = agent.toolExecution === "sequential" ? 1 : agent.maxConcurrency ?? Infinity
  }

  result(output: string, steps: number): RunResult {
    return { output, steps, toolCalls: this.records, usage: this.usage }
  }

  /** Ends the run with `output`: journaled first (unless its host ends it), then `Done`. */
  finish(output: string, steps: number): Effect.Effect<RunResult> {
    const result = this.result(output, steps)
    const done = Effect.sync(() => {
      this.emit?.(AgentEvent.Done({ result }))
      return result
    })
    const journaled = this.journaled
    if (journaled === undefined || journaled.hostEnds) return done
    return Effect.zipRight(
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => journaled.journal.ended(this.runId, { result: Schema.encodeSync(RunResultJson)(result) }, now)
      ),
      done
    )
  }

  /** Suspends the run on the approvals its last turn asked for: journaled, then `Suspended`, then `RunSuspended`. */
  suspend(): Effect.Effect<never, RunSuspended> {
    const pending = this.pending.map((p) => ({
      toolCallId: p.toolCallId,
      toolName: p.toolName,
      input: JSON.parse(p.input) as unknown,
      expiresAt: p.expiresAt
    }))
    return this.journaled!.journal.suspended(this.runId, this.pending).pipe(
      Effect.zipRight(this.note(AgentEvent.Suspended({ runId: this.runId, pending }))),
      Effect.zipRight(Effect.fail(new RunSuspended({ runId: this.runId, pending })))
    )
  }

  /** Tells the run's observers of a durable-run event: `emit`, a log line, and the run's span when tracing. */
  note(event: AgentEvent): Effect.Effect<void> {
    return Effect.suspend(() => {
      this.emit?.(event)
      const attributes = { "agent_tools.run.id": this.runId }
      const span = this.tracing
        ? Effect.flatMap(
          Effect.option(Effect.currentSpan),
          (span) =>
            Effect.sync(() => Option.map(span, (s) => s.event(`agent_tools.run.${event._tag.toLowerCase()}`, 0n, attributes)))
        )
        : Effect.void
      return Effect.zipRight(span, Effect.logInfo(`run ${this.runId}: ${event._tag.toLowerCase()}`))
    })
  }

  /** One model turn: replayed from the journal when it holds it, else asked (and journaled before the loop sees it). */
  ask(step: number): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> {
    const journaled = this.journaled
    if (journaled === undefined) return this.askModel(step)
    const replayed = journaled.turns[step - 1]
    if (replayed !== undefined) {
      this.emit?.(AgentEvent.Replayed({ step, id: undefined }))
      return Effect.succeed(replayed)
    }
    // The journal's turn is the run's: the first writer's, should another process have asked too.
    return Effect.flatMap(this.askModel(step), (turn) => journaled.journal.turn(this.runId, step, turn))
  }

  /** Asks the model: turn hooks around it (design: Hooks), transient failures retried on `modelRetry`, a span when tracing. */
  private askModel(step: number): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> {
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
      // Each call's arguments are parsed once: for its events and record, and for the pipeline.
      const inputs = calls.map((call) => parseInput(call.arguments))
      if (this.emit !== undefined) {
        for (let i = 0; i < calls.length; i++) {
          const call = calls[i]!
          this.emit(AgentEvent.ToolCallStarted({ step, id: call.id, name: call.name, input: inputs[i] }))
        }
      }
      const records = new Array<ToolCallRecord>(calls.length)
      // Starts call `i` on the stack of `calling`: undefined once recorded, else the wait for its record.
      const begin = (calling: Pipeline.CallingFiber, i: number): Effect.Effect<void> | undefined => {
        const call = calls[i]!
        const input = inputs[i]
        const args = input === call.arguments ? call.arguments : new Pipeline.ParsedArguments(call.arguments, input)
        const startedAt = calling.clock.unsafeCurrentTimeMillis()
        const started = this.journaled === undefined
          ? this.start(calling, call, args)
          : this.startJournaled(calling, step, call, args)
        if (started instanceof ToolResult) {
          records[i] = this.record(calling, step, call, input, started, startedAt)
          return undefined
        }
        return Effect.map(started, (result) => {
          records[i] = this.record(calling, step, call, input, result, startedAt)
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

  /** Starts one call through the pipeline: unknown tool -> `UnknownTool`; an idempotent one reuses the run's outcomes (design: Per-run reuse). */
  private start(calling: Pipeline.CallingFiber, call: LanguageModel.ToolCall, args: string | Pipeline.ParsedArguments): Pipeline.Started {
    const tool = this.toolkit.byName.get(call.name)
    if (tool === undefined) {
      const available = this.toolkit.tools.map((t) => t.name)
      return ToolResult.failure(new UnknownTool({ toolName: call.name, available }))
    }
    return Pipeline.start(calling, tool, args, { taskId: this.runId, toolCallId: call.id, run: this.hookState, reuse: this.outcomes })
  }

  /**
   * Starts one call of a journaled run (design: Durable runs): a journaled outcome is reused; else the
   * pipeline decodes it and `replay` decides, as its gate.
   */
  private startJournaled(
    calling: Pipeline.CallingFiber,
    step: number,
    call: LanguageModel.ToolCall,
    args: string | Pipeline.ParsedArguments
  ): Pipeline.Started {
    const known = this.journaled!.calls.get(call.id)
    const tool = this.toolkit.byName.get(call.name)
    if (tool === undefined || known?.result !== undefined && !tool.idempotent) {
      if (known?.result === undefined) return this.start(calling, call, args)
      this.emit?.(AgentEvent.Replayed({ step, id: call.id }))
      return known.result
    }
    return Pipeline.start(calling, tool, args, {
      taskId: this.runId,
      toolCallId: call.id,
      run: this.hookState,
      reuse: this.outcomes,
      gate: (admitted) => this.replay(calling.clock.unsafeCurrentTimeMillis(), step, call, known, admitted)
    })
  }

  /**
   * A decoded call of a journaled run (design: Durable runs): an idempotent tool's journaled outcome is the
   * run's outcome for that input again; so is one the run reused already; a call journaled as
   * started without an outcome reads "outcome unknown" if its tool is idempotent, and runs again
   * (within its journaled deadline) if not; a new call is journaled as started before it runs, and its
   * outcome before the loop sees it. A call that needs approval passes `approve` first.
   */
  private replay(
    now: number,
    step: number,
    call: LanguageModel.ToolCall,
    known: Journal.JournaledCall | undefined,
    admitted: Pipeline.Admitted
  ): Pipeline.Started {
    const { tool } = admitted
    if (known?.result !== undefined) {
      this.emit?.(AgentEvent.Replayed({ step, id: call.id }))
      return admitted.keep(known.result)
    }
    const reused = admitted.reused()
    if (reused !== undefined) {
      return Effect.flatMap(Pipeline.awaitStarted(reused), (result) => this.journalOutcome(call, result, known))
    }
    if (known !== undefined) {
      // It started before the run stopped; whether it had its effect is unknown (design: Interruption and shutdown).
      if (tool.idempotent && !this.journaled!.rerunUnfinished) {
        const unknown = ToolResult.failure(new OutcomeUnknown({ toolName: tool.name, earlierAttempt: "unfinished" }))
        admitted.keep(unknown)
        return this.journalOutcome(call, unknown, known)
      }
      if (known.deadlineAt <= now) {
        // Its deadline passed while the run was stopped: it timed out, as the first run's would have.
        const allowedMillis = Duration.toMillis(tool.timeout)
        const timedOut = ToolResult.failure(new TimedOut({ toolName: tool.name, allowedMillis }))
        return this.journalOutcome(call, timedOut, known)
      }
      // It passed its approval before it started.
      return this.runJournaled(admitted, call, known.deadlineAt, false, tool.needsApproval)
    }
    const deadlineAt = now + Duration.toMillis(tool.timeout)
    if (tool.needsApproval) return this.approve(admitted, call, now, deadlineAt)
    return this.runJournaled(admitted, call, deadlineAt, true, false)
  }

  /**
   * A journaled call run: journaled as started first (unless it was already), its outcome journaled
   * before the loop sees it; an idempotent tool's kept as the run's outcome for its input.
   */
  private runJournaled(
    admitted: Pipeline.Admitted,
    call: LanguageModel.ToolCall,
    deadlineAt: number,
    firstStart: boolean,
    approved: boolean
  ): Pipeline.Started {
    const { journal } = this.journaled!
    const started = Effect.zipRight(
      firstStart
        ? journal.callStarted(this.runId, { toolCallId: call.id, name: call.name, arguments: call.arguments, deadlineAt })
        : Effect.void,
      // The journal's outcome is the call's: the first writer's, should another process have run it too.
      Effect.flatMap(admitted.run({ deadlineAt, approved }), (result) => journal.callEnded(this.runId, call.id, result))
    )
    return admitted.keep(started)
  }

  /**
   * Journals `result` as the outcome of `call`, which did not run its handler here (reused, unknown,
   * denied); gives the outcome the journal holds (the first writer's).
   */
  private journalOutcome(
    call: LanguageModel.ToolCall,
    result: ToolResult,
    known: Journal.JournaledCall | undefined
  ): Effect.Effect<ToolResult> {
    const { journal } = this.journaled!
    const deadlineAt = known?.deadlineAt ?? 0
    return journal.callAnswered(this.runId, { toolCallId: call.id, name: call.name, arguments: call.arguments, deadlineAt }, result)
  }

  /**
   * The approval of a call (design: Durable runs). A decision counts only if it was given for this
   * call id, this input and this definition of the tool, before its expiry: approved, the call runs;
   * denied, the model reads the denial. With no decision, a person at hand (`UserPrompt`) decides now;
   * else the call waits and the run suspends after its turn.
   */
  private approve(
    admitted: Pipeline.Admitted,
    call: LanguageModel.ToolCall,
    now: number,
    deadlineAt: number
  ): Pipeline.Started {
    const { input, inputKey, tool } = admitted
    const fingerprint = fingerprintOf(tool)
    const asked = this.journaled!.approvals.get(call.id)
    const bound = asked !== undefined && asked.toolName === tool.name && asked.inputKey === inputKey &&
      asked.fingerprint === fingerprint
    const deny = (reason: string) =>
      this.journalOutcome(call, ToolResult.failure(new Denied({ toolName: tool.name, reason })), undefined)
    if (bound && asked.decision !== "pending") {
      if (now >= asked.expiresAt) return deny("its approval expired before the run went on; it did not run")
      if (asked.decision === "denied") {
        return deny(`the user denied this call${asked.reason === undefined ? "" : `: ${asked.reason}`}; it did not run`)
      }
      return this.runJournaled(admitted, call, deadlineAt, true, true)
    }
    if (bound && now >= asked.expiresAt) {
      return deny("no one decided on this call before its approval expired; it did not run")
    }
    const wait = Effect.sync(() => {
      this.pending.push({
        toolCallId: call.id,
        toolName: tool.name,
        input: Json.canonical(input),
        inputKey,
        fingerprint,
        expiresAt: bound ? asked.expiresAt : now + Duration.toMillis(this.agent.approvalExpiry)
      })
      return awaitingApproval
    })
    return Effect.flatMap(Effect.serviceOption(UserPrompt), (prompt) => {
      if (Option.isNone(prompt)) return wait
      return askApproval(prompt.value, tool.name, input).pipe(
        Effect.flatMap((yes) =>
          yes
            ? Pipeline.awaitStarted(this.runJournaled(admitted, call, deadlineAt, true, true))
            : deny("the user did not approve this call; it did not run")
        ),
        // Nobody answered there: the decision can still come through the journal.
        Effect.catchAll(() => wait)
      )
    })
  }

  private record(
    calling: Pipeline.CallingFiber,
    step: number,
    call: LanguageModel.ToolCall,
    input: unknown,
    result: ToolResult,
    startedAt: number
  ): ToolCallRecord {
    const record: ToolCallRecord = {
      id: call.id,
      name: call.name,
      input,
      result,
      cached: this.outcomes.wasReused(call.id),
      durationMillis: calling.clock.unsafeCurrentTimeMillis() - startedAt
    }
    if (result !== awaitingApproval) this.emit?.(AgentEvent.ToolCallFinished({ step, call: record }))
    return record
  }
}
