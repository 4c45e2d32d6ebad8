/**
 * The state of one run (design: The loop, Per-run reuse): its messages, records, usage, the outcomes it reuses, the
 * approvals its turn waits for; how it ends (finished, suspended) and how it tells of durable-run events.
 * The parts of the loop (`modelTurn`, `turn`, `replay`, `approvals`) work on it.
 */
import { Clock, Context, Effect, Option, Schema } from "effect"
import * as Cost from "../../Cost.js"
import type * as Journal from "../../Journal.js"
import * as LanguageModel from "../../LanguageModel.js"
import type { Timing } from "../../Timing.js"
import type * as Toolkit from "../../Toolkit.js"
import { ToolResult } from "../../ToolResult.js"
import type { Door } from "../call/door.js"
import type { TurnHook } from "../hooks/turn.js"
import { type Journaled, RunResultJson } from "./open.js"
import {
  type Agent,
  AgentEvent,
  type Budget,
  type Emit,
  type OutputSpec,
  type PendingApproval,
  type RunResult,
  RunSuspended,
  type ToolCallRecord
} from "./types.js"

/** A turn's or a run's tokens and cost as span attributes: OpenTelemetry's `gen_ai.usage.*`, and `agent_tools.usage.cost`. */
export const usageAttributes = (usage: LanguageModel.Usage, costUsd: number | undefined): Record<string, unknown> => ({
  "gen_ai.usage.input_tokens": usage.inputTokens,
  "gen_ai.usage.output_tokens": usage.outputTokens,
  ...(usage.cacheReadTokens === undefined ? {} : { "gen_ai.usage.cache_read.input_tokens": usage.cacheReadTokens }),
  ...(usage.cacheWriteTokens === undefined ? {} : { "gen_ai.usage.cache_creation.input_tokens": usage.cacheWriteTokens }),
  ...(costUsd === undefined ? {} : { "agent_tools.usage.cost": costUsd })
})

/** The result of a call waiting for approval: never recorded, never shown to the model. */
export const awaitingApproval = ToolResult.failure("awaiting approval")

/**
 * The run whose turn is making its calls, while the agent has sub-agents (design: Agents that call agents): a
 * sub-agent's body reads it to link its child run (the root's hook state) and to tell it of approvals the child
 * waits for.
 */
export class CurrentRun extends Context.Tag("agent-tools/Agent/CurrentRun")<CurrentRun, Run>() {}

/** The tools that run an agent (`Agent.asTool`): taken up again on resume, they go on with their child run. */
export const subAgentTools = new WeakSet<object>()

/**
 * The approvals a child run waits for, as its parent lists them: each under `hop`, the parent's call that runs
 * the child (its id `<call id>/<child's id>`, its path one hop longer).
 */
export const nestedUnder = (
  hop: { readonly runId: string; readonly toolCallId: string; readonly toolName: string },
  pending: ReadonlyArray<PendingApproval>
): Array<PendingApproval> =>
  pending.map((p) => ({ ...p, toolCallId: `${hop.toolCallId}/${p.toolCallId}`, path: [hop, ...p.path] }))

/** A run's hold on its session (`Session.ts`): the session, and how many of the run's first messages are its history. */
export interface SessionHold {
  readonly session: string
  readonly history: number
}

/**
 * The state of one run: its messages, records, usage, and its door (design: The call pipeline), which holds its hook
 * state and its outcomes (design: Per-run reuse), owned by the run.
 */
export class Run {
  messages: ReadonlyArray<LanguageModel.Message>
  /** The agent that holds the run: the one it started with, or the one a handoff gave it to. */
  agent: Agent<any, any>
  /**
   * The run's door over the toolkit of the agent that holds it (`over` another at a handoff): its calls start there,
   * with the run's hook state (a sub-agent's run shares its root's: a budget counts every call of the tree) and its
   * outcomes of idempotent tools, joined in flight (design: Per-run reuse).
   */
  door: Door
  readonly records: Array<ToolCallRecord> = []
  readonly usage: { -readonly [K in keyof LanguageModel.Usage]: LanguageModel.Usage[K] } = { inputTokens: 0, outputTokens: 0 }
  /** What its turns cost in US dollars: undefined until a turn's model has a price. */
  costUsd: number | undefined = undefined
  /** The last turn's tokens and cost: the estimate of the next turn's, for the budget (`budget.ts`). */
  last = { tokens: 0, costUsd: 0 }
  /** Its budget (the run's, else its agent's) and the price table in force. */
  budget: Budget | undefined = undefined
  prices: Cost.Prices = Cost.defaults
  /** Whether a telemetry layer exports metrics (`Metrics.Exporting`), read once at the run's start. */
  exporting = false
  /** The session it holds, for a run of one: it keeps its messages there when it ends. */
  session: SessionHold | undefined = undefined
  /** Final answers in a row that did not decode with the agent's output Schema. */
  invalidOutputs = 0
  /** The ids of the run's calls so far (`callsOf`): a call's id is unique within its run. */
  private readonly callIds = new Set<string>()
  /** How many calls of a turn may run at once: 1 when sequential. */
  readonly limit: number
  /** The approvals this turn's calls wait for (design: Durable runs): the run suspends after the turn. */
  readonly pending: Array<Omit<Journal.Approval, "decision" | "reason">> = []
  /**
   * The approvals this turn's sub-agent calls wait for, in their child runs (journaled there): by the call, the
   * child's pending approvals. The run suspends after the turn too, and its `RunSuspended` lists them.
   */
  readonly nested = new Map<string, { readonly toolName: string; readonly pending: ReadonlyArray<PendingApproval> }>()

  constructor(
    /** The run's id: the task id its tool calls carry (per-run budgets and logs key on it). */
    readonly runId: string,
    agent: Agent<any, any>,
    door: Door,
    readonly model: LanguageModel.LanguageModel["Type"],
    readonly modelRetry: Timing["Type"]["modelRetry"],
    readonly tracing: boolean,
    readonly turnHooks: ReadonlyArray<TurnHook>,
    prompt: string,
    readonly emit: Emit | undefined,
    /** Its journal, when it has one (design: Durable runs). */
    readonly journaled: Journaled | undefined
  ) {
    this.agent = agent
    this.door = door
    this.messages = [{ _tag: "UserMessage", text: prompt }]
    this.limit = agent.toolExecution === "sequential" ? 1 : agent.maxConcurrency ?? Infinity
  }

  private label: string | undefined = undefined

  /** The model given to the run (`RunOptions.model`), which the agents its tools run ask too; else undefined. */
  modelGiven: LanguageModel.LanguageModel["Type"] | undefined = undefined

  /** The run's model as a turn and the price table name it (`LanguageModel.labelOf`), made once a run. */
  get modelLabel(): string {
    return this.label ??= LanguageModel.labelOf(this.model)
  }

  /** The toolkit of the agent that holds the run. */
  get toolkit(): Toolkit.Toolkit {
    return this.door.toolkit
  }

  /** The typed final output asked of the model, when the agent has one. */
  get output(): OutputSpec | undefined {
    return this.agent.output
  }

  /** Adds a turn's tokens to the run's; the cache's counts appear once a turn has them. */
  count(usage: LanguageModel.Usage): void {
    this.usage.inputTokens += usage.inputTokens
    this.usage.outputTokens += usage.outputTokens
    if (usage.cacheReadTokens !== undefined) this.usage.cacheReadTokens = (this.usage.cacheReadTokens ?? 0) + usage.cacheReadTokens
    if (usage.cacheWriteTokens !== undefined) {
      this.usage.cacheWriteTokens = (this.usage.cacheWriteTokens ?? 0) + usage.cacheWriteTokens
    }
  }

  /**
   * The calls of turn `step` under ids unique within the run (design: The loop): the provider's id while the run
   * has not used it, else `<id>~<step>` (`~<step>.<n>` for a repeat within the turn). The id keys the call's dedupe,
   * journal rows, delivery, approval and child run; the model reads back its own id (`toMessage`). A resumed run
   * replays its turns in order, so its calls get the same ids again.
   */
  callsOf(step: number, calls: ReadonlyArray<LanguageModel.ToolCall>): ReadonlyArray<LanguageModel.ToolCall> {
    let renamed: Array<LanguageModel.ToolCall> | undefined
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!
      let id = call.id
      if (this.callIds.has(id)) {
        id = `${call.id}~${step}`
        for (let n = 2; this.callIds.has(id); n++) id = `${call.id}~${step}.${n}`
        renamed ??= calls.slice()
        renamed[i] = { ...call, id }
      }
      this.callIds.add(id)
    }
    return renamed ?? calls
  }

  result(output: string, steps: number): RunResult {
    const result = { output, steps, toolCalls: this.records, usage: this.usage }
    return this.costUsd === undefined ? result : { ...result, costUsd: this.costUsd }
  }

  /**
   * Ends the run with `output`: journaled first (unless its host ends it), then `Done`. A typed
   * output's decoded `value` is added to the result after the journal's record (which keeps the text).
   */
  finish(output: string, steps: number, value?: unknown): Effect.Effect<RunResult> {
    const record = this.result(output, steps)
    const result = this.agent.output === undefined ? record : { ...record, value }
    const told = Effect.sync(() => {
      this.emit?.(AgentEvent.Done({ result }))
      return result
    })
    const done = this.tracing ? Effect.zipRight(Effect.annotateCurrentSpan(usageAttributes(this.usage, this.costUsd)), told) : told
    const journaled = this.journaled
    if (journaled === undefined) return done
    const ended = journaled.hostEnds ? done : Effect.zipRight(
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => journaled.journal.ended(this.runId, { result: Schema.encodeSync(RunResultJson)(record) }, now)
      ),
      done
    )
    // A run of a session is its next turn, kept before the run ends in the journal (a resume keeps it once).
    const session = this.session
    return session === undefined
      ? ended
      : Effect.zipRight(journaled.journal.sessions.keep(session.session, this.runId, this.kept(session, output)), ended)
  }

  /** What a run of a session keeps as the session's turn: its messages after the history, its answer last. */
  private kept(session: SessionHold, output: string): ReadonlyArray<LanguageModel.Message> {
    const own = this.messages.slice(session.history)
    // An implicit run's answer is its last turn, which the loop does not add to its messages.
    return this.agent.completion === "implicit" ? [...own, { _tag: "AssistantMessage", text: output, toolCalls: [] }] : own
  }

  /** Whether the turn's calls wait for approvals, here or in a sub-agent's run. */
  get waiting(): boolean {
    return this.pending.length > 0 || this.nested.size > 0
  }

  /**
   * Suspends the run on the approvals its last turn asked for: journaled, then `Suspended`, then `RunSuspended`,
   * which lists its own calls' and, a hop further down each, its sub-agents' (journaled in their runs).
   */
  suspend(): Effect.Effect<never, RunSuspended> {
    const pending: Array<PendingApproval> = this.pending.map((p) => ({
      toolCallId: p.toolCallId,
      toolName: p.toolName,
      input: JSON.parse(p.input) as unknown,
      expiresAt: p.expiresAt,
      path: [{ runId: this.runId, toolCallId: p.toolCallId, toolName: p.toolName }]
    }))

    for (const [toolCallId, { pending: below, toolName }] of this.nested) {
      pending.push(...nestedUnder({ runId: this.runId, toolCallId, toolName }, below))
    }
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
}
