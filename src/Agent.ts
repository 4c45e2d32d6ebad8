/**
 * The agent loop (design: Per-run reuse, Calls in a turn, The loop, Built-ins): ask the model, run the tools it calls through `Invocation`,
 * feed the results back, repeat until it answers (or calls `task_complete`). This module is its public
 * face; the loop's parts are in `internal/agent/`: the loop (`loop.ts`), a model turn (`modelTurn.ts`),
 * a turn's calls (`turn.ts`, `call.ts`), journaled replay (`replay.ts`, `journaledCall.ts`, `open.ts`),
 * approvals (`approvals.ts`), a run's state (`run.ts`) and its data (`types.ts`).
 */
import { Cause, Clock, Duration, Effect, type Layer, Mailbox, Option, type Schema, Stream } from "effect"
import * as Builtins from "./Builtins.js"
import { loop, traced } from "./internal/agent/loop.js"
import { outputSpec } from "./internal/agent/output.js"
import * as SubAgent from "./internal/agent/subAgent.js"
import {
  type Agent,
  type AgentError,
  AgentEvent,
  type AgentRequirements,
  type Handoff,
  type HostOptions,
  NoPendingApproval,
  type Options,
  type Result,
  type RunOptions,
  type Start,
  TypeId,
  UnknownRun
} from "./internal/agent/types.js"
import * as Journal from "./Journal.js"
import type * as LanguageModel from "./LanguageModel.js"
import type * as Tool from "./Tool.js"
import type { CallServices } from "./ToolContext.js"

export type { AsToolOptions } from "./internal/agent/subAgent.js"
export {
  type Agent,
  type AgentError,
  AgentEvent,
  type AgentRequirements,
  ApprovalHop,
  type Completion,
  type Handoff,
  type HostOptions,
  MaxStepsExceeded,
  NoPendingApproval,
  type Options,
  OutputInvalid,
  PendingApproval,
  type Result,
  RunIdInUse,
  type RunOptions,
  RunResult,
  RunSuspended,
  ToolCallRecord,
  type ToolExecution,
  TypeId,
  UnknownRun
} from "./internal/agent/types.js"

/**
 * Makes an agent. Synchronous: the toolkit's limits check runs at the first `Agent.run`. An `output`
 * Schema that JSON Schema cannot express throws here, naming the rule it breaks.
 */
export const make = <
  const Tools extends ReadonlyArray<Tool.Any>,
  A = never,
  const Handoffs extends ReadonlyArray<Handoff> = ReadonlyArray<Agent<never, any>>
>(
  options: Options<Tools, A, Handoffs>
): Agent<Tool.Requirements<Tools[number]> | AgentRequirements<Handoffs[number]>, A> => {
  const completion = options.completion ?? "implicit"
  const given = (options.handoffs ?? []).map(SubAgent.handoffOf)
  const handoffs = new Map(given.map(({ agent, tool }) => [tool.name, agent] as const))
  const transfers = given.map(({ tool }) => tool)
  const tools = completion === "explicit" ? [...options.tools, Builtins.taskComplete, Builtins.askUser] : options.tools
  return {
    [TypeId]: { _R: (_: never) => _, _A: (_: never) => _ },
    name: options.name ?? "agent",
    tools: transfers.length === 0 ? tools : [...tools, ...transfers],
    handoffs,
    instructions: options.instructions,
    toolExecution: options.toolExecution ?? "concurrent",
    maxConcurrency: options.maxConcurrency,
    completion,
    maxSteps: options.maxSteps ?? 20,
    approvalExpiry: Duration.decode(options.approvalExpiry ?? Duration.hours(24)),
    output: options.output === undefined ? undefined : outputSpec(options.output, options.outputRetries ?? 2)
  }
}

/**
 * Runs the agent on `prompt` until the model is done. Tool failures, unknown tools and malformed
 * arguments go back to the model as error results; the run fails only with an `AgentError`. With a
 * `Journal` in context the run is journaled as it goes (design: Durable runs), so that
 * `Agent.resume` can take it up in any process with the same store.
 */
export const run = <R, A = never>(
  agent: Agent<R, A>,
  prompt: string,
  options?: RunOptions
): Effect.Effect<Result<A>, AgentError, LanguageModel.LanguageModel | Exclude<R, CallServices>> =>
  // Only a resume can name a run the journal does not have.
  traced(agent, loop(agent, { prompt, runId: options?.runId }, undefined)) as Effect.Effect<
    Result<A>,
    AgentError,
    LanguageModel.LanguageModel
  >

/**
 * Goes on with the journaled run `runId` (design: Durable runs), in this process or any other with
 * the same store: its journaled turns are replayed, not asked again; its journaled outcomes are
 * reused (the per-run reuse of idempotent tools too); a call journaled as started without an
 * outcome runs again if its tool is not idempotent, and reads "outcome unknown" if it is. A run
 * that had ended answers its stored result.
 */
export const resume = <R, A = never>(
  agent: Agent<R, A>,
  runId: string
): Effect.Effect<
  Result<A>,
  AgentError | UnknownRun,
  LanguageModel.LanguageModel | Journal.Journal | Exclude<R, CallServices>
> => traced(agent, loop(agent, { resume: runId }, undefined)) as Effect.Effect<Result<A>, AgentError | UnknownRun>

/**
 * The same run as a stream of `AgentEvent`s, ending with `Done` (or the run's error); a run that
 * suspends for approvals ends with `Suspended`. `resume` streams a resumed run the same way.
 */
export const stream = <R, A = never>(
  agent: Agent<R, A>,
  prompt: string,
  options?: RunOptions & { readonly resume?: boolean | undefined }
): Stream.Stream<AgentEvent, AgentError | UnknownRun, LanguageModel.LanguageModel | Exclude<R, CallServices>> =>
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

/**
 * The run of `Agent.run`, telling `onEvent` each `AgentEvent` as it happens, synchronously and in
 * order: for hosts that forward events themselves (the platform's task runner) without a stream.
 * With `host`, the run is the host's journaled one (a task), ended in the journal by the host.
 */
export const runWithEvents = <R, A = never>(
  agent: Agent<R, A>,
  prompt: string,
  onEvent: (event: AgentEvent) => void,
  host?: HostOptions
): Effect.Effect<Result<A>, AgentError, LanguageModel.LanguageModel | Exclude<R, CallServices>> =>
  traced(
    agent,
    loop(agent, host === undefined ? { prompt } : { prompt, runId: host.runId, host }, onEvent) as Effect.Effect<
      Result<A>,
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
