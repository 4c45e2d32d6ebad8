/**
 * Wake, don't poll (design: Cluster mode): a persisted message that lands in the cluster's PostgreSQL
 * reaches the runner that owns its shard at once, through PostgreSQL's `LISTEN`/`NOTIFY`. A small
 * layer over the engine's own SQL storage, not a second queue:
 *
 * - a runner that stores a message for a shard it does not hold announces the shard on
 *   `wakeChannel` once the message is stored (a message for its own shard, the engine reads at once
 *   itself, as it does for one another runner told it of over their socket);
 * - every runner listens on the channel, and on a shard it holds asks the engine to read its
 *   storage now (`Sharding.pollStorage`).
 *
 * The engine's own poll (`entityMessagePollInterval`) stays, as the safety net: a notification lost
 * (the listening connection broke, the database restarted) costs that interval, never the message.
 * Without a `PgClient` (another database), nothing is announced and the poll alone delivers.
 */
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as Sharding from "@effect/cluster/Sharding"
import { ShardId } from "@effect/cluster/ShardId"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlClient from "@effect/sql/SqlClient"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schedule, Stream } from "effect"
import { clusterWake } from "./ClusterTiming.js"

/** The PostgreSQL channel a stored message's shard is announced on. */
export const wakeChannel = "agent_tools_cluster_messages"

/** The shards this process holds, once its cluster (`Sharding`) is up: none are known before. */
export class Holder extends Context.Tag("agent-tools/platform/ClusterWake/Holder")<Holder, {
  current: Sharding.Sharding["Type"] | undefined
}>() {}

/** No shard known yet: `layerListen` fills it in. */
export const layerHolder: Layer.Layer<Holder> = Layer.sync(Holder, () => ({ current: undefined }))

/**
 * The engine's SQL message storage (`SqlMessageStorage.layer`), each message stored for a shard this
 * process does not hold then announced on `wakeChannel`, in the background (its sender does not
 * wait; a failed announcement is left to the poll).
 */
export const layerStorage = Layer.scoped(
  MessageStorage.MessageStorage,
  Effect.gen(function*() {
    const storage = yield* MessageStorage.MessageStorage
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(pg)) return storage
    const holder = yield* Holder
    const scope = yield* Effect.scope
    // `pg_notify`, not the client's `notify`: `@effect/sql-pg` 0.53 sends `NOTIFY channel, $1`, which
    // PostgreSQL refuses (NOTIFY takes no parameters).
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const announce = (shardId: ShardId): Effect.Effect<void> =>
      holder.current?.hasShardId(shardId) === true
        ? Effect.void
        : Effect.asVoid(Effect.forkIn(Effect.ignore(sql`SELECT pg_notify(${wakeChannel}, ${shardId.toString()})`), scope))
    return MessageStorage.MessageStorage.of({
      ...storage,
      saveRequest: (message) =>
        Effect.tap(
          storage.saveRequest(message),
          (result) => result._tag === "Success" ? announce(message.envelope.address.shardId) : Effect.void
        ),
      saveEnvelope: (message) => Effect.tap(storage.saveEnvelope(message), () => announce(message.envelope.address.shardId))
    })
  })
).pipe(Layer.provide(Layer.orDie(SqlMessageStorage.layer)))

/**
 * Listens on `wakeChannel` while the cluster lives: a shard this runner holds makes the engine read
 * its storage now. The listening connection is opened anew every `clusterWake.relisten` (one lost with
 * its database fails nothing), and every `clusterWake.retry` while it cannot be.
 */
export const layerListen = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const holder = yield* Holder
    holder.current = sharding
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (Option.isNone(pg)) return
    yield* pg.value.listen(wakeChannel).pipe(
      // A listening connection lost with its database fails nothing: it is opened anew now and then.
      Stream.interruptAfter(clusterWake.relisten),
      Stream.runForEach((shard) =>
        Effect.suspend(() => {
          const shardId = Option.liftThrowable(ShardId.fromString)(shard)
          return Option.isSome(shardId) && sharding.hasShardId(shardId.value) ? sharding.pollStorage : Effect.void
        })
      ),
      Effect.tapErrorCause((cause) => Effect.logDebug("the cluster's wake-up channel is closed; listening again", cause)),
      Effect.retry(Schedule.spaced(clusterWake.retry)),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
