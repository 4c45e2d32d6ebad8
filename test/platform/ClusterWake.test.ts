/**
 * Cluster mode's wake-up (platform/ClusterWake.ts) on a real PostgreSQL: a task's message stored by
 * someone else than its owner (as another runner or process stores a persisted one, `Stop` or
 * `Decided`, its socket notice lost; here a `Run`, which runners no longer store, but whose end the
 * test can see) reaches the owner at once through `LISTEN`/`NOTIFY`, the engine's poll set to a
 * minute; and a message whose notification is lost is still delivered, by the poll.
 */
import { assert, describe, it } from "@effect/vitest"
import { EntityAddress } from "@effect/cluster/EntityAddress"
import * as EntityId from "@effect/cluster/EntityId"
import * as Envelope from "@effect/cluster/Envelope"
import * as Message from "@effect/cluster/Message"
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as Headers from "@effect/platform/Headers"
import type * as Rpc from "@effect/rpc/Rpc"
import { Context, type Duration, Effect, Layer, Logger, LogLevel, Option, Schedule } from "effect"
import { Journal, LanguageModel } from "../../src/index.js"
import * as Cluster from "../../src/platform/Cluster.js"
import * as ClusterWake from "../../src/platform/ClusterWake.js"
import * as Pg from "../support/postgres.js"

const agentId = "agent-1"

/** A runner whose engine reads its storage on its own only every `messagePollInterval`; its `Sharding` and journal. */
const runner = (server: Pg.PostgresServer, messagePollInterval: Duration.DurationInput) =>
  Effect.gen(function*() {
    const port = yield* Effect.promise(() => Pg.freePort())
    const context = yield* Layer.build(
      Cluster.layerHandlers({ tokens: new Map([["tok-1", agentId]]) }).pipe(
        Layer.provideMerge(Cluster.layerSharding({ port, messagePollInterval })),
        Layer.provideMerge(Journal.layerSqlClient),
        Layer.provide(LanguageModel.layerScripted([{ text: "done" }], { perConversation: true })),
        Layer.provide(Pg.pgClient(server.url))
      )
    )
    return { sharding: Context.get(context, Sharding.Sharding), journal: Context.get(context, Journal.Journal) }
  })

/**
 * A task journaled and its `Run` stored through `storage`, as a process that is not its owner stores
 * it; resolves once its owner holds its shard and has read what it had stored.
 */
const storeTask = (
  { journal, sharding }: Effect.Effect.Success<ReturnType<typeof runner>>,
  storage: Layer.Layer<MessageStorage.MessageStorage>
) =>
  Effect.gen(function*() {
    const taskId = `task-${crypto.randomUUID()}`
    const entityId = EntityId.make(taskId)
    const shardId = sharding.getShardId(entityId, Cluster.TaskEntity.getShardGroup(entityId))
    // The owner holds the shard and has read its storage since: only a wake-up (or its poll) reads it again.
    yield* Effect.repeat(Effect.sync(() => sharding.hasShardId(shardId)), {
      until: (held) => held,
      schedule: Schedule.spaced("50 millis")
    })
    yield* Effect.sleep("1500 millis")
    yield* journal.started({ runId: taskId, kind: "task", agentId, processId: "p-1", prompt: "go", tools: [] })
    // The message as the engine's client makes it (Sharding.ts, `makeClient`).
    const rpc = Cluster.TaskEntity.protocol.requests.get("Run")! as unknown as Rpc.Any
    const payload = ((rpc as unknown as Rpc.AnyWithProps).payloadSchema as unknown as { make: (fields: object) => never })
      .make({ agentId })
    const requestId = yield* sharding.getSnowflake
    // Built for the test's scope: its announcements go out after the save, in the background.
    const messages = Context.get(yield* Layer.build(storage), MessageStorage.MessageStorage)
    const stored = yield* messages.saveRequest(
        new Message.OutgoingRequest({
          envelope: Envelope.makeRequest<Rpc.Any>({
            requestId,
            address: EntityAddress.make({ shardId, entityType: Cluster.TaskEntity.type, entityId }),
            tag: "Run" as never,
            payload,
            headers: Headers.empty
          }),
          context: Context.empty(),
          lastReceivedReply: Option.none(),
          rpc,
          respond: () => Effect.void
        })
      ).pipe(Effect.orDie)
    assert.strictEqual(stored._tag, "Success")
    return { taskId, at: performance.now() }
  })

/** Milliseconds until the journal holds `taskId` as ended (at most `within` ms, else undefined). */
const endedAfter = (journal: Journal.Journal["Type"], taskId: string, from: number, within: number) =>
  Effect.gen(function*() {
    while (performance.now() - from < within) {
      const run = yield* Effect.orDie(journal.run(taskId))
      if (run !== undefined && !Journal.isOpen(run)) return performance.now() - from
      yield* Effect.sleep("50 millis")
    }
    return undefined
  })

/** Another process's storage on the same database: its own shards known to be none. */
const storageOf = (server: Pg.PostgresServer, announced: boolean): Layer.Layer<MessageStorage.MessageStorage> =>
  (announced
    ? ClusterWake.layerStorage.pipe(Layer.provide(ClusterWake.layerHolder))
    : Layer.orDie(SqlMessageStorage.layer)).pipe(
      Layer.provide(ShardingConfig.layer(Cluster.shardingConfig({}))),
      Layer.provide(Pg.pgClient(server.url))
    )

describe("ClusterWake", () => {
  it.live("a message stored elsewhere reaches its owner at once, its engine polling once a minute", () =>
    Effect.gen(function*() {
      const server = yield* Pg.postgres()
      yield* Effect.provide(Cluster.migrate, Pg.pgClient(server.url))
      const owner = yield* runner(server, "60 seconds")
      const { at, taskId } = yield* storeTask(owner, storageOf(server, true))
      const millis = yield* endedAfter(owner.journal, taskId, at, 10_000)
      // Woken: a poll would have taken up to a minute.
      assert.isDefined(millis, "the task did not run within 10 s")
      console.log(`woken: ended ${millis!.toFixed(0)} ms after it was stored`)
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)), { timeout: 60_000 })

  it.live("a message whose notification is lost is delivered by the poll", () =>
    Effect.gen(function*() {
      const server = yield* Pg.postgres()
      yield* Effect.provide(Cluster.migrate, Pg.pgClient(server.url))
      const owner = yield* runner(server, "2 seconds")
      // Stored without a notification, as if it was lost on the way.
      const { at, taskId } = yield* storeTask(owner, storageOf(server, false))
      const millis = yield* endedAfter(owner.journal, taskId, at, 15_000)
      assert.isDefined(millis, "the task did not run within 15 s")
      console.log(`polled: ended ${millis!.toFixed(0)} ms after it was stored`)
    }).pipe(Effect.scoped, Logger.withMinimumLogLevel(LogLevel.Warning)), { timeout: 60_000 })
})
