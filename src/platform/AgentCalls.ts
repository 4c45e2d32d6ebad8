/**
 * Agents that call agents on the platform (design: Agents that call agents): which agents an agent's
 * tasks may run (`Options.agentCalls`), the serving processes that watch for tasks to run
 * (`WatchAssignments`), and the two tools the platform gives the tasks of an agent allowed to call
 * others, `list_agents` and `exec_agent`: handled by the platform, never delivered to a process.
 */
import { Clock, Duration, Effect, Exit, Mailbox, Option, Schema, type Scope } from "effect"
import { runsChild, waitWithParent } from "../internal/agent/subAgent.js"
import type { PendingApproval } from "../internal/agent/types.js"
import type * as Journal from "../Journal.js"
import type { Assignment, Caller, TaskEvent } from "../protocol/Protocol.js"
import * as Tool from "../Tool.js"
import type { ToolCallInfo } from "../ToolContext.js"
import * as Toolkit from "../Toolkit.js"
import { agentSettingsOf, type Options } from "./Options.js"

/** Why an `exec_agent` call gave no answer of the other agent: the text the calling model reads. */
export class AgentCallFailed extends Schema.TaggedError<AgentCallFailed>("agent-tools/platform/AgentCallFailed")(
  "AgentCallFailed",
  { agentId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `exec_agent ${this.agentId}: ${this.reason}`
  }
}

/**
 * When the wait for a task an `exec_agent` call started first asks whether the process it was given to is
 * live (then every second, `regiving` in TaskChildren.ts and ClusterAgentCalls.ts): a platform just restarted has
 * not heard its processes register again yet, and they reconnect well within it.
 */
export const regiveAfter = Duration.seconds(3)

/** The default of `Options.agentCallTimeout`, as `Agent.asTool`'s. */
export const defaultAgentCallTimeout = Duration.minutes(10)

/**
 * What is wrong with `Options.agentCalls` and `agentCallTimeout`, field by field; empty when nothing
 * is. Each value of `agentCalls` must be an array of agent ids (non-empty strings); the timeout, a
 * tool's, more than 0 and at most 3600 s.
 */
export const agentCallsProblems = (options: Pick<Options, "agentCalls" | "agentCallTimeout">): Array<string> => {
  const { agentCallTimeout, agentCalls } = options
  const timeout = agentCallTimeout === undefined ? undefined : Duration.decodeUnknown(agentCallTimeout)
  const timeoutProblems = timeout === undefined ||
      (Option.isSome(timeout) && Duration.greaterThan(timeout.value, Duration.zero) &&
        Duration.lessThanOrEqualTo(timeout.value, Toolkit.maxTimeout))
    ? []
    : ["agentCallTimeout must be a duration of more than 0 and at most 3600 s, like \"10 minutes\""]
  if (agentCalls === undefined) return timeoutProblems
  if (typeof agentCalls !== "object" || agentCalls === null || Array.isArray(agentCalls)) {
    const shape = "agentCalls must be an object: for each agent id, the agent ids its tasks may run with exec_agent"
    return [...timeoutProblems, shape]
  }
  return [
    ...timeoutProblems,
    ...Object.entries(agentCalls).flatMap(([agentId, callees]) =>
      Array.isArray(callees) && callees.every((callee) => typeof callee === "string" && callee !== "")
        ? []
        : [`agentCalls.${agentId} must be an array of agent ids (non-empty strings), like ["billing"]`]
    )
  ]
}

// --- the assignments: the processes watching for tasks to run ---

interface Watcher {
  readonly processId: string
  readonly mailbox: Mailbox.Mailbox<Assignment>
  /** It takes single calls too (`WatchAssignments` with `calls: true`). */
  readonly calls: boolean
  /** The connection it watches on (the one its answers must come from). */
  readonly connection: string
}

/** A serving process that takes single calls of its agent's tasks, on the connection of its latest such stream. */
export interface CallWorker {
  readonly processId: string
  readonly connection: string
}

/** How a stream of `WatchAssignments` was opened: whether it takes calls, on which connection. */
export interface WatchOptions {
  readonly calls?: boolean | undefined
  readonly connection?: string | undefined
}

/**
 * The streams of `WatchAssignments` open now, per agent: a task another agent's task started is
 * given to one of them, and a call of a task to one that takes calls (TaskRoutes.ts). Memory only; a
 * stream that closes is let go with its scope.
 */
export const makeAssignments = () => {
  const watchers = new Map<string, Array<Watcher>>()
  /** Told of each stream that takes calls, once open (TaskRoutes.ts gives it the calls waiting for it). */
  const onCallsWatch: Array<(agentId: string, worker: CallWorker) => void> = []
  /** The latest stream of `processId` that takes calls. */
  const callsStreamOf = (agentId: string, processId: string): Watcher | undefined => {
    let latest: Watcher | undefined
    for (const w of watchers.get(agentId) ?? []) if (w.processId === processId && w.calls) latest = w
    return latest
  }
  return {
    /**
     * A stream of the tasks (and with `calls`, the calls) given to `caller`'s process, open for as long as the
     * scope is. `replacing` (cluster mode, where a stream whose runner died may never be closed): its older streams end.
     */
    watch: (
      caller: Caller,
      replacing = false,
      options: WatchOptions = {}
    ): Effect.Effect<Mailbox.ReadonlyMailbox<Assignment>, never, Scope.Scope> =>
      Effect.gen(function*() {
        if (replacing) {
          for (const older of watchers.get(caller.agentId) ?? []) {
            if (older.processId === caller.processId) older.mailbox.unsafeDone(Exit.void)
          }
        }
        const mailbox = yield* Mailbox.make<Assignment>()
        const watcher: Watcher = {
          processId: caller.processId,
          mailbox,
          calls: options.calls === true,
          connection: options.connection ?? ""
        }
        watchers.set(caller.agentId, [...(watchers.get(caller.agentId) ?? []), watcher])
        if (watcher.calls) {
          for (const told of onCallsWatch) told(caller.agentId, { processId: caller.processId, connection: watcher.connection })
        }
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            const left = (watchers.get(caller.agentId) ?? []).filter((w) => w !== watcher)
            if (left.length === 0) watchers.delete(caller.agentId)
            else watchers.set(caller.agentId, left)
          })
        )
        return mailbox
      }),
    /** The processes of `agentId` watching now (one may watch on more than one stream). */
    watching: (agentId: string): ReadonlyArray<string> => [
      ...new Set((watchers.get(agentId) ?? []).map((w) => w.processId))
    ],
    /** Gives `taskId` to `processId` on its latest stream; false when it watches on none. */
    assign: (agentId: string, processId: string, taskId: string): boolean => {
      const streams = (watchers.get(agentId) ?? []).filter((w) => w.processId === processId)
      const latest = streams[streams.length - 1]
      return latest === undefined ? false : latest.mailbox.unsafeOffer({ taskId })
    },
    /** The processes of `agentId` that take calls now, each on its latest stream that does. */
    callWorkers: (agentId: string): ReadonlyArray<CallWorker> => {
      const latest = new Map<string, CallWorker>()
      for (const w of watchers.get(agentId) ?? []) {
        if (w.calls) latest.set(w.processId, { processId: w.processId, connection: w.connection })
      }
      return [...latest.values()]
    },
    /** Gives a call to `processId` on its latest stream that takes calls: the connection it went on, undefined if none. */
    give: (agentId: string, processId: string, assignment: Assignment): string | undefined => {
      const stream = callsStreamOf(agentId, processId)
      return stream !== undefined && stream.mailbox.unsafeOffer(assignment) ? stream.connection : undefined
    },
    /** Tells `listener` of each stream that takes calls, once open. */
    onCallsWatch: (listener: (agentId: string, worker: CallWorker) => void): void => void onCallsWatch.push(listener)
  }
}

/** The assignments, as `makeAssignments` gives them. */
export type Assignments = ReturnType<typeof makeAssignments>

// --- what the tasks need ---

/** What running a task's `exec_agent` call needs of the task (a `Task` of TaskBook.ts): its id, its end, its stream. */
export interface Parent {
  readonly taskId: string
  readonly final: TaskEvent | undefined
  /** The tasks its calls started, said on its stream (`SubTaskStarted`) once each. */
  readonly children: Set<string>
  emit(event: TaskEvent): number
}

/** What the task an `exec_agent` call started came to: its end, or the approvals it suspended on. */
export type Settled =
  | { readonly _tag: "Ended"; readonly final: TaskEvent | undefined }
  | { readonly _tag: "Waiting"; readonly pending: ReadonlyArray<PendingApproval> }

/**
 * An `exec_agent` call's wait for the task `childTaskId` it started, in either mode (design: Agents that call
 * agents): said on the calling task's stream (`SubTaskStarted` once, `SubTaskEnded` at the end); the child
 * stopped when the wait is interrupted past the call's deadline or with the calling task ended (at shutdown
 * it is left to the journal); a child that suspended makes the call wait with its own task (null: the task
 * suspends listing the child's calls under this one); else the child's answer, or why it gave none.
 */
export const awaitChild = (
  parent: Parent,
  call: ToolCallInfo,
  agentId: string,
  childTaskId: string,
  child: { readonly settled: Effect.Effect<Settled>; readonly stop: (reason: string) => Effect.Effect<void> }
): Effect.Effect<string | null, AgentCallFailed> =>
  Effect.gen(function*() {
    const { toolCallId } = call
    if (!parent.children.has(childTaskId)) {
      parent.children.add(childTaskId)
      parent.emit({ _tag: "SubTaskStarted", taskId: parent.taskId, toolCallId, childTaskId, agentId })
    }
    const why = `the exec_agent call that started it (task ${parent.taskId}, call ${toolCallId}) ended first`
    const settled = yield* Effect.onInterrupt(child.settled, () =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (parent.final !== undefined) return child.stop(why)
        if (now < call.deadlineAt - 50) return Effect.void
        // The call's deadline came first: the child is stopped, and the stream says so (not "completed").
        return Effect.zipRight(
          child.stop(why),
          Effect.sync(() =>
            parent.emit({ _tag: "SubTaskEnded", taskId: parent.taskId, toolCallId, childTaskId, outcome: "timed_out" })
          )
        )
      }))
    if (settled._tag === "Waiting") {
      if (yield* waitWithParent(toolCallId, "exec_agent", settled.pending)) return null
      // Not reached: a task suspends only with a journal, the calling task's too.
      const reason = `its task ${childTaskId} waits for approvals, and this task has no journal to wait with`
      return yield* new AgentCallFailed({ agentId, reason })
    }
    const { final } = settled
    const outcome = final?._tag === "TaskCompleted" ? "completed" as const : "failed" as const
    parent.emit({ _tag: "SubTaskEnded", taskId: parent.taskId, toolCallId, childTaskId, outcome })
    if (final?._tag === "TaskCompleted") return final.output
    const reason = final?._tag === "TaskFailed"
      ? final.reason
      : final?._tag === "TaskCancelled"
      ? `it was cancelled by ${final.by}${final.reason === "" ? "" : `: ${final.reason}`}`
      : "it ended without an answer"
    return yield* new AgentCallFailed({ agentId, reason: `its task ${childTaskId} failed: ${reason}` })
  })

/** How `exec_agent` runs the other agent's task: its answer, or why it gave none. */
export type Execute = (call: ToolCallInfo, agent: string, prompt: string) => Effect.Effect<string | null, AgentCallFailed>

/** What `list_agents` says of an agent the task may call. */
export interface Reach {
  /** A serving process of it watches for tasks now: `exec_agent` can run it. */
  readonly connected: boolean
  /** The tools its tasks are offered now. */
  readonly tools: ReadonlyArray<string>
}

/** What the tasks (Tasks.ts) need to run agent calls: the rules, and the other agents' processes and tools. */
export interface Host {
  /** The agents the tasks of `agentId` may run with `exec_agent` (`Options.agentCalls`); empty: none. */
  readonly allowed: (agentId: string) => ReadonlyArray<string>
  /** How long an `exec_agent` call may take, in milliseconds (`Options.agentCallTimeout`). */
  readonly timeoutMillis: number
  /** What `list_agents` says of `agentId` (in cluster mode, asked of the runner that holds its shard). */
  readonly reach: (agentId: string, now: number) => Effect.Effect<Reach>
  /** A live process of `agentId` held here that watches for tasks, taken in turn; undefined when none does. */
  readonly pick: (agentId: string, now: number) => string | undefined
  /** Whether `processId` of `agentId` is live (registered, heard within its heartbeats). */
  readonly isLive: (agentId: string, processId: string, now: number) => boolean
  /** The tools a task of `agentId` held by `processId` is offered (as a submitted task's). */
  readonly toolsOf: (agentId: string, processId: string, now: number) => Journal.TaskTools
  /** Gives the task to the process (`Assignments.assign`). */
  readonly assign: (agentId: string, processId: string, taskId: string) => boolean
  /**
   * Cluster mode: how `parent`'s `exec_agent` calls run, the other agent's task a cluster task
   * (ClusterAgentCalls.ts). Undefined: the tasks of this process run it (TaskChildren.ts, `makeChildren`).
   */
  readonly execute?: ((parent: Parent) => Execute) | undefined
  /**
   * Cluster mode: tells the runner that holds `taskId`, a task of a tree not held here, that its call
   * `toolCallId` was decided at the root and journaled: it goes on once it waits for nothing more.
   */
  readonly decidedElsewhere?: ((taskId: string, toolCallId: string) => Effect.Effect<void>) | undefined
  /**
   * Cluster mode: cancels `taskId` (a child of a task cancelled here) on the runner that holds it, `by` who, for
   * `reason`. Undefined: it is held here (TaskCancel.ts).
   */
  readonly cancelElsewhere?: ((taskId: string, by: string, reason: string) => Effect.Effect<void>) | undefined
}

/** The `Host` of one platform process, over its agents' live processes and the assignments. */
export const makeHost = (
  options: Options,
  agents: {
    readonly live: (agentId: string, now: number) => ReadonlyArray<{ readonly processId: string }>
    readonly visible: (agentId: string, processId: string, now: number) => Journal.TaskTools
  },
  assignments: Assignments
): Host => {
  const calls = new Map(Object.entries(options.agentCalls ?? {}))
  let turn = 0
  const pick = (agentId: string, now: number) => {
    const live = new Set(agents.live(agentId, now).map((p) => p.processId))
    const candidates = assignments.watching(agentId).filter((processId) => live.has(processId))
    return candidates.length === 0 ? undefined : candidates[turn++ % candidates.length]
  }
  return {
    // The agent's own settings first (read at each call: a reloaded configuration applies at once).
    allowed: (agentId) => agentSettingsOf(options, agentId)?.calls ?? calls.get(agentId) ?? [],
    timeoutMillis: Duration.toMillis(Duration.decode(options.agentCallTimeout ?? defaultAgentCallTimeout)),
    reach: (agentId, now) =>
      Effect.sync(() => ({
        connected: pick(agentId, now) !== undefined,
        tools: agents.visible(agentId, "", now).map((tool) => tool.entry.name)
      })),
    pick,
    isLive: (agentId, processId, now) => agents.live(agentId, now).some((p) => p.processId === processId),
    toolsOf: agents.visible,
    assign: assignments.assign
  }
}

// --- the tools ---

/**
 * The platform's tools for a task of `agentId` whose rules let it call `allowed` (none when empty):
 * `list_agents` and `exec_agent`, whose `execute` runs the other agent's task and gives its answer (null when the
 * task suspended for approvals: the call waits with its own task, see `waitWithParent`). A
 * call of an agent not allowed is refused here, and starts nothing.
 */
export const toolsFor = (
  agentId: string,
  host: Host,
  now: () => number,
  execute: Execute
): ReadonlyArray<Tool.Any> => {
  const allowed = host.allowed(agentId)
  if (allowed.length === 0) return []
  const listAgents = Tool.make("list_agents", {
    description: "Lists the agents you may ask to do a task with exec_agent: each one's id, whether it can be " +
      "reached now, and the tools it has.",
    input: {},
    timeout: "5 seconds"
  }, () =>
    // What one of the agents a task may call looks like to its model: its id, then whether it can be run now.
    Effect.forEach(allowed, (agent) => Effect.map(host.reach(agent, now()), (reach) => ({ agent, ...reach }))))
  const execAgent = Tool.make("exec_agent", {
    description: "Asks another agent (one list_agents names) to do a task, with its own tools; gives its answer. " +
      "It sees nothing of this conversation: say everything it needs in the prompt.",
    input: {
      agent: Schema.String.annotations({ description: "The agent's id, as list_agents gives it." }),
      prompt: Schema.String.annotations({ description: "What to ask the agent, in full." })
    },
    timeout: Duration.millis(host.timeoutMillis)
  }, ({ agent, prompt }, call) => {
    if (!allowed.includes(agent)) {
      return Effect.fail(
        new AgentCallFailed({
          agentId: agent,
          reason: `agent ${agentId} may not run tasks of agent ${agent}: the platform's agentCalls lets it run ` +
            `only ${allowed.join(", ")}; no task was started`
        })
      )
    }
    // The started task's id is `<task id>/<call id>`: a call id with a `/` could name another call's task.
    if (call.toolCallId.includes("/")) {
      return Effect.fail(
        new AgentCallFailed({
          agentId: agent,
          reason: `the call's id ${JSON.stringify(call.toolCallId)} has a "/", which task ids keep for the calls ` +
            `that start them; no task was started`
        })
      )
    }
    return execute(call, agent, prompt)
  })
  // Its call waits with its task when the child suspends for approvals, and goes on with the child on resume.
  return [Toolkit.ownedByPlatform(listAgents), Toolkit.ownedByPlatform(runsChild(execAgent))]
}
