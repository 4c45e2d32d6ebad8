/**
 * The agent loop (design: Per-run reuse, Calls in a turn, The loop, Built-ins): ask the model, run the tools it calls through `Invocation`,
 * feed the results back, repeat until it answers (or calls `task_complete`). This module is its public
 * face; the loop's parts are in `internal/agent/`: the loop (`loop.ts`), a model turn (`modelTurn.ts`),
 * a turn's calls (`turn.ts`, `call.ts`), journaled replay (`replay.ts`, `journaledCall.ts`, `open.ts`),
 * approvals (`approvals.ts`), a run's state (`run.ts`) and its data (`types.ts`).
 */
import { Cause, Clock, Duration, Effect, type Layer, Mailbox, Option, type Schema, type Scope, Stream } from "effect"
import * as Builtins from "./Builtins.js"
import type * as Guardrail from "./Guardrail.js"
import { loop, traced } from "./internal/agent/loop.js"
import { outputSpec } from "./internal/agent/output.js"
import * as SubAgent from "./internal/agent/subAgent.js"
import {
  type Agent,
  type AgentError,
  AgentEvent,
  type AgentRequirements,
  type GuardrailError,
  type Handoff,
  type HostOptions,
  type MadeErrors,
  type ModelRequirement,
  NoPendingApproval,
  type Options,
  type Result,
  type RunIdError,
  type RunIdInUse,
  type RunOptions,
  type RunSuspended,
  type SessionError,
  type SessionRequirement,
  type Start,
  TypeId,
  UnknownRun
} from "./internal/agent/types.js"
import * as Journal from "./Journal.js"
import type * as LanguageModel from "./LanguageModel.js"
import type * as Session from "./Session.js"
import type * as Tool from "./Tool.js"
import type { CallServices } from "./ToolContext.js"

export type { AsToolOptions } from "./internal/agent/subAgent.js"
export {
  type Agent,
  type AgentError,
  type AgentErrors,
  AgentEvent,
  type AgentRequirements,
  type ApprovalError,
  ApprovalHop,
  type GuardrailError,
  type Completion,
  type Handoff,
  type HostOptions,
  type MadeErrors,
  MaxStepsExceeded,
  NoPendingApproval,
  type Options,
  type OutputError,
  OutputInvalid,
  PendingApproval,
  type ModelRequirement,
  type Result,
  type RunError,
  type RunFailure,
  type RunIdError,
  RunIdInUse,
  type RunOptions,
  RunResult,
  RunSuspended,
  type SessionError,
  type SessionRequirement,
  ToolCallRecord,
  type ToolExecution,
  TypeId,
  UnknownRun
} from "./internal/agent/types.js"
export { type Budget, BudgetExceeded } from "./internal/agent/types.js"

/**
 * Makes an agent of `tools`, a `toolkit`, or both (the toolkit's tools first). Synchronous: the limits
 * check of its tools runs at the first `Agent.run`. An `output` Schema that JSON Schema cannot express
 * throws here, naming the rule it breaks. `R` is what the tools' handlers need (a toolkit's own `R`);
 * `E` what its runs can fail with (`MadeErrors`).
 */
export const make = <
  const Tools extends ReadonlyArray<Tool.Any> = readonly [],
  A = never,
  const Handoffs extends ReadonlyArray<Handoff> = readonly [],
  RK = never,
  KTools extends ReadonlyArray<Tool.Any> = readonly [],
  G extends Guardrail.Guardrails | undefined = undefined
>(
  options: Options<Tools, A, Handoffs, RK, KTools> & { readonly guardrails?: G }
): Agent<
  Tool.Requirements<Tools[number]> | RK | AgentRequirements<Handoffs[number]>,
  A,
  MadeErrors<Tools[number] | KTools[number], A, Handoffs[number]> | GuardrailError<G>
> => {
  const completion = options.completion ?? "implicit"
  const given = (options.handoffs ?? []).map(SubAgent.handoffOf)
  const handoffs = new Map(given.map(({ agent, tool }) => [tool.name, agent] as const))
  const transfers = given.map(({ tool }) => tool)
  const own: ReadonlyArray<Tool.Any> = options.toolkit === undefined
    ? options.tools ?? []
    : [...options.toolkit.tools, ...options.tools ?? []]
  const tools = completion === "explicit" ? [...own, Builtins.taskComplete, Builtins.askUser] : own
  return {
    [TypeId]: { _R: (_: never) => _, _A: (_: never) => _, _E: (_: never) => _ },
    name: options.name ?? "agent",
    tools: transfers.length === 0 ? tools : [...tools, ...transfers],
    handoffs,
    instructions: options.instructions,
    toolExecution: options.toolExecution ?? "concurrent",
    maxConcurrency: options.maxConcurrency,
    completion,
    maxSteps: options.maxSteps ?? 20,
    approvalExpiry: Duration.decode(options.approvalExpiry ?? Duration.hours(24)),
    output: options.output === undefined ? undefined : outputSpec(options.output, options.outputRetries ?? 2),
    ...(options.budget === undefined ? {} : { budget: options.budget }),
    guardrails: options.guardrails,
    history: options.history
  }
}

/**
 * Runs the agent on `prompt` until the model is done. Tool failures, unknown tools and malformed
 * arguments go back to the model as error results; the run fails only with an `AgentError`. With a
 * `Journal` in context the run is journaled as it goes (design: Durable runs), so that
 * `Agent.resume` can take it up in any process with the same store.
 */
export const run = <R, A = never, E extends AgentError = AgentError, const O extends RunOptions = {}>(
  agent: Agent<R, A, E>,
  prompt: string,
  options?: O
): Effect.Effect<
    Result<A>,
  E | RunIdError<O> | SessionError<O>,
  ModelRequirement<O> | Exclude<R, CallServices> | SessionRequirement<O>
> =>
  // Only a resume can name a run the journal does not have.
  traced(
    agent,
    loop(agent, { prompt, runId: options?.runId, budget: options?.budget, session: options?.session, model: options?.model }, undefined)
    // Its model is the options' or the context's (`ModelRequirement`).
  ) as Effect.Effect<Result<A>, E | RunIdError<O> | SessionError<O>, ModelRequirement<O>>

/**
 * Goes on with the journaled run `runId` (design: Durable runs), in this process or any other with
 * the same store: its journaled turns are replayed, not asked again; its journaled outcomes are
 * reused (the per-run reuse of idempotent tools too); a call journaled as started without an
 * outcome runs again if its tool is not idempotent, and reads "outcome unknown" if it is. A run
 * that had ended answers its stored result.
 */
export const resume = <R, A = never, E extends AgentError = AgentError>(
  agent: Agent<R, A, E>,
  runId: string
): Effect.Effect<
  Result<A>,
  Exclude<E, RunIdInUse> | UnknownRun | Session.SessionBusy,
  LanguageModel.LanguageModel | Journal.Journal | Exclude<R, CallServices>
> =>
  traced(agent, loop(agent, { resume: runId }, undefined)) as Effect.Effect<
    Result<A>,
    Exclude<E, RunIdInUse> | UnknownRun | Session.SessionBusy
  >

/**
 * What `Agent.stream` of an agent whose runs fail with `E`, with options `O`, fails with: never `RunSuspended`
 * (the stream ends with `Suspended`); `UnknownRun` only with `resume`, `RunIdInUse` only given a `runId`.
 */
export type StreamError<E, O> =
  | Exclude<E, RunSuspended | RunIdInUse>
  | (O extends { readonly resume?: false | undefined } ? RunIdError<O> : UnknownRun | RunIdError<O>)
  | SessionError<O>

/**
 * The same run as a stream of `AgentEvent`s, ending with `Done` (or the run's error); a run that
 * suspends for approvals ends with `Suspended`. `resume` streams a resumed run the same way.
 */
export const stream = <
  R,
  A = never,
  E extends AgentError = AgentError,
  const O extends RunOptions & { readonly resume?: boolean | undefined } = {}
>(
  agent: Agent<R, A, E>,
  prompt: string,
  options?: O
): Stream.Stream<
  AgentEvent,
  StreamError<E, O>,
  ModelRequirement<O> | Exclude<R, CallServices> | SessionRequirement<O>
> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const mailbox = yield* Mailbox.make<AgentEvent, AgentError | UnknownRun>()
    const start: Start = options?.resume === true && options.runId !== undefined
      ? { resume: options.runId, budget: options.budget, model: options.model }
      : { prompt, runId: options?.runId, budget: options?.budget, session: options?.session, model: options?.model }
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
    return Mailbox.toStream(mailbox) as Stream.Stream<AgentEvent, StreamError<E, O>>
  }) as Effect.Effect<Stream.Stream<AgentEvent, StreamError<E, O>>, never, ModelRequirement<O> | Scope.Scope>)

/**
 * The run of `Agent.run`, telling `onEvent` each `AgentEvent` as it happens, synchronously and in
 * order: for hosts that forward events themselves (the platform's task runner) without a stream.
 * With `host`, the run is the host's journaled one (a task), ended in the journal by the host.
 */
export const runWithEvents = <R, A = never, E extends AgentError = AgentError, const H extends HostOptions | undefined = undefined>(
  agent: Agent<R, A, E>,
  prompt: string,
  onEvent: (event: AgentEvent) => void,
  host?: H
): Effect.Effect<Result<A>, Exclude<E, RunIdInUse> | SessionError<H>, LanguageModel.LanguageModel | Exclude<R, CallServices>> =>
  // A host's run is the one it wrote in the journal; without a host the run has a new id: never RunIdInUse.
  traced(
    agent,
    loop(agent, host === undefined ? { prompt } : { prompt, runId: host.runId, host }, onEvent) as Effect.Effect<
      Result<A>,
      Exclude<E, RunIdInUse> | SessionError<H>,
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
    const decision = { approved, reason, now }
    // A call of a sub-agent: the ids of the calls down to it, the last one the call's own in the child run.
    const below = toolCallId.lastIndexOf("/")
    const decided = (yield* journal.decide(runId, toolCallId, decision)) ||
      below > 0 && (yield* journal.decide(SubAgent.childRunId(runId, toolCallId.slice(0, below)), toolCallId.slice(below + 1), decision))
    if (!decided) return yield* new NoPendingApproval({ runId, toolCallId })
    yield* Effect.logInfo(`run ${runId}: call ${toolCallId} ${approved ? "approved" : "denied"}`)
  })

/**
 * An agent as a tool of another (design: Agents that call agents): the calling model gives it a prompt (or
 * `input`), and its run is a child of the calling run, in the same journal, under the id
 * `<parent run id>/<call id>`; its output (its typed `value`, with an `output` Schema) is the call's result, its
 * failure the call's error. The call's timeout bounds the child run; a call budget of the root counts the child's
 * calls. A call in the child that needs approval suspends the whole tree: the root's `RunSuspended` lists it
 * with its path, `Agent.approve(rootRunId, "<call id>/<child call id>")` decides exactly that call, and
 * `Agent.resume` on the root goes on with the child where it stopped.
 */
export const asTool: <R, A, I extends Schema.Struct.Fields | Schema.Schema<any, any, never> = {
  readonly prompt: typeof Schema.String
}>(
  agent: Agent<R, A>,
  options: SubAgent.AsToolOptions<I>
) => Tool.Tool<string, Tool.InputOf<I>, unknown, AgentError | UnknownRun, R | LanguageModel.LanguageModel> = SubAgent.asTool

/** For callers outside Effect: runs the agent with `layer` providing the model and the tools' services. */
export const runPromise = <R, E, A = never>(
  agent: Agent<R, A>,
  prompt: string,
  layer: Layer.Layer<LanguageModel.LanguageModel | Exclude<R, CallServices>, E>
): Promise<Result<A>> => Effect.runPromise(Effect.provide(run(agent, prompt), layer))
