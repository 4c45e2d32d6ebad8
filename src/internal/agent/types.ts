/**
 * What an agent and its runs are, as data (design: The loop, Durable runs): the agent's options, a run's
 * record and result, its events and its errors. `Agent` re-exports all of it; the loop's parts read it.
 */
import { Data, type Duration, type Either, Schema } from "effect"
import type * as Guardrail from "../../Guardrail.js"
import type * as Journal from "../../Journal.js"
import * as LanguageModel from "../../LanguageModel.js"
import type * as Session from "../../Session.js"
import type * as Tool from "../../Tool.js"
import type * as Toolkit from "../../Toolkit.js"
import { ToolResultFromJson } from "../../ToolResult.js"
import type { RunState } from "../hooks/tool.js"

/** Identifies an `Agent` value at run time. */
export const TypeId: unique symbol = Symbol.for("agent-tools/Agent")

/** How the calls of one model turn run (design: Calls in a turn). */
export type ToolExecution = "concurrent" | "sequential"

/** How a run ends: when the model answers without a tool call, or only through `task_complete` (design: Built-ins). */
export type Completion = "implicit" | "explicit"

/** Options of `Agent.make` (design: The loop). */
export interface Options<
  Tools extends ReadonlyArray<Tool.Any>,
  A = never,
  Handoffs extends ReadonlyArray<Handoff> = ReadonlyArray<Agent<never, any>>,
  RK = never,
  KTools extends ReadonlyArray<Tool.Any> = readonly []
> {
  /** Shown in spans and logs. Default `"agent"`. */
  readonly name?: string | undefined
  /** The tools offered to the model (after the toolkit's, when both are given). */
  readonly tools?: Tools | undefined
  /**
   * A toolkit (`Toolkit.make`; closed in a layer with `Toolkit.closed`): its tools are offered to the model,
   * and what its handlers still need (`RK`) is the agent's. The run checks the limits again, with `tools`.
   */
  readonly toolkit?: Toolkit.Toolkit<RK, KTools> | undefined
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
  /**
   * A typed final output (design: The model side): the model's final answer is JSON this Schema
   * decodes (strictly: every issue, no unknown key), asked through the provider's structured-output
   * mode; the run's result carries the decoded `value`. An answer that does not decode goes back to
   * the model with its issues, `outputRetries` times at most; then the run fails with `OutputInvalid`.
   * With `completion: "implicit"` (the default) only.
   */
  readonly output?: Schema.Schema<A, any, never> | undefined
  /** How many answers that do not decode go back to the model before the run fails. Default 2. */
  readonly outputRetries?: number | undefined
  /**
   * Agents this one may hand the run over to (design: Agents that call agents): each gives the model a
   * `transfer_to_<name>` tool; called, the run goes on as that agent (its instructions and tools) with the
   * conversation so far. Journaled like any turn: a resume goes on with the agent that held the run. An agent
   * not made yet (a handoff back to this one) is given by its name and a function: `{ name, agent: () => triage }`.
   */
  readonly handoffs?: Handoffs | undefined
  /**
   * A budget for each run of the agent: its tokens, or its cost in US dollars by the
   * price table (`Cost`). Checked before each turn: a turn that would pass it is not asked, and the run fails with
   * `BudgetExceeded`; a model call is never cut mid-way. `Agent.run`'s `budget` overrides it for one run.
   */
  readonly budget?: Budget | undefined
  /**
   * Checks of the prompt before the first model turn and of the final answer before it is returned (`Guardrail`):
   * a trip ends the run with `GuardrailTripped`.
   */
  readonly guardrails?: Guardrail.Guardrails | undefined
  /** What the model of a run of a session reads of the session's earlier turns (`Session.History`). Default: all. */
  readonly history?: Session.History | undefined
}

/** A run's budget: at most `tokens` (input, output and cache, summed over its turns), at most `costUsd` US dollars. */
export interface Budget {
  readonly tokens?: number | undefined
  readonly costUsd?: number | undefined
}

/** An agent to hand a run over to: the agent, or its name and a function that gives it (one made later). */
export type Handoff = Agent<any, any> | { readonly name: string; readonly agent: () => Agent<any, any> }

/** What the handlers of the tools of an agent (or a union of agents, or of handoffs) need. */
export type AgentRequirements<G> = G extends Agent<infer R, any, any> ? R
  : G extends { readonly agent: () => Agent<infer R, any, any> } ? R
  : never

/**
 * What a run of an agent (or a union of agents, or of handoffs) can fail with, `RunIdInUse` aside (only a
 * run given a `runId` can: `RunIdError`). An agent typed without it (`Agent<R, A>`) can fail with any `AgentError`.
 */
export type AgentErrors<G> = G extends Agent<any, any, infer E> ? E
  : G extends { readonly agent: () => Agent<any, any, infer E> } ? E
  : never

/** What a run of the agent `G` with options `O` can fail with: `AgentErrors`, and `RunIdInUse` when `O` gives a `runId`. */
export type RunError<G, O = {}> = AgentErrors<G> | RunIdError<O>

/** `SessionBusy` when run options `O` may name a session. */
export type SessionError<O> = NamesSession<O> extends true ? Session.SessionBusy : never

/** What a run with options `O` needs besides its model and tools: a `Journal` for a run of a session. */
export type SessionRequirement<O> = NamesSession<O> extends true ? Journal.Journal : never

/** Whether run options `O` may name a session. */
type NamesSession<O> = "session" extends keyof O ? O extends { readonly session?: undefined } ? false : true : false

/** `GuardrailTripped` for an agent made with guardrails `G`. */
export type GuardrailError<G> = [G] extends [undefined] ? never : Guardrail.GuardrailTripped

/** `RunIdInUse` when run options `O` may give a `runId`. */
export type RunIdError<O> = O extends { readonly runId: string } ? RunIdInUse
  // Options without a `runId` key (`{ session }`) give none: checked by key, since `{ runId?: undefined }` is a weak type.
  : "runId" extends keyof O ? O extends { readonly runId?: undefined } ? never : RunIdInUse
  : never

/** `RunSuspended` when one of the tools `T` (a union) may need approval: a tool typed `needsApproval: false` cannot. */
export type ApprovalError<T> = [T extends Tool.Approval<infer N> ? N : boolean] extends [false] ? never : RunSuspended

/** `OutputInvalid` when the agent has a typed final output `A`. */
export type OutputError<A> = [A] extends [never] ? never : OutputInvalid

/** What every run can fail with: its toolkit broke a limit, the model failed for good, it ran out of steps. */
export type RunFailure = Toolkit.ManifestError | LanguageModel.ModelFailure | MaxStepsExceeded | BudgetExceeded

/**
 * What a run of an agent made of the tools `T` (a union), the typed output `A` and the handoffs `H` (a union)
 * can fail with: it goes on as a handoff, so with its errors too.
 */
export type MadeErrors<T, A, H> = RunFailure | OutputError<A> | ApprovalError<T> | Exclude<AgentErrors<H>, RunIdInUse>

/** How a run checks its typed final output: the format asked of the model, the decoder, the retries. */
export interface OutputSpec {
  readonly format: LanguageModel.OutputFormat
  /** The decoded value of an answer, or every issue of it as text. */
  readonly decode: (text: string) => Either.Either<unknown, string>
  readonly retries: number
}

/**
 * An agent: tools, instructions and how to run them. `R` is what its tools' handlers need; `A` its typed output,
 * if any; `E` what its runs can fail with (`Agent.make` narrows it: `MadeErrors`).
 */
export interface Agent<R = never, A = never, E = AgentError> {
  readonly [TypeId]: { readonly _R: (_: never) => R; readonly _A: (_: never) => A; readonly _E: (_: never) => E }
  readonly name: string
  /** The tools offered to the model, built-ins included. */
  readonly tools: ReadonlyArray<Tool.Any>
  readonly instructions: string | undefined
  readonly toolExecution: ToolExecution
  readonly maxConcurrency: number | undefined
  readonly completion: Completion
  readonly maxSteps: number
  readonly approvalExpiry: Duration.Duration
  /** Its typed final output, when it has one. */
  readonly output: OutputSpec | undefined
  /** The agents it may hand the run over to, by the name of the tool that does it (`transfer_to_<name>`). */
  readonly handoffs: ReadonlyMap<string, () => Agent<any, any>>
  /** The budget of each of its runs, when it has one. */
  readonly budget?: Budget | undefined
  /** Its guardrails, when it has any. */
  readonly guardrails: Guardrail.Guardrails | undefined
  /** What a run of a session reads of its earlier turns, when given. */
  readonly history: Session.History | undefined
}

/** What a run of an agent gives: its record, and with a typed output the decoded `value`. */
export type Result<A> = [A] extends [never] ? RunResult : RunResult & { readonly value: A }

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
  usage: LanguageModel.Usage,
  /** What its turns cost in US dollars by the price table (`Cost`); absent when no turn's model has a price. */
  costUsd: Schema.optional(Schema.Number)
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

/**
 * A run stopped before a turn that would pass its budget: `limit` says which
 * (`tokens` or `costUsd`), `spent` what the run had used, `next` what the turn was estimated to take (the last
 * turn's, at least the request's size); `partial` is the run so far. No model call was cut.
 */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>("agent-tools/BudgetExceeded")("BudgetExceeded", {
  limit: Schema.Literal("tokens", "costUsd"),
  budget: Schema.Number,
  spent: Schema.Number,
  next: Schema.Number,
  step: Schema.Number,
  partial: RunResult
}) {
  override get message(): string {
    return `the run stopped before turn ${this.step}: its budget of ${this.budget} ${
      this.limit === "tokens" ? "tokens" : "US dollars"
    } (budget.${this.limit}) would be passed (spent ${this.spent}, the next turn estimated at ${this.next})`
  }
}

/**
 * The model's final answer did not decode with the agent's output Schema, `attempts` times in a row
 * (design: The model side): `errors` are the last answer's issues, `output` that answer.
 */
export class OutputInvalid extends Schema.TaggedError<OutputInvalid>("agent-tools/OutputInvalid")("OutputInvalid", {
  attempts: Schema.Number,
  errors: Schema.String,
  output: Schema.String
}) {
  override get message(): string {
    return `the model's final answer did not match the output schema after ${this.attempts} attempt(s): ${this.errors}`
  }
}

/** One hop from a run down to a call that waits for approval: the call of that run (a sub-agent's, or the call itself). */
export const ApprovalHop = Schema.Struct({
  runId: Schema.String,
  toolCallId: Schema.String,
  toolName: Schema.String
})
/** One hop from a run down to a call that waits for approval. */
export type ApprovalHop = typeof ApprovalHop.Type

/** A call a suspended run waits to have approved or denied (design: Durable runs). */
export const PendingApproval = Schema.Struct({
  /**
   * What `Agent.approve` / `Agent.deny` take, with the id of the run that suspended: the call's own id, or for a
   * call of a sub-agent the ids of the calls down to it, joined by `/` (`"call_1/call_7"`).
   */
  toolCallId: Schema.String,
  toolName: Schema.String,
  /** The decoded input, as JSON. */
  input: Schema.Unknown,
  /** Epoch milliseconds: no decision counts at or after it. */
  expiresAt: Schema.Number,
  /**
   * Where the call is in the tree of runs: the run that suspended, its sub-agent call, the child run, ..., the
   * call itself (one hop for a call of the run's own).
   */
  path: Schema.Array(ApprovalHop)
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
 * journal, it suspended for approvals or its given id was in use. Every such error: a run's own type is
 * narrower (`AgentErrors`, `RunError`): `OutputInvalid` only with an `output` Schema, `RunSuspended`
 * only with a tool that may need approval (or a handoff that may), `RunIdInUse` only given a `runId`.
 */
export type AgentError =
  | RunFailure
  | OutputInvalid
  | RunSuspended
  | RunIdInUse
  | Guardrail.GuardrailTripped
  | Session.SessionBusy

/** What `Agent.stream` reports, in order, as a run goes. */
export type AgentEvent = Data.TaggedEnum<{
  TurnStarted: { readonly step: number }
  /** A piece of the turn's text as the model writes it (a watched run streams its turns). */
  TextDelta: { readonly step: number; readonly text: string }
  /** A piece of the turn's reasoning (thinking) as the model writes it. */
  ReasoningDelta: { readonly step: number; readonly text: string }
  /** The turn's stream broke after some deltas: they are void, and the turn is asked again (`reason` says why). */
  TurnRetried: { readonly step: number; readonly reason: string }
  /**
   * The model the loop asked failed with a failure its fallback chain falls back on (`Model.fallback`): `to` is
   * asked next (`from`'s own retries are spent).
   */
  ModelFallback: { readonly step: number; readonly from: string; readonly to: string; readonly reason: string }
  /**
   * A turn answered (or replayed): the model that answered (`provider:model`), its tokens and, when the price
   * table prices it, its cost in US dollars (`Cost`).
   */
  TurnCompleted: {
    readonly step: number
    readonly model: string
    readonly usage: LanguageModel.Usage
    readonly costUsd: number | undefined
  }
  /** The turn's whole text, once the turn is complete. */
  Text: { readonly step: number; readonly text: string }
  ToolCallStarted: { readonly step: number; readonly id: string; readonly name: string; readonly input: unknown }
  ToolCallFinished: { readonly step: number; readonly call: ToolCallRecord }
  /** A journaled run goes on from its journal (design: Durable runs): its first `step` not journaled yet. */
  Resumed: { readonly runId: string; readonly step: number }
  /** A journaled model turn (`id` undefined) or call outcome (`id`) used instead of asking or running again. */
  Replayed: { readonly step: number; readonly id: string | undefined }
  /** The run stopped to wait for approvals; nothing follows (resume it once they are given). */
  Suspended: { readonly runId: string; readonly pending: ReadonlyArray<PendingApproval> }
  /** The run's end; with a typed output, `result` carries the decoded `value`. */
  Done: { readonly result: RunResult & { readonly value?: unknown } }
  /**
   * An event of a sub-agent's run (`Agent.asTool`), as it happens: the call of this run that runs it, the child
   * run's id, and the child's event (itself `SubAgent` for a grandchild's).
   */
  SubAgent: { readonly toolCallId: string; readonly toolName: string; readonly runId: string; readonly event: AgentEvent }
}>

/** Constructors and matchers of `AgentEvent`. */
export const AgentEvent = Data.taggedEnum<AgentEvent>()

/** Options of one run. */
export interface RunOptions {
  /**
   * With a `Journal`: the run's id, by which `Agent.resume` finds it (design: Durable runs). Default: a
   * new id from the id service (`RunSuspended` names it; so does `Agent.stream`'s `Resumed`).
   */
  readonly runId?: string | undefined
  /** This run's budget, over the agent's (`Options.budget`). */
  readonly budget?: Budget | undefined
  /**
   * The session the run goes on with (`Session`): its model reads the session's earlier turns, and the run, once
   * it ends, is the session's next turn. Needs a `Journal`; a run of a session held by another is `SessionBusy`.
   */
  readonly session?: string | undefined
  /**
   * The model this run asks (and the agents its tools run, `asTool`), instead of the `LanguageModel` in context,
   * which the run then does not need: a model made for one run (`LanguageModel.scripted`) given here costs the run
   * nothing, where `Effect.provideService` around it changes the context each of its calls' fibers joins back.
   */
  readonly model?: LanguageModel.LanguageModel["Type"] | undefined
}

/** The `LanguageModel` a run with options `O` needs in context: none when they give it its `model`. */
export type ModelRequirement<O> = O extends { readonly model: LanguageModel.LanguageModel["Type"] } ? never
  : LanguageModel.LanguageModel

/** What a host that journals runs itself (the platform's task runner) tells the loop. */
export interface HostOptions {
  /** The run's id in the journal in context, where the host wrote it first; it is resumed from there. */
  readonly runId: string
  /**
   * A call journaled as started without an outcome runs again whatever its tool: its executor
   * dedupes by (run id, call id) (the platform's serving processes), so a repeat has no second effect.
   */
  readonly rerunUnfinished: boolean
  /** The run as the host just read it from the journal (or wrote it, new): used as it is, not read again. */
  readonly known?: Journal.OpenRun | undefined
  /**
   * The session the task names (`Session`), given again when the host takes the task back: its model reads the
   * session's earlier turns, and the task, once it ends, is its next turn (kept before the host ends it).
   */
  readonly session?: string | undefined
}

/** Tells a run's observer each `AgentEvent`, synchronously and in order. */
export type Emit = (event: AgentEvent) => void

/**
 * How a run starts: new (a prompt, maybe its id; a host's task), or resumed from the journal. A sub-agent's run
 * shares its root's hook state (`shared`: a call budget counts the whole tree).
 */
export type Start =
  | {
    readonly prompt: string
    readonly runId?: string | undefined
    readonly host?: HostOptions | undefined
    readonly shared?: RunState | undefined
    readonly budget?: Budget | undefined
    readonly session?: string | undefined
    readonly model?: LanguageModel.LanguageModel["Type"] | undefined
  }
  | {
    readonly resume: string
    readonly shared?: RunState | undefined
    readonly budget?: Budget | undefined
    readonly model?: LanguageModel.LanguageModel["Type"] | undefined
  }
