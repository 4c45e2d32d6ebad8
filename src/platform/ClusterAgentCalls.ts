/**
 * Agents that call agents in cluster mode (design: Agents that call agents, Cluster mode): the task an
 * `exec_agent` call starts is a cluster task like a submitted one, given to a serving process of the
 * other agent that watches for tasks on whichever runner its WebSocket is connected to.
 *
 * The routing: the watchers of an agent are held by the runner that owns the agent's shard, in its
 * `Assignments` (AgentCalls.ts), through an entity of their own sharded by agent id (the same shard
 * as the agent's registrations: `live` and `watching` are read in one place). A runner a process
 * watches on opens a `Watch` stream to that entity for it and passes on what comes: the stream is the
 * route back to that runner, so no runner needs to know where another's processes are connected.
 * When a runner dies, each side goes on by itself: the owner of the agent's shard dying, the streams
 * to it go quiet and each watching runner opens its stream again, to the next owner; the runner a
 * process watched on dying, the process connects to another runner and watches there again (its new
 * stream ends its old one, on the owner). Assignments are memory only: one lost with a runner leaves
 * its task journaled and unassigned; its `exec_agent` call, run again on another runner, gives it
 * again, and else waits for it to its deadline, and stops it.
 *
 * The child's end is read from the journal, where its owner writes it, whichever runner that is: the
 * task's `Attach` would take the child over from the serving process running it (a task has one
 * attachment). Past the call's deadline the child is stopped by its owner (the task entity's `Stop`).
 */
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import { Clock, Data, Duration, Effect, Mailbox, Option, Schedule, Schema, type Scope, Stream } from "effect"
import { nestedUnder } from "../internal/agent/run.js"
import type { PendingApproval } from "../internal/agent/types.js"
import * as Journal from "../Journal.js"
import { followAlive } from "./ClusterTiming.js"
import type { AgentLimitExceeded, Assignment, Caller } from "../protocol/Protocol.js"
import { TaskEvent, ToolCallRequested } from "../protocol/Protocol.js"
import * as AgentCalls from "./AgentCalls.js"
import { childTaskId } from "./Tasks.js"

/** A task given to the watching process; or one call of a task (`call`), or a call given earlier cancelled (`cancelled`). */
const Assigned = Schema.TaggedStruct("Assigned", {
  taskId: Schema.String,
  call: Schema.optional(ToolCallRequested),
  cancelled: Schema.optional(Schema.String)
})

/**
 * What the owner of an agent's shard knows of its workers (ClusterRoutes.ts): its live processes with the tools each
 * serves, and the processes that take calls, each on the connection of its latest such stream.
 */
export const Workers = Schema.Struct({
  live: Schema.Array(Schema.Struct({ processId: Schema.String, tools: Schema.Array(Schema.String) })),
  workers: Schema.Array(Schema.Struct({ processId: Schema.String, connection: Schema.String }))
})
export type Workers = typeof Workers.Type

/** What the owner of the agent's shard sends a watching runner between assignments: a quiet stream is opened again. */
const Alive = Schema.TaggedStruct("Alive", {})

/**
 * The processes of an agent that watch for tasks to run, on the runner that owns the agent's shard.
 * The entity id is the agent id. Unbounded concurrency: each `Watch` stream stays open while its
 * process watches (the agent's own entity, one message at a time, would be held by it).
 */
export const AssignmentsEntity = Entity.make("agent-tools/Assignments", [
  // `calls`: the process takes single calls of its agent's tasks too, answering on `connection` (of its runner's front).
  Rpc.make("Watch", {
    payload: { processId: Schema.String, calls: Schema.optional(Schema.Boolean), connection: Schema.optional(Schema.String) },
    success: Schema.Union(Assigned, Alive),
    stream: true
  }),
  // The agent's `Workers` at once, then on each change, and at least every `followAlive.every` (its `Alive`).
  Rpc.make("Workers", { success: Workers, stream: true }),
  // Gives a call (or a cancel) to the process on its latest stream that takes calls: false when it has none.
  Rpc.make("Give", {
    payload: {
      processId: Schema.String,
      taskId: Schema.String,
      call: Schema.optional(ToolCallRequested),
      cancelled: Schema.optional(Schema.String)
    },
    success: Schema.Boolean
  }),
  // A live process that watches, taken in turn (none: null), and the agent's tools, for `list_agents` and `exec_agent`.
  Rpc.make("Pick", {
    success: Schema.Struct({ processId: Schema.NullOr(Schema.String), tools: Schema.Array(Schema.String) })
  }),
  Rpc.make("Assign", { payload: { processId: Schema.String, taskId: Schema.String }, success: Schema.Boolean }),
  // Whether the process is live (registered, heard within its heartbeats): one given a task that is not is replaced.
  Rpc.make("Live", { payload: { processId: Schema.String }, success: Schema.Boolean })
])

type Client = Effect.Effect.Success<typeof AssignmentsEntity.client>

/**
 * The entity's handlers, on the host, assignments and agents of the runner that owns the agent's shard.
 * `agentHeld` first has that runner hold the agent itself (its entity reads its live processes from
 * the database), so that a move of the shard forgets no process before its next heartbeat.
 *
 * A `Watch` whose runner died may never be told to stop (the engine ends a request only when its
 * sender says so): its stream ends when its process watches again (through the runner it reconnected
 * to), and at the first `Alive` once its process is no longer live (deregistered, or silent past
 * `evictSilentAfter`), so that no dead stream stays.
 */
export const layerEntity = (
  deps: {
    readonly host: AgentCalls.Host
    readonly assignments: AgentCalls.Assignments
    readonly live: (
      agentId: string,
      now: number
    ) => ReadonlyArray<{ readonly processId: string; readonly manifest: ReadonlyArray<{ readonly name: string }> }>
  },
  agentHeld: (agentId: string) => Effect.Effect<void>
) =>
  AssignmentsEntity.toLayer(
    Effect.gen(function*() {
      const { entityId: agentId } = yield* Entity.CurrentAddress
      const { assignments, host, live } = deps
      yield* agentHeld(agentId)
      const alive = (processId: string) =>
        Stream.tick(followAlive.every).pipe(
          Stream.mapEffect(() => Clock.currentTimeMillis),
          Stream.takeWhile((now) => live(agentId, now).some((p) => p.processId === processId)),
          Stream.as(Alive.make({}))
        )
      return AssignmentsEntity.of({
        Watch: ({ payload: { calls, connection, processId } }) =>
          Stream.unwrapScoped(Effect.map(
            assignments.watch({ agentId, processId }, true, { calls, connection }),
            (mailbox) =>
              Stream.merge(
                Stream.map(Mailbox.toStream(mailbox), (assignment) => Assigned.make(assignment)),
                alive(processId),
                { haltStrategy: "either" }
              )
          )),
        Workers: () => workersOf(agentId, deps),
        Give: ({ payload: { processId, ...assignment } }) =>
          Effect.sync(() => assignments.give(agentId, processId, assignment) !== undefined),
        Pick: () =>
          Effect.map(Clock.currentTimeMillis, (now) => ({
            processId: host.pick(agentId, now) ?? null,
            tools: host.toolsOf(agentId, "", now).map((tool) => tool.entry.name)
          })),
        Assign: ({ payload }) => Effect.sync(() => host.assign(agentId, payload.processId, payload.taskId)),
        Live: ({ payload }) =>
          Effect.map(Clock.currentTimeMillis, (now) => live(agentId, now).some((p) => p.processId === payload.processId))
      })
    }),
    { concurrency: "unbounded" }
  )

/** How often the owner of an agent's shard looks at its workers for a change to tell (`Workers`). */
const workersLooked = "100 millis"

/**
 * The agent's `Workers` as the owner of its shard knows them: at once, then whenever they change (looked at every
 * `workersLooked`), and at least every `followAlive.every`, so that a follower hears of a quiet owner.
 */
const workersOf = (
  agentId: string,
  { assignments, live }: Pick<Parameters<typeof layerEntity>[0], "assignments" | "live">
): Stream.Stream<Workers> =>
  Stream.suspend(() => {
    let last = ""
    let lastAt = 0
    return Stream.tick(workersLooked).pipe(
      Stream.mapEffect(() => Clock.currentTimeMillis),
      Stream.filterMap((now) => {
        const workers: Workers = {
          live: live(agentId, now).map((p) => ({ processId: p.processId, tools: p.manifest.map((entry) => entry.name) })),
          workers: assignments.callWorkers(agentId)
        }
        const key = JSON.stringify(workers)
        if (key === last && now - lastAt < Duration.toMillis(followAlive.every)) return Option.none()
        last = key
        lastAt = now
        return Option.some(workers)
      })
    )
  })

/** The stream from the owner of the agent's shard went quiet: opened again. */
class Quiet extends Data.TaggedError("Quiet") {}

/** The child task has not ended yet: its journal is read again. */
class Open extends Data.TaggedError("Open") {}

/**
 * `WatchAssignments` on the runner the process is connected to: the tasks given to it, from the owner
 * of its agent's shard, for as long as the scope lives; the stream to the owner is opened again
 * whenever it breaks, ends or goes quiet past `followAlive.within` (the shard moved).
 */
export const watchOn = (assignments: Client) =>
(
  caller: Caller & { readonly calls?: boolean | undefined },
  connection: string
): Effect.Effect<Mailbox.ReadonlyMailbox<Assignment>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const out = yield* Mailbox.make<Assignment>()
    const watch = { processId: caller.processId, ...(caller.calls === true ? { calls: true, connection } : {}) }
    const once = assignments(caller.agentId).Watch(watch).pipe(
      Stream.timeoutFail(() => new Quiet(), followAlive.within),
      Stream.runForEach((item) => item._tag === "Assigned" ? out.offer(assignmentOf(item)) : Effect.void),
      Effect.catchAllCause((cause) =>
        Effect.logDebug(`agent ${caller.agentId}: the watch of process ${caller.processId} is opened again`, cause)
      )
    )
    yield* Effect.forkScoped(Effect.repeat(once, Schedule.spaced(followAlive.every)))
    return out
  })

/** An `Assigned` as the serving process reads it: its tag and the fields it does not have left out. */
const assignmentOf = ({ call, cancelled, taskId }: typeof Assigned.Type): Assignment => ({
  taskId,
  ...(call === undefined ? {} : { call }),
  ...(cancelled === undefined ? {} : { cancelled })
})

/** What a runner's cluster does for the agent calls: start a cluster task, and stop one on its owner. */
export interface Engine {
  /** The assignments' entity client. */
  readonly assignments: Client
  /** Journals a new task of the agent's (admitted to its limits over the cluster) and sends its `Run`. */
  readonly start: (
    task: { readonly taskId: string; readonly agentId: string; readonly processId: string; readonly prompt: string }
  ) => Effect.Effect<void, AgentLimitExceeded>
  /** Has the task's owner stop it for `reason`, wherever it runs. */
  readonly stop: (agentId: string, taskId: string, reason: string) => Effect.Effect<void>
  /** Has the task's owner cancel it, `by` who, for `reason` (a task of a tree whose root was cancelled). */
  readonly cancel: (agentId: string, taskId: string, by: string, reason: string) => Effect.Effect<void>
  /** Tells the task's owner that its call was decided at the root of its tree (`Host.decidedElsewhere`). */
  readonly decided: (taskId: string, toolCallId: string) => Effect.Effect<void>
  /** The cluster's journal. */
  readonly journal: Journal.Journal["Type"]
}

/** An ended task's final event as the journal keeps it, if it does. */
const FinalJson = Schema.UndefinedOr(Schema.parseJson(TaskEvent))



/**
 * The approvals a suspended task waits for, not expired at `now`, as its run lists them: its own, then under
 * each `exec_agent` call without an outcome, its child task's (the journal holds each task's own only).
 */
const waitingIn = (
  journal: Journal.Journal["Type"],
  run: Journal.OpenRun,
  now: number
): Effect.Effect<ReadonlyArray<PendingApproval>> => {
  if (run.status !== "suspended") return Effect.succeed([])
  const own = [...run.approvals.values()].filter((a) => a.decision === "pending" && a.expiresAt > now).map((a) => ({
    toolCallId: a.toolCallId,
    toolName: a.toolName,
    input: JSON.parse(a.input) as unknown,
    expiresAt: a.expiresAt,
    path: [{ runId: run.runId, toolCallId: a.toolCallId, toolName: a.toolName }]
  }))
  const calls = [...run.calls].filter(([, c]) => c.name === "exec_agent" && c.result === undefined)
  return Effect.map(
    Effect.forEach(calls, ([toolCallId]) =>
      Effect.flatMap(Effect.orDie(journal.run(childTaskId(run.runId, toolCallId))), (child) =>
        child === undefined || !Journal.isOpen(child) ? Effect.succeed([]) : Effect.map(
          waitingIn(journal, child, now),
          (below) => nestedUnder({ runId: run.runId, toolCallId, toolName: "exec_agent" }, below)
        ))),
    (below) => [...own, ...below.flat()]
  )
}

/** How often the journal is read for the child's end: soon at first, then every second. */
const endPolled = Schedule.exponential("100 millis", 1.5).pipe(Schedule.union(Schedule.spaced("1 second")))

/**
 * Gives the task to another live process of its agent that watches, every second while the one it was last
 * given to (`first` at the start) is no longer live (deregistered, or silent past its heartbeats), as the
 * embedded platform does (TaskChildren.ts, `regiving`); the owner of the agent's shard says which is live. Never
 * ends; the wait for the task races it.
 */
const regiving = (assignments: Client, agentId: string, taskId: string, first: string): Effect.Effect<never> => {
  let given = first
  const client = assignments(agentId)
  return Effect.gen(function*() {
    if (yield* Effect.orElseSucceed(client.Live({ processId: given }), () => true)) return
    const { processId } = yield* Effect.orElseSucceed(client.Pick(), () => ({ processId: null }))
    if (processId === null || processId === given) return
    if (!(yield* Effect.orElseSucceed(client.Assign({ processId, taskId }), () => false))) return
    yield* Effect.logInfo(`task ${taskId}: process ${given} of agent ${agentId} went away; given to ${processId}`)
    given = processId
  }).pipe(
    // The engine cutting a call short (a shard moving) is tried again at the next tick, never the wait's end.
    Effect.catchAllCause((cause) => Effect.logDebug(`task ${taskId}: whether its process is live is asked again`, cause)),
    Effect.repeat(Schedule.spaced("1 second")),
    Effect.delay(AgentCalls.regiveAfter),
    Effect.zipRight(Effect.never)
  )
}

/**
 * The host of a runner's tasks: `local`'s rules, and `list_agents` and `exec_agent` on the cluster.
 * A call run again (its task taken up by another runner) finds the task it started in the journal
 * and waits for it rather than start another.
 */
export const host = (local: AgentCalls.Host, engine: Engine): AgentCalls.Host => {
  const { assignments, journal } = engine
  const failed = (agentId: string, reason: string) => new AgentCalls.AgentCallFailed({ agentId, reason })
  const unreachable = (agentId: string) => (error: { readonly message: string }) =>
    failed(agentId, `the runner that holds agent ${agentId} could not be reached (${error.message}); no task was started`)

  /** Gives the task to the process again, until it watches (up to `followAlive.within` and a little more). */
  const givenAgain = (agentId: string, processId: string, taskId: string) =>
    Effect.orElseSucceed(assignments(agentId).Assign({ processId, taskId }), () => false).pipe(
      Effect.repeat({ until: (given) => given, schedule: Schedule.spaced("500 millis"), times: 15 })
    )

  /** The child `taskId` of the call: started and given to a watching process, or found in the journal. */
  const childOf = (taskId: string, agentId: string, prompt: string) =>
    Effect.gen(function*() {
      const known = yield* Effect.orDie(journal.run(taskId))
      if (known !== undefined && known.agentId !== agentId) {
        return yield* failed(agentId, `this call started task ${taskId} of agent ${known.agentId} already`)
      }
      if (known !== undefined) {
        // Given again to its process, in case a runner lost the first giving (a process that follows it
        // already takes it up afresh), beside the wait: its watch may be on its way to the next owner.
        if (Journal.isOpen(known)) yield* Effect.fork(givenAgain(agentId, known.processId, taskId))
        return { started: false, processId: known.processId }
      }
      const { processId } = yield* Effect.mapError(assignments(agentId).Pick(), unreachable(agentId))
      if (processId === null) {
        return yield* failed(
          agentId,
          `agent ${agentId} has no serving process connected (none watches for tasks to run); no task was started`
        )
      }
      yield* Effect.mapError(
        engine.start({ taskId, agentId, processId, prompt }),
        (refused) => failed(agentId, `${refused.message}; no task was started`)
      )
      const given = yield* Effect.orElseSucceed(assignments(agentId).Assign({ processId, taskId }), () => false)
      if (!given) yield* Effect.logWarning(`task ${taskId}: process ${processId} of agent ${agentId} no longer watches`)
      return { started: true, processId }
    })

  /**
   * The child's final event once its owner journaled it (undefined: the journal no longer holds it), or the
   * approvals it waits for once it suspended (read from the journal too, whichever runner holds it).
   */
  const settledOf = (taskId: string): Effect.Effect<AgentCalls.Settled> =>
    Effect.flatMap(Effect.orDie(journal.run(taskId)), (run): Effect.Effect<AgentCalls.Settled, Open> => {
      if (run === undefined || !Journal.isOpen(run)) {
        return Effect.map(Effect.orDie(Schema.decode(FinalJson)(run?.final)), (final) => ({ _tag: "Ended", final }))
      }
      // Suspended with nothing left to decide: its owner is about to go on (told by `Decided`).
      return Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.flatMap(waitingIn(journal, run, now), (waiting) =>
          waiting.length === 0 ? Effect.fail(new Open()) : Effect.succeed({ _tag: "Waiting", pending: waiting })))
    }).pipe(
      // The schedule never ends: `Open` is never its outcome.
      Effect.retry(endPolled),
      Effect.orDie
    )

  /** Cancels the task on its owner, its agent read from the journal (one the journal does not hold: nothing to do). */
  const cancelElsewhere = (taskId: string, by: string, reason: string): Effect.Effect<void> =>
    Effect.flatMap(Effect.orDie(journal.run(taskId)), (run) =>
      run === undefined || !Journal.isOpen(run) ? Effect.void : engine.cancel(run.agentId, taskId, by, reason))

  const execute = (parent: AgentCalls.Parent): AgentCalls.Execute => (call, agentId, prompt) =>
    Effect.gen(function*() {
      const child = childTaskId(parent.taskId, call.toolCallId)
      const { processId, started } = yield* childOf(child, agentId, prompt)
      if (started) {
        yield* Effect.logInfo(`task ${parent.taskId}: call ${call.toolCallId} started task ${child} of agent ${agentId}`)
      }
      return yield* AgentCalls.awaitChild(parent, call, agentId, child, {
        // Given to another process of its agent if the one it was given to goes away while it waits.
        settled: Effect.raceFirst(settledOf(child), regiving(assignments, agentId, child, processId)),
        // A parent cancelled cancels its child (`TaskCancelled`, by whoever cancelled the parent); else it is stopped.
        stop: (reason) =>
          parent.final?._tag === "TaskCancelled"
            ? cancelElsewhere(child, parent.final.by, `its parent task ${parent.taskId} was cancelled`)
            : engine.stop(agentId, child, reason)
      })
    })

  return {
    ...local,
    reach: (agentId) =>
      Effect.map(
        Effect.orElseSucceed(assignments(agentId).Pick(), () => ({ processId: null, tools: [] })),
        ({ processId, tools }) => ({ connected: processId !== null, tools })
      ),
    execute,
    decidedElsewhere: engine.decided,
    cancelElsewhere
  }
}
