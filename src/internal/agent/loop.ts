/**
 * The agent loop's outer part (design: The loop): a run's services read in one step, its toolkit checked once per
 * agent, its span, and the loop over model turns that the other parts (`modelTurn`, `turn`) serve.
 */
import { Context, Effect, Either, Exit, Option, Scope } from "effect"
import type { YieldWrap } from "effect/Utils"
import * as Builtins from "../../Builtins.js"
import * as Cost from "../../Cost.js"
import { Ids } from "../../Ids.js"
import * as Journal from "../../Journal.js"
import * as LanguageModel from "../../LanguageModel.js"
import { Timing } from "../../Timing.js"
import * as Toolkit from "../../Toolkit.js"
import * as Door from "../call/door.js"
import { CallScope } from "../call/scope.js"
import { modulesOf } from "../worker/types.js"
import { type TurnHook, TurnHooks } from "../hooks/turn.js"
import { budgeted, completed, overBudget } from "./budget.js"
import type { GuardrailTripped } from "../../Guardrail.js"
import * as Guards from "./guardrails.js"
import { ask } from "./modelTurn.js"
import { open } from "./open.js"
import { retryText } from "./output.js"
import { CurrentRun, Run, subAgentTools } from "./run.js"
import { holding, takeSession } from "./session.js"
import * as Metrics from "../util/metrics.js"
import { listening } from "../util/tracing.js"
import { execute, toMessage } from "./turn.js"
import {
  type Agent,
  type AgentError,
  AgentEvent,
  type Emit,
  MaxStepsExceeded,
  OutputInvalid,
  type RunResult,
  type Start,
  type ToolCallRecord,
  UnknownRun
} from "./types.js"

/** The run's span, `invoke_agent <name>`, when a tracer listens; nothing at all when none does. */
export const traced = <A, E, R>(agent: Agent<any, any>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) =>
    listening(fiber)
      ? Effect.withSpan(Effect.tapError(effect, (error) => Effect.annotateCurrentSpan("error.type", errorType(error))), `invoke_agent ${agent.name}`, {
        attributes: { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent.name },
        // A stack trace per span costs more than the rest of the span: the names say where.
        captureStackTrace: false
      })
      : effect)

/** OpenTelemetry's `error.type` of a failure: its tag, else its class's name. */
const errorType = (error: unknown): string =>
  typeof error === "object" && error !== null && typeof (error as { _tag?: unknown })._tag === "string"
    ? (error as { _tag: string })._tag
    : error instanceof Error ? error.name : "unknown"

const toolkits = new WeakMap<Agent<any, any>, Either.Either<Toolkit.Toolkit, Toolkit.ManifestError>>()

/** The agent's toolkit, checked (design: Limits) once, at its first run. */
const toolkitOf = (agent: Agent<any, any>): Effect.Effect<Toolkit.Toolkit, Toolkit.ManifestError> =>
  Effect.suspend(() => {
    let toolkit = toolkits.get(agent)
    if (toolkit === undefined) {
      toolkit = Toolkit.makeEither(agent.tools)
      toolkits.set(agent, toolkit)
    }
    return toolkit
  })

/**
 * The loop (design: The loop): open the run, then ask the model, run the calls it emits, feed the results back,
 * until it answers (or calls `task_complete`), suspends for approvals or runs out of steps.
 */
export const loop = (
  agent: Agent<any, any>,
  start: Start,
  emit: Emit | undefined
): Effect.Effect<RunResult, AgentError | UnknownRun, LanguageModel.LanguageModel> =>
  Effect.suspend(() => {
    // The run's Scope: the pools its door makes for worker tools (none provided) stop when the run ends. Made on
    // first use (the call's lazy Scope), and given to `prepare` alone, never to the whole run (`prepareIn`). None
    // for an agent without worker tools or handoffs: closing one costs a run 3 us (of 14).
    if (agent.handoffs.size === 0 && modulesOf(agent.tools).length === 0) return run(agent, start, emit, undefined)
    const scope = new CallScope()
    return Effect.onExit(run(agent, start, emit, scope), (exit) =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) => {
        const closed = scope.after(exit, runtime)
        return Exit.isExit(closed) ? Effect.void : Effect.asVoid(closed)
      }))
  })

/**
 * `door.prepare` in the run's `scope`, for a toolkit with worker tools only: providing a service changes the run
 * fiber's context, and each call's fiber joined back then diffs it (a run of 2 turns x 3 calls: 14 us became 26).
 */
const prepareIn = (
  door: Door.Dispatcher<any>,
  toolkit: Toolkit.Toolkit,
  scope: Scope.Scope | undefined
): Effect.Effect<void> =>
  modulesOf(toolkit.tools).length === 0 || scope === undefined
    ? Effect.void
    : Effect.provideService(door.prepare, Scope.Scope, scope)

/** The loop's run, in the run's Scope: `runBody`, one generator function for every run (design: Generators on hot paths). */
const run = (
  agent: Agent<any, any>,
  start: Start,
  emit: Emit | undefined,
  scope: Scope.Scope | undefined
): Effect.Effect<RunResult, AgentError | UnknownRun, LanguageModel.LanguageModel> =>
  Effect.gen(() => runBody(agent, start, emit, scope))

function* runBody(
  agent: Agent<any, any>,
  start: Start,
  emit: Emit | undefined,
  scope: Scope.Scope | undefined
): Generator<YieldWrap<Effect.Effect<any, AgentError | UnknownRun, LanguageModel.LanguageModel>>, RunResult> {
  const { journal, ...services } = yield* runServices(start.model)
  // The run's door (design: The call pipeline): its hook state (a sub-agent's, its root's), its outcomes joined
  // in flight, since a turn's calls start together (design: Per-run reuse).
  const toolkit = yield* toolkitOf(agent)
  const door = Door.make(toolkit, { state: start.shared, reuse: { joinInFlight: true } })
  // Tools on worker threads: their workers start before the first call, not in its time.
  yield* prepareIn(door, toolkit, scope)
  // Without a journal a run is new, and opening it costs nothing more than its id.
  const opened = journal !== undefined
    ? yield* open(agent, start, journal)
    : "resume" in start
    ? yield* new UnknownRun({ runId: start.resume })
    : { runId: start.runId ?? services.ids.make("run"), prompt: start.prompt, journaled: undefined, resumed: false }
  if ("ended" in opened) {
    // A typed output is decoded again from the stored answer: the journal keeps the text, not the value.
    const decoded = agent.output?.decode(opened.ended.output)
    const ended = decoded === undefined
      ? opened.ended
      : { ...opened.ended, value: yield* Effect.orDie(decoded) }
    emit?.(AgentEvent.Done({ result: ended }))
    return ended
  }
  const { model, policy, tracing, turnHooks } = services
  const { journaled, runId } = opened
  const state = new Run(
    runId,
    agent,
    door,
    model,
    policy.modelRetry,
    tracing,
    turnHooks,
    opened.prompt,
    emit,
    journaled
  )
  // The run's span (`invoke_agent`), on OpenTelemetry's GenAI conventions: the conversation is the run.
  if (tracing) {
    yield* Effect.annotateCurrentSpan({
      "gen_ai.conversation.id": runId,
      "gen_ai.provider.name": model.provider,
      "gen_ai.request.model": model.model,
      "agent_tools.resumed": opened.resumed
    })
  }
  state.modelGiven = start.model
  budgeted(state, start.budget ?? agent.budget, services.prices)
  state.exporting = services.exporting
  if (opened.resumed) yield* state.note(AgentEvent.Resumed({ runId, step: (journaled?.turns.length ?? 0) + 1 }))
  // A run of a session (a resumed one goes on holding it) reads the session's earlier turns first.
  const session = "resume" in start ? yield* journaled!.journal.sessions.heldBy(runId) : start.session ?? start.host?.session
  // A new run refused ends in the journal; a resumed one, or a host's (the host ends its own), stays.
  if (session !== undefined) yield* takeSession(state, session, "resume" in start || start.host !== undefined)
  const guards = agent.guardrails?.input === undefined ? undefined : yield* Guards.input(state, opened.prompt)
  // Delegated to, not an effect of its own: a run without a session costs no step more.
  if (state.session === undefined) return yield* turns(state, agent, emit, scope, guards)
  return yield* holding(state, state.session, Effect.gen(() => turns(state, agent, emit, scope, guards)))
}

/** The run's model turns, from the first: ask the model, run its calls, until it answers or runs out of steps. */
function* turns(
  state: Run,
  agent: Agent<any, any>,
  emit: Emit | undefined,
  scope: Scope.Scope | undefined,
  guards: Effect.Effect<void, GuardrailTripped> | undefined
): Generator<YieldWrap<Effect.Effect<any, AgentError, LanguageModel.LanguageModel>>, RunResult> {
  for (let step = 1; step <= agent.maxSteps; step++) {
    const over = overBudget(state, step)
    if (over !== undefined) return yield* over
    emit?.(AgentEvent.TurnStarted({ step }))
    // Input guardrails that run beside the first turn: its answer and its calls wait for them.
    const turn = yield* (step === 1 && guards !== undefined
      ? Effect.zipLeft(ask(state, step), guards, { concurrent: true })
      : ask(state, step))
    completed(state, step, turn)
    if (turn.text !== undefined && turn.text !== "") emit?.(AgentEvent.Text({ step, text: turn.text }))
    // Reasoning goes back with the turn, as the provider requires (design: The model side).
    const said: LanguageModel.Message = turn.reasoning === undefined
      ? { _tag: "AssistantMessage", text: turn.text, toolCalls: turn.toolCalls }
      : { _tag: "AssistantMessage", text: turn.text, toolCalls: turn.toolCalls, reasoning: turn.reasoning }
    // The agent that holds the run now: the one it started with, or the one a handoff gave it to.
    const holder = state.agent
    if (turn.toolCalls.length === 0) {
      if (holder.completion === "implicit") {
        const output = holder.output
        if (output === undefined) {
          const done = yield* answered(state, said, turn.text ?? "", step)
          if (done !== undefined) return done
          continue
        }
        const decoded = output.decode(turn.text ?? "")
        if (Either.isRight(decoded)) {
          const done = yield* answered(state, said, turn.text ?? "", step, decoded.right)
          if (done !== undefined) return done
          continue
        }
        // An answer that does not decode goes back with its issues, a bounded number of times.
        if (++state.invalidOutputs > output.retries) {
          return yield* new OutputInvalid({ attempts: state.invalidOutputs, errors: decoded.left, output: turn.text ?? "" })
        }
        state.messages = [...state.messages, said, { _tag: "UserMessage", text: retryText(decoded.left) }]
        continue
      }
      state.messages = [...state.messages, said, { _tag: "UserMessage", text: Builtins.reminder }]
      continue
    }
    const calls = execute(state, step, state.callsOf(step, turn.toolCalls))
    // A sub-agent's body finds the run it is called from (design: Agents that call agents).
    const records = yield* (hasSubAgents(state.toolkit) ? Effect.provideService(calls, CurrentRun, state) : calls)
    // Calls waiting for approval, here or in a sub-agent: their turn's other outcomes are journaled; the run stops here.
    if (state.waiting) return yield* state.suspend()
    state.records.push(...records)
    state.messages = [...state.messages, said, ...records.map(toMessage(state.toolkit, turn.toolCalls))]
    // Only an agent with handoffs pays for looking for one.
    if (holder.handoffs.size > 0 && (yield* handOver(state, holder, records, scope))) continue
    if (holder.completion === "explicit") {
      // A task_complete beside other calls ends the run once they have all finished (design: Built-ins).
      const complete = records.find((r) => r.name === Builtins.taskCompleteName && r.result.success)
      if (complete !== undefined) {
        const done = yield* answered(state, undefined, complete.result.value as string, step)
        if (done !== undefined) return done
      }
    }
  }
  return yield* new MaxStepsExceeded({ maxSteps: agent.maxSteps, partial: state.result("", agent.maxSteps) })
}

/**
 * The run's final answer `output`: checked by the output guardrails of the agent that holds the run, if it has any,
 * then the run's end. Undefined when a guardrail made with `onTrip: "retry"` tripped: the model reads why and goes on.
 */
const answered = (
  state: Run,
  said: LanguageModel.Message | undefined,
  output: string,
  step: number,
  value?: unknown
): Effect.Effect<RunResult | undefined, GuardrailTripped> =>
  state.agent.guardrails?.output === undefined
    ? state.finish(output, step, value)
    : Effect.flatMap(Guards.output(state, said, output), (passed) => passed ? state.finish(output, step, value) : Effect.sync(() => undefined))

/**
 * A handoff (design: Agents that call agents): when the model called a `transfer_to_<name>` tool of the agent
 * that holds the run, the run goes on as that agent. Replayed from the journal the same way, so a resume goes
 * on with the agent that held the run.
 */
const handOver = (state: Run, holder: Agent<any, any>, records: ReadonlyArray<ToolCallRecord>, scope: Scope.Scope | undefined) =>
  Effect.gen(function*() {
    const handoff = records.find((r) => r.result.success && holder.handoffs.has(r.name))
    if (handoff === undefined) return false
    const next = holder.handoffs.get(handoff.name)!()
    state.agent = next
    const toolkit = yield* toolkitOf(next)
    state.door = state.door.over(toolkit)
    yield* prepareIn(state.door, toolkit, scope)
    return true
  })

const withSubAgents = new WeakMap<Toolkit.Toolkit, boolean>()

/** Whether a toolkit has a tool that runs an agent (`Agent.asTool`). */
const hasSubAgents = (toolkit: Toolkit.Toolkit): boolean => {
  let known = withSubAgents.get(toolkit)
  if (known === undefined) {
    known = toolkit.tools.some((tool) => subAgentTools.has(tool))
    withSubAgents.set(toolkit, known)
  }
  return known
}

const noModel = "the run has no model: provide a LanguageModel (a provider's layer, LanguageModel.layerScripted) " +
  "or give it one in the run's options (Agent.run(agent, prompt, { model }))"

/**
 * What a run reads from its fiber, in one step rather than one a service (a run's start is on the hot path); its
 * model the one `given` (`RunOptions.model`), else the context's.
 */
const runServices = (given: LanguageModel.LanguageModel["Type"] | undefined) =>
  Effect.withFiberRuntime<{
  readonly journal: Journal.Journal["Type"] | undefined
  readonly ids: Ids["Type"]
  readonly model: LanguageModel.LanguageModel["Type"]
  readonly policy: Timing["Type"]
  readonly tracing: boolean
  readonly turnHooks: ReadonlyArray<TurnHook>
  readonly prices: Cost.Prices
  readonly exporting: boolean
}, never, LanguageModel.LanguageModel>((fiber) => {
  const context = fiber.currentContext as Context.Context<LanguageModel.LanguageModel>
  const model = given ?? Option.getOrUndefined(Context.getOption(context, LanguageModel.LanguageModel))
  if (model === undefined) return Effect.dieMessage(noModel)
  return Effect.succeed({
    journal: Option.getOrUndefined(Context.getOption(context, Journal.Journal)),
    ids: Context.get(context, Ids),
    model,
    policy: Context.get(context, Timing),
    tracing: listening(fiber),
    turnHooks: Context.get(context, TurnHooks),
    prices: Context.get(context, Cost.PriceTable),
    exporting: Context.get(context, Metrics.Exporting)
  })
})
