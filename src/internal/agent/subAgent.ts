/**
 * Agents that call agents (design: Agents that call agents): an agent as a tool of another, its run a child of
 * the calling run (its id the parent's id and the call's, its journal the parent's, its hook state the root's),
 * and the handoff tools that give a run to another agent.
 */
import { Effect, Option, Schema } from "effect"
import * as Journal from "../../Journal.js"
import type * as LanguageModel from "../../LanguageModel.js"
import * as Tool from "../../Tool.js"
import type { Call } from "../../ToolContext.js"
import { loop, traced } from "./loop.js"
import { CurrentRun, subAgentTools } from "./run.js"
import {
  type Agent,
  type AgentError,
  AgentEvent,
  type Handoff,
  type PendingApproval,
  type Start,
  type UnknownRun
} from "./types.js"

/** Options of `Agent.asTool`. */
export interface AsToolOptions<I> {
  /** The tool's name, as the calling model sees it. */
  readonly name: string
  /** What the agent does and when to call it: the calling model reads this. */
  readonly description: string
  /**
   * The input the calling model gives: a `Schema.Struct` or its fields. Default `{ prompt: string }`, the
   * prompt of the child run; any other input reaches the child as its JSON.
   */
  readonly input?: I | undefined
  /** How long the child run may take, from the call's start (at most 3600 s). Default 10 minutes. */
  readonly timeout?: import("effect").Duration.DurationInput | undefined
  /** The same input may reuse an earlier outcome of the run (design: Per-run reuse). Default false. */
  readonly idempotent?: boolean | undefined
}

/** The default input of a sub-agent's tool: the prompt of its run. */
const promptInput = {
  prompt: Schema.String.annotations({ description: "What to ask the agent, in full: it sees nothing else." })
}

/** The id of the child run of call `toolCallId` of run `runId`: found again on resume, in any process. */
export const childRunId = (runId: string, toolCallId: string): string => `${runId}/${toolCallId}`

/**
 * A tool that runs `agent`: its prompt from the input, its output (the typed `value` when the agent has one)
 * the call's result, its failure the call's error. The child run is the parent's: journaled in the parent's
 * journal under `childRunId`, resumed from there when the call is taken up again, its hook state the root's.
 * A child that suspends for approvals makes the parent's turn wait on them too (`CurrentRun.nested`).
 */
export const asTool = <R, A, I extends Schema.Struct.Fields | Schema.Schema<any, any, never> = typeof promptInput>(
  agent: Agent<R, A>,
  options: AsToolOptions<I>
): Tool.Tool<string, Tool.InputOf<I>, unknown, AgentError | UnknownRun, R | LanguageModel.LanguageModel> => {
  const tool = Tool.make(options.name, {
    description: options.description,
    input: (options.input ?? promptInput) as I,
    timeout: options.timeout ?? "10 minutes",
    idempotent: options.idempotent
  }, (input: Tool.InputOf<I>, call: Call) => runChild(agent, options.name, promptOf(input, options.input === undefined), call))
  subAgentTools.add(tool)
  return tool as Tool.Tool<string, Tool.InputOf<I>, unknown, AgentError | UnknownRun, R | LanguageModel.LanguageModel>
}

const promptOf = (input: unknown, isPrompt: boolean): string =>
  isPrompt ? (input as { readonly prompt: string }).prompt : JSON.stringify(input)

/**
 * The child run of `call`: new, or, when the journal has it (the call is taken up again), resumed from there. A
 * child that suspends tells the parent run of its pending approvals and answers nothing: the parent's turn
 * waits, and its journal keeps no outcome for the call.
 */
const runChild = (agent: Agent<any, any>, toolName: string, prompt: string, call: Call) =>
  Effect.gen(function*() {
    const parent = Option.getOrUndefined(yield* Effect.serviceOption(CurrentRun))
    const journal = Option.getOrUndefined(yield* Effect.serviceOption(Journal.Journal))
    const runId = childRunId(call.taskId, call.toolCallId)
    const shared = parent?.door.state
    const known = journal === undefined ? undefined : yield* Effect.orDie(journal.run(runId))
    // A model given to the parent run (`RunOptions.model`) is its children's too.
    const model = parent?.modelGiven
    const start: Start = known === undefined ? { prompt, runId, shared, model } : { resume: runId, shared, model }
    // A watched parent (`Agent.stream`) sees the child's events as they happen, each wrapped with the call.
    const emit = parent?.emit === undefined ? undefined : (event: AgentEvent) =>
      parent.emit!(AgentEvent.SubAgent({ toolCallId: call.toolCallId, toolName, runId, event }))
    const result = yield* Effect.catchTag(
      traced(agent, loop(agent, start, emit)) as Effect.Effect<
        { readonly output: string; readonly value?: unknown },
        AgentError | UnknownRun,
        LanguageModel.LanguageModel
      >,
      "RunSuspended",
      (suspended) =>
        parent === undefined ? Effect.fail(suspended) : Effect.sync(() => {
          parent.nested.set(call.toolCallId, { toolName, pending: suspended.pending })
          return undefined
        })
    )
    if (result === undefined) return null
    return agent.output === undefined ? result.output : result.value
  })

/**
 * Marks `tool` as one whose call runs a child run somewhere else (the platform's `exec_agent`, whose child is a
 * task): the calling run is in its context (`waitWithParent`), and a call of it taken up again on resume goes on
 * with its child for a whole timeout again, as `asTool`'s does.
 */
export const runsChild = <T extends Tool.Any>(tool: T): T => {
  subAgentTools.add(tool)
  return tool
}

/**
 * Tells the calling run that its call `toolCallId` (of `toolName`) waits for `pending`, the approvals its child
 * run suspended on: the call answers nothing, and the run suspends after its turn listing them under the call.
 * False when there is no journaled calling run to suspend (nothing can wait then).
 */
export const waitWithParent = (
  toolCallId: string,
  toolName: string,
  pending: ReadonlyArray<PendingApproval>
): Effect.Effect<boolean> =>
  Effect.map(Effect.serviceOption(CurrentRun), (parent) => {
    if (Option.isNone(parent) || parent.value.journaled === undefined) return false
    parent.value.nested.set(toolCallId, { toolName, pending })
    return true
  })

/** The tool that hands a run to `handoff`'s agent (`transfer_to_<name>`, its name made a tool name), and the agent. */
export const handoffOf = (handoff: Handoff): { readonly tool: Tool.Any; readonly agent: () => Agent<any, any> } => {
  const made = "agent" in handoff && typeof handoff.agent === "function" ? undefined : handoff as Agent<any, any>
  const name = made?.name ?? (handoff as { readonly name: string }).name
  const about = made?.instructions === undefined ? "." : `: ${made.instructions.slice(0, 600)}`
  const tool = Tool.make(`transfer_to_${name.replace(/[^A-Za-z0-9_-]/g, "_")}`.slice(0, 64), {
    description: `Hands the conversation over to ${name}, who goes on with it from here${about}`,
    input: {},
    output: Schema.String,
    timeout: "1 second"
  }, () => `the conversation is now with ${name}`)
  return { tool, agent: made === undefined ? (handoff as { readonly agent: () => Agent<any, any> }).agent : () => made }
}
