/**
 * Runs one task on the platform (design: The platform): the agent loop with the platform's model, whose tools are
 * the agent's registered ones and whose calls are delivered to the task's stream and awaited.
 */
import { Cause, Context, Duration, Effect, Either, Option, Schema, Tracer } from "effect"
import * as Agent from "../Agent.js"
import { Verbatim } from "../internal/call/pipeline.js"
import { traceparentOf } from "../internal/util/traceContext.js"
import { errorText, ToolResult } from "../ToolResult.js"
import type * as Journal from "../Journal.js"
import * as LanguageModel from "../LanguageModel.js"
import type { JsonSchemaObject } from "../internal/jsonSchema.js"
import * as Tool from "../Tool.js"
import { ToolContext } from "../ToolContext.js"
import type * as Toolkit from "../Toolkit.js"
import type { TaskEvent, TaskOutput } from "../protocol/Protocol.js"
import * as Metrics from "./Metrics.js"

/** A call to deliver to the process that holds the task. */
export interface Delivery {
  readonly toolCallId: string
  readonly name: string
  readonly arguments: string
  readonly deadlineAt: number
  /** A person approved the call through the platform: the serving side does not ask again. */
  readonly approved?: true | undefined
  /** The call's span here (W3C `traceparent`), while a tracer listens: the serving process's span continues it. */
  readonly traceparent?: string | undefined
}

/** What a task needs from the platform. */
export interface TaskOptions {
  readonly taskId: string
  readonly agentId: string
  readonly prompt: string
  /** The agent's own model (`AgentSettings.model`); unset, the `LanguageModel` in context. */
  readonly model?: LanguageModel.LanguageModel["Type"] | undefined
  readonly instructions?: string | undefined
  readonly maxSteps?: number | undefined
  /** Tools that need approval besides those whose manifest says so (`AgentSettings.approve`). */
  readonly approve?: ReadonlyArray<string> | undefined
  /** How long a journaled task waits for a decision on a call that needs approval (`Agent.Options.approvalExpiry`). */
  readonly approvalExpiry?: Duration.DurationInput | undefined
  /** The visible tools of the agent, from every live process; `own` marks the task holder's. */
  readonly tools: ReadonlyArray<{ readonly entry: Toolkit.ManifestEntry; readonly own: boolean }>
  /** Tools the platform handles itself, never delivered (`exec_agent`, `list_agents`: AgentCalls.ts). */
  readonly platformTools?: ReadonlyArray<Tool.Any> | undefined
  /** Delivers a call on the task's stream and waits for its result (redelivering as needed). */
  readonly deliver: (call: Delivery) => Effect.Effect<ToolResult>
  /**
   * Gives a call of a tool the task's holder does not serve to another process of the agent that does, and waits for
   * its result (TaskRoutes.ts).
   */
  readonly route: (call: Delivery) => Effect.Effect<ToolResult>
  /** A typed final output (JSON Schema): the answer is checked against it, and `TaskCompleted.value` is it. */
  readonly output?: TaskOutput | undefined
  readonly emit: (event: TaskEvent) => void
  /**
   * The task is a journaled run (the `Journal` in context holds it under the task id): it goes on
   * from what it journaled, and a call journaled as started without an answer is delivered again
   * (the serving process dedupes it by task and call id).
   */
  readonly journaled?: boolean | undefined
  /** A journaled task: the journal's record of it, just read (or written, new), so that it is not read again. */
  readonly known?: Journal.OpenRun | undefined
  /** The platform's agents made for earlier tasks, used again while a task's settings and tools are theirs. */
  readonly agents?: AgentCache | undefined
}

/**
 * How the remote tools of the task being run deliver its calls: on its stream (`deliver`), or to another
 * process of its agent (`route`). A service of the run, not of the tools, so that one agent serves many tasks.
 */
class TaskCalls extends Context.Tag("agent-tools/platform/TaskCalls")<TaskCalls, {
  readonly deliver: TaskOptions["deliver"]
  readonly route: TaskOptions["route"]
}>() {}

/** An agent a task runs: its tools need the run's `TaskCalls` (and a platform tool what its run gives it). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type TaskAgent = Agent.Agent<any, unknown, Agent.AgentError>

/** What an agent made for a task is made of (besides its agent's id): equal ones make the same agent. */
interface AgentKey {
  readonly tools: TaskOptions["tools"]
  readonly journaled: boolean
  readonly approve: TaskOptions["approve"]
  readonly instructions: TaskOptions["instructions"]
  readonly maxSteps: TaskOptions["maxSteps"]
  readonly approvalExpiry: TaskOptions["approvalExpiry"]
}

/** A manifest entry's JSON, made once for each entry object. */
const entryTexts = new WeakMap<Toolkit.ManifestEntry, string>()
const entryText = (entry: Toolkit.ManifestEntry): string => {
  let text = entryTexts.get(entry)
  if (text === undefined) entryTexts.set(entry, text = JSON.stringify(entry))
  return text
}

/** The same entry: the same object, or (a cluster task's tools, decoded from its journal) one that says the same. */
const sameEntry = (a: Toolkit.ManifestEntry, b: Toolkit.ManifestEntry): boolean =>
  a === b || (a.name === b.name && entryText(a) === entryText(b))

const sameKey = (a: AgentKey, b: AgentKey): boolean =>
  a.journaled === b.journaled && a.approve === b.approve && a.instructions === b.instructions &&
  a.maxSteps === b.maxSteps && a.approvalExpiry === b.approvalExpiry && a.tools.length === b.tools.length &&
  a.tools.every((tool, i) => tool.own === b.tools[i]!.own && sameEntry(tool.entry, b.tools[i]!.entry))

/**
 * The last agent made for each agent's tasks, with what it was made of: a task whose settings and tools (the same
 * manifest entries, while its processes' registrations stand; on a cluster runner, entries that say the same, each
 * task's read from its journal) are the same runs the same agent, so that its tools, their JSON Schemas and its
 * checked toolkit are made once, not once a task.
 */
export class AgentCache {
  private readonly byAgent = new Map<string, { readonly key: AgentKey; readonly agent: TaskAgent }>()

  agentFor(agentId: string, key: AgentKey, make: () => TaskAgent): TaskAgent {
    const known = this.byAgent.get(agentId)
    if (known !== undefined && sameKey(known.key, key)) return known.agent
    const agent = make()
    // Agents are the platform's tokens': a bound keeps the map small whatever happens.
    if (known === undefined && this.byAgent.size >= 10_000) this.byAgent.clear()
    this.byAgent.set(agentId, { key, agent })
    return agent
  }
}

/** A served call's error text, passed through as is (it is already the error text). */
class RemoteFailure extends Schema.TaggedError<RemoteFailure>("agent-tools/RemoteFailure")("RemoteFailure", {
  text: Schema.String
}) {}

const passThrough = (error: unknown): string => error instanceof RemoteFailure ? error.text : errorText(error)

/**
 * A tool whose handler is a delivery (on the task's stream when its holder serves the tool, `own`, else to another
 * process of the agent that does: `TaskOptions.route`), through the run's `TaskCalls`; the model sees the manifest's own JSON Schemas. In a journaled
 * task a tool that needs approval passes the loop's gate (design: Durable runs): the task suspends
 * until a person decides, and a call of it that runs here was approved, so it is delivered as such.
 * Without a journal nothing can suspend: the serving side asks (`Hooks.approval`), as for any call, or,
 * with no approving hook there, refuses it (approvals fail closed, design: Hooks).
 * The answer is the call's result as the serving process made it (`Verbatim`): the platform's hooks see
 * its failure's kind (a served `TimedOut` as `TimedOut`), and the pipeline neither relabels nor checks it again.
 */
const remoteTool = (
  agentId: string,
  entry: Toolkit.ManifestEntry,
  own: boolean,
  journaled: boolean,
  approve: ReadonlyArray<string> | undefined
) => {
  // The agent's settings may ask approval of a tool whose manifest does not: only a journaled task can wait for it.
  const byPlatform = approve?.includes(entry.name) === true
  const approved = journaled && (entry.needsApproval || byPlatform) ? { approved: true as const } : undefined
  return Tool.fromJsonSchema(entry.name, {
    description: entry.description,
    // The serving process decodes strictly (design: Input); here the arguments need only be an object.
    parameters: entry.parameters as JsonSchemaObject,
    output: entry.output as JsonSchemaObject,
    checked: "elsewhere",
    timeout: Duration.millis(entry.timeoutMillis),
    idempotent: entry.idempotent,
    needsApproval: approved !== undefined,
    errorTransform: passThrough
  }, (input) => {
    if (byPlatform && !journaled) {
      return Effect.fail(
        new RemoteFailure({
          text: `${entry.name}: the platform's settings for agent ${agentId} require a person's approval of this tool, ` +
            `and a platform without a journal cannot wait for one; it did not run`
        })
      )
    }
    return Effect.flatMap(Effect.context<TaskCalls | ToolContext>(), (context) => {
      const calls = Context.get(context, TaskCalls)
      const ctx = Context.get(context, ToolContext)
      const span = Context.getOption(context, Tracer.ParentSpan)
      return Effect.map(
        (own ? calls.deliver : calls.route)({
          toolCallId: ctx.toolCallId,
          name: entry.name,
          arguments: JSON.stringify(input),
          deadlineAt: ctx.deadlineAt,
          ...approved,
          ...(Option.isSome(span) ? { traceparent: traceparentOf(span.value) } : {})
        }),
        // Success or failure, the answer is the result: checked once, on arrival.
        (result) => new Verbatim(result)
      )
    })
  })
}

/**
 * Runs the task to its end, emitting its events; never fails (a failure is a `TaskFailed` event). A
 * journaled task that waits for approvals stops with `TaskSuspended` (not an end: it goes on once
 * they are decided, from its journal).
 */
export const run = (options: TaskOptions): Effect.Effect<void, never, LanguageModel.LanguageModel> =>
  Effect.zipRight(
    Metrics.started(options.taskId, options.agentId),
    options.model === undefined
      ? runTyped(options)
      : Effect.provideService(runTyped(options), LanguageModel.LanguageModel, options.model)
  )

const runTyped = (options: TaskOptions): Effect.Effect<void, never, LanguageModel.LanguageModel> =>
  options.output === undefined ? runWith(options, undefined) : Effect.flatMap(
    // The check of a JSON Schema is ajv's, as for a tool made from JSON Schemas (loaded only for a typed task).
    Effect.promise(() => import("../internal/jsonSchema.js")),
    ({ jsonSchemaChecked }) => {
      const schema = options.output!.schema
      const checked = typeof schema === "object" && schema !== null && !Array.isArray(schema)
        ? jsonSchemaChecked(schema as Record<string, unknown>)
        : Either.left("it is not a JSON Schema object")
      return Either.isRight(checked) ? runWith(options, checked.right) : Effect.sync(() =>
        void options.emit({
          _tag: "TaskFailed",
          taskId: options.taskId,
          reason: `the task's output schema cannot be used: ${checked.left}`
        })
      )
    }
  )

const runWith = (
  options: TaskOptions,
  output: Schema.Schema<unknown> | undefined
): Effect.Effect<void, never, LanguageModel.LanguageModel> => {
  const { emit, taskId } = options
  const journaled = options.journaled === true
  const make = (): TaskAgent =>
    Agent.make({
      name: options.agentId,
      tools: [
        ...options.tools.map(({ entry, own }) => remoteTool(options.agentId, entry, own, journaled, options.approve)),
        ...(options.platformTools ?? [])
      ],
      instructions: options.instructions,
      maxSteps: options.maxSteps,
      approvalExpiry: options.approvalExpiry,
      output,
      outputRetries: options.output?.retries
    })
  // A typed task's agent, and one with tools of its own (`exec_agent`'s, made for the task), are made for it alone.
  const agent = options.agents === undefined || output !== undefined || (options.platformTools ?? []).length > 0
    ? make()
    : options.agents.agentFor(options.agentId, {
      tools: options.tools,
      journaled,
      approve: options.approve,
      instructions: options.instructions,
      maxSteps: options.maxSteps,
      approvalExpiry: options.approvalExpiry
    }, make)
  const host = journaled ? { runId: taskId, rerunUnfinished: true, known: options.known } : undefined
  return Agent.runWithEvents(agent, options.prompt, (event) => {
    switch (event._tag) {
      case "TurnStarted":
        return void emit({ _tag: "TurnStarted", taskId, step: event.step })
      case "TextDelta":
        return void emit({ _tag: "ModelTextDelta", taskId, step: event.step, text: event.text })
      case "ReasoningDelta":
        return void emit({ _tag: "ReasoningDelta", taskId, step: event.step, text: event.text })
      case "TurnRetried":
        return void emit({ _tag: "TurnRetried", taskId, step: event.step, reason: event.reason })
      case "ToolCallStarted":
        return void emit({ _tag: "ToolCallStarted", taskId, toolCallId: event.id, name: event.name })
      case "Text":
        return void emit({ _tag: "ModelText", taskId, text: event.text })
      case "ToolCallFinished":
        return void emit({
          _tag: "ToolCallCompleted",
          taskId,
          toolCallId: event.call.id,
          name: event.call.name,
          result: event.call.result,
          cached: event.call.cached
        })
      case "Done":
        return void emit({
          _tag: "TaskCompleted",
          taskId,
          output: event.result.output,
          steps: event.result.steps,
          usage: event.result.usage,
          ...(output === undefined ? {} : { value: event.result.value })
        })
    }
  }, host).pipe(
    Effect.provideService(TaskCalls, { deliver: options.deliver, route: options.route }),
    Effect.asVoid,
    Effect.catchAllCause((cause) =>
      Effect.sync(() => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && failure.value._tag === "RunSuspended") {
          return emit({ _tag: "TaskSuspended", taskId, pending: failure.value.pending })
        }
        emit({ _tag: "TaskFailed", taskId, reason: errorText(Cause.squash(cause)) })
      })
    )
  )
}
