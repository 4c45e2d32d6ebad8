/**
 * The platform past one machine (design: Cluster mode): each platform process is a runner of an
 * `@effect/cluster` cluster whose storage is one PostgreSQL (`SqlMessageStorage`, `SqlRunnerStorage`;
 * runners talk over `NodeClusterSocket`). What this module adds is the mapping, not an engine:
 *
 * - an agent is an entity sharded by agent id: its registrations, heartbeats, the manifests of its
 *   live processes and its lifecycle budget live on the runner that owns its shard, so the budget
 *   is counted per agent whichever runner a call reaches;
 * - a task is an entity sharded by task id: its `Run` message runs its loop on the owner of its shard,
 *   journaling to the same database; when a runner dies, its shards move and the new owner takes up
 *   their open tasks from the journal, whose loops go on from there (a journaled turn is not asked
 *   again). An answer is journaled by the task's owner before the loop sees it, the first one
 *   winning (a duplicate is dropped there); events stream to whichever runner the submitting
 *   process is connected to, which attaches again when the stream breaks or goes quiet;
 * - a task's `exec_agent` call starts a task of another agent as a submitted task is started, given
 *   to a process of that agent watching on any runner (ClusterAgentCalls.ts).
 *
 * The protocol, its handlers' authorization and the WebSocket server are the embedded platform's
 * (Handlers.ts, WebSocket.ts): a runner serves `Server.layerWebSocket` over `layerHandlers` here
 * instead of `Server.layerHandlers`; what only a runner does with a task is ClusterTasks.ts.
 *
 * Made of a module a subject, re-exported here where others import them: the entities (ClusterEntities.ts),
 * a runner's options and its `Sharding` (ClusterRunner.ts), the agents' registrations and the schema
 * (ClusterDatabase.ts), the journal as a runner's tasks use it (ClusterJournal.ts), starting a task
 * (ClusterStart.ts), the follower of a task's events (ClusterFollow.ts) and the front (ClusterFront.ts);
 * here, the entities' handlers and the layers.
 */
import * as Entity from "@effect/cluster/Entity"
import * as ShardId from "@effect/cluster/ShardId"
import * as Sharding from "@effect/cluster/Sharding"
import { Cause, Clock, Context, Effect, Exit, Layer, Mailbox, Option, Stream } from "effect"
import * as SqlStore from "../internal/sql/store.js"
import * as Journal from "../Journal.js"
import { isTaskEnd, type TaskEvent, type UnknownTask } from "../protocol/Protocol.js"
import { Timing } from "../Timing.js"
import { OperatorListener } from "./api/Listener.js"
import { operatorListener } from "./api/Setup.js"
import { followAlive, taskEntityIdle } from "./ClusterTiming.js"
import * as ClusterAgentCalls from "./ClusterAgentCalls.js"
import { agentsOn } from "./ClusterAgentsView.js"
import { makePrune, makeRegistry, type Registry, requireMigrated } from "./ClusterDatabase.js"
import { AgentEntity, Alive, type AttachPayload, holdsShardOf, orDieOnEngine, TaskEntity } from "./ClusterEntities.js"
import { Drain, HeldShards } from "./ClusterDrain.js"
import { clusterBackend } from "./ClusterFront.js"
import * as ClusterRoutes from "./ClusterRoutes.js"
import { runnerJournal } from "./ClusterJournal.js"
import { layerSharding, type RunnerOptions } from "./ClusterRunner.js"
import { makeRuns, makeStart, type Runs } from "./ClusterStart.js"
import * as ClusterTasks from "./ClusterTasks.js"
import * as Handlers from "./Handlers.js"
import * as Health from "./Health.js"
import { limitsOf, type Options } from "./Options.js"
import * as Parts from "./Parts.js"

export { DatabaseRefused, layerClient, migrate, NotMigrated, requireMigrated } from "./ClusterDatabase.js"
export { Drain } from "./ClusterDrain.js"
export { AgentEntity, TaskEntity } from "./ClusterEntities.js"
export { layerSharding, type RunnerOptions, shardingConfig } from "./ClusterRunner.js"

// ---------------------------------------------------------------------------------------------
// The entities' handlers.

/**
 * The events of a task held by this runner (taken up from the journal if need be), and `Alive` between
 * them. Its final event goes on once its end is in the journal: a client that saw the task end may
 * submit the next at once, and the agent's tasks not ended are counted from the journal.
 */
const attachedHere = (
  tasks: ClusterTasks.ClusterTasks,
  taskId: string,
  payload: AttachPayload
): Stream.Stream<TaskEvent | typeof Alive.Type, UnknownTask> =>
  Stream.unwrapScoped(Effect.map(
    tasks.attachHeld({
      agentId: payload.agentId,
      taskId,
      events: payload.events,
      follower: { attachmentId: payload.attachmentId, reattach: payload.reattach },
      connection: payload.connection,
      fromStart: payload.fromStart
    }),
    (mailbox) =>
      Stream.merge(
        Mailbox.toStream(mailbox).pipe(Stream.mapEffect((event): Effect.Effect<TaskEvent> =>
          isTaskEnd(event)
            ? Effect.as(tasks.endJournaled(payload.agentId, taskId), event)
            : Effect.succeed(event)
        )),
        Stream.as(Stream.tick(followAlive.every), Alive.make({})),
        { haltStrategy: "left" }
      )
  ))

/** The entities' handlers, on this runner's parts: what a runner does for the shards it owns. */
const layerEntities = (parts: Parts.Parts, tasks: ClusterTasks.ClusterTasks, registry: Registry, runs: Runs) =>
  Layer.mergeAll(
    // The agent's watchers live where its registrations do: its entity is held first (see `layerEntity`).
    Layer.unwrapEffect(Effect.map(AgentEntity.client, (agents) =>
      ClusterAgentCalls.layerEntity({ ...parts, live: parts.agents.live }, (agentId) =>
        Effect.ignore(agents(agentId).Tools({ processId: "" }))))),
    AgentEntity.toLayer(Effect.gen(function*() {
      // This runner now holds the agent: its processes and its budget's window as the database has them.
      const { entityId: agentId } = yield* Entity.CurrentAddress
      const now = yield* Clock.currentTimeMillis
      for (const process of yield* registry.load(agentId)) parts.agents.restore(agentId, process)
      parts.agents.restoreLifecycle(agentId, yield* registry.lifecycle(agentId, now - parts.limits.lifecycleWindowMillis))
      /** A lifecycle call the budget let through (refused ones are not counted) is counted in the database too. */
      const counted = <A, E extends { readonly _tag: string }>(call: Effect.Effect<A, E>, at: number) =>
        Effect.onExit(call, (exit) =>
          Exit.isSuccess(exit) || Option.exists(Cause.failureOption(exit.cause), (e) => e._tag !== "LifecycleBudgetExceeded")
            ? registry.counted(agentId, at)
            : Effect.void)
      return AgentEntity.of({
        Register: ({ payload }) =>
          Effect.flatMap(Clock.currentTimeMillis, (at) =>
            Effect.tap(counted(parts.agents.register({ agentId, ...payload }), at), () =>
              registry.registered(agentId, payload.processId, payload.manifest, payload.manifestHash, at))),
        Heartbeat: ({ payload }) =>
          Effect.flatMap(Clock.currentTimeMillis, (at) =>
            Effect.tap(counted(parts.agents.heartbeat({ agentId, ...payload }), at), ({ known }) =>
              known ? registry.heard(agentId, payload.processId, at) : Effect.void)),
        Deregister: ({ payload }) =>
          Effect.flatMap(Clock.currentTimeMillis, (at) =>
            Effect.tap(counted(parts.agents.deregister({ agentId, ...payload }), at), () =>
              registry.deregistered(agentId, payload.processId))),
        Tools: ({ payload }) => Effect.map(Clock.currentTimeMillis, (now) => parts.agents.visible(agentId, payload.processId, now))
      })
    })),
    // A task's entity is let go `taskEntityIdle` after its last message (its `Run` ended, its followers gone): it
    // keeps nothing of its own (ClusterTasks.ts keeps the tasks), and a later message makes it anew.
    TaskEntity.toLayer({
      Run: ({ address }) => tasks.runHere(address.entityId),
      TakeUp: ({ address, payload }) => runs.runHere(address.entityId, payload.agentId),
      Attach: ({ address, payload }) => attachedHere(tasks, address.entityId, payload),
      Answer: ({ payload }) => tasks.answer(payload.agentId, payload.result, payload.connection),
      Decide: ({ address, payload }) =>
        Effect.zipRight(
          tasks.heldBy(payload.agentId, address.entityId),
          parts.tasks.decide(payload.agentId, { ...payload, taskId: address.entityId })
        ),
      Cancel: ({ address, payload }) => parts.tasks.cancel(payload.agentId, address.entityId, payload.by, payload.reason),
      Stop: ({ address, payload }) => parts.tasks.stop(payload.agentId, address.entityId, payload.reason),
      Decided: ({ address, payload }) => parts.tasks.decided(address.entityId, payload.toolCallId)
    }, { concurrency: "unbounded", maxIdleTime: taskEntityIdle })
  )

// ---------------------------------------------------------------------------------------------
// Layers.

/**
 * The protocol's handlers on a runner (what `Server.layerWebSocket` serves): this runner's parts for
 * the shards it owns, the entities registered with the cluster, and the front. Needs the cluster
 * (`Sharding`), the run journal on the cluster's database and the tasks' `LanguageModel`.
 * Shutdown, the reverse of this order: the front's layers, the entities (unregistered, their tasks
 * let go for the next owner), the registry's sweep, then the parts (Parts.ts); the journal and the
 * cluster, provided from outside, close after.
 */
export const layerHandlers = (options: Options & { readonly runner?: RunnerOptions | undefined }) =>
  Layer.scopedContext(Effect.gen(function*() {
    const journal = runnerJournal(yield* Journal.Journal, yield* makePrune)
    const runs = yield* makeRuns
    const started = yield* makeStart(limitsOf(options), options.runner?.placement, runs)
    const taskEntities = yield* TaskEntity.client
    // Agent calls on the cluster: the task a call starts is started as a submitted one, stopped by its owner.
    const engine: ClusterAgentCalls.Engine = {
      assignments: yield* ClusterAgentCalls.AssignmentsEntity.client,
      start: (task) => Effect.asVoid(started(task)),
      stop: (agentId, taskId, reason) =>
        orDieOnEngine(SqlStore.whileBusy(taskEntities(taskId).Stop({ agentId, reason }, { discard: true }))),
      cancel: (agentId, taskId, by, reason) =>
        orDieOnEngine(SqlStore.whileBusy(taskEntities(taskId).Cancel({ agentId, by, reason }))).pipe(
          Effect.catchTag("UnknownTask", () => Effect.void),
          Effect.asVoid
        ),
      decided: (taskId, toolCallId) =>
        orDieOnEngine(SqlStore.whileBusy(taskEntities(taskId).Decided({ toolCallId }, { discard: true }))),
      journal: yield* Journal.Journal
    }
    // A task's calls of tools its holder does not serve go to the agent's workers on any runner (ClusterRoutes.ts).
    const workers = yield* ClusterRoutes.make(engine.assignments)
    const parts = yield* Parts.makeParts(options, journal, {
      host: (local) => ClusterAgentCalls.host(local, engine),
      routing: workers
    })
    workers.bind(parts.tasks.routes.connections)
    const tasks = yield* ClusterTasks.make(parts.tasks, journal)
    const registry = yield* makeRegistry
    // A process silent for `evictSilentAfter` intervals is forgotten by the database too.
    yield* Effect.forkScoped(Effect.schedule(
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        registry.forgetSilent(now - parts.limits.evictAfterMillis, now - parts.limits.lifecycleWindowMillis)),
      (yield* Timing).platformSweep
    ))
    const sharding = yield* Sharding.Sharding
    const takeUp = takeUpOpen(journal, tasks, holdsShardOf(sharding), runs)
    // A task journaled whose `Run` was never sent (its runner died in between) is taken up within a sweep.
    yield* Effect.forkScoped(Effect.schedule(takeUp, (yield* Timing).platformSweep))
    // Registered after the parts exist, so unregistered (their tasks let go) before the parts stop.
    yield* Layer.build(layerEntities(parts, tasks, registry, runs))
    // The open tasks of the shards this runner acquires (at its start, from a runner gone, after an outage) run here.
    yield* Effect.forkScoped(takeUpAcquired(yield* HeldShards, sharding, takeUp))
    const backend = yield* clusterBackend(tasks, started)
    // The operator API, with operator tokens (docs: operations): the journal's reads are the whole cluster's; a
    // decision and a cancel reach the task's owner; the agents are the cluster's (ClusterAgentsView.ts); the events this runner's.
    const operator = yield* operatorListener({
      options,
      parts,
      backend,
      journal,
      cancel: (agentId, taskId, by, reason) => backend.cancel(agentId, { taskId, by, reason }),
      agents: agentsOn({
        registry,
        journal,
        assignments: engine.assignments,
        options,
        limits: parts.limits,
        heldHere: () => parts.agents.agentIds()
      })
    })
    // Readiness: its shards, its database, and not draining (the drain, ClusterDrain.ts, says so to `Health.Draining`).
    const context = Context.add(
      Context.add(yield* Layer.build(Handlers.layerOf(backend, parts, options)), Drain, yield* Drain),
      Health.Readiness,
      Health.cluster(
        yield* Sharding.Sharding,
        Array.from({ length: options.runner?.shardsPerGroup ?? 300 }, (_, i) => ShardId.make("default", i + 1)),
        journal
      )
    )
    return operator === undefined ? context : Context.add(context, OperatorListener, operator)
  }))

/**
 * The open tasks of the journal whose shard this runner holds and whose `Run` does not hold them here: their
 * `Run` is sent (again; a second one of a task held here ends at once). So a task goes on at the next owner of
 * its shard (taken at once, `takeUpAcquired`), and one journaled whose `Run` was never sent (a submit whose runner
 * died between journaling the task and sending it, a ghost no runner would ever run, counted against its agent's
 * limits for ever) is taken up by the sweep. Logged for each task taken up so.
 */
const takeUpOpen = (
  journal: Journal.Journal["Type"],
  tasks: ClusterTasks.ClusterTasks,
  holdsShard: (taskId: string) => boolean,
  runs: Runs
): Effect.Effect<void> =>
  Effect.gen(function*() {
    // The open platform tasks alone (`kind` task): not the ended ones the journal keeps (`keepEndedTasks`), thousands a
    // minute at load.
    const open = yield* Effect.orElseSucceed(journal.openTasks, () => [] as ReadonlyArray<Journal.RunRecord>)
    for (const task of open) {
      if (!holdsShard(task.runId) || tasks.runsHere(task.runId)) continue
      yield* runs.runHere(task.runId, task.agentId)
      yield* Effect.logInfo(`task ${task.runId} of agent ${task.agentId}: journaled but not running here; its Run is sent`)
    }
  })

/**
 * Whenever the runner acquires shards, once the engine holds them (it acquires their locks first), their
 * open tasks are taken up (`takeUp`): what the engine did when a task's `Run` was a persisted message.
 */
const takeUpAcquired = (
  shards: HeldShards["Type"],
  sharding: Sharding.Sharding["Type"],
  takeUp: Effect.Effect<void>
): Effect.Effect<never> =>
  Effect.gen(function*() {
    yield* shards.wake.await
    shards.wake.unsafeClose()
    const acquired = shards.acquired.splice(0)
    // Held by the engine, or let go again meanwhile (their lock lost at once): up to a few seconds.
    yield* Effect.sleep("20 millis").pipe(
      Effect.repeat({ until: () => acquired.every((shard) => sharding.hasShardId(shard) || !shards.held.has(shard.toString())) }),
      Effect.timeoutOption("5 seconds")
    )
    yield* takeUp
  }).pipe(Effect.forever)

/**
 * A runner: the handlers on the cluster, the journal on the same database. Needs the `SqlClient`
 * (PostgreSQL through `@effect/sql-pg`) and the tasks' `LanguageModel`; the schema must exist
 * (`migrate`): it fails with `NotMigrated` otherwise, before anything is written.
 */
export const layer = (options: Options & { readonly runner?: RunnerOptions | undefined }) =>
  layerHandlers(options).pipe(
    Layer.provide(layerSharding(options.runner ?? {})),
    Layer.provide(Journal.layerSqlClient),
    Layer.provide(Layer.effectDiscard(requireMigrated))
  )
