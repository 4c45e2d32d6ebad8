/**
 * A runner of the cluster (Cluster.ts): where the other runners reach it and the shards' layout
 * (`RunnerOptions`), its sharding config, its own connections to them, and the cluster (`Sharding`)
 * for it on the `SqlClient` in context.
 */
import { RunnerAddress } from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as Socket from "@effect/platform/Socket"
import * as RpcClient from "@effect/rpc/RpcClient"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { type Duration, Effect, Layer, Option } from "effect"
import * as ClusterDrain from "./ClusterDrain.js"
import { clusterFailover } from "./ClusterTiming.js"
import * as ClusterWake from "./ClusterWake.js"

/** Where this runner is reached by the others, and the shards' layout. */
export interface RunnerOptions {
  /** The host the other runners reach this one at. Default 127.0.0.1. */
  readonly host?: string | undefined
  /** The port runners talk on (msgpack over TCP). Default 34431. */
  readonly port?: number | undefined
  /** Shards per group; every runner of a cluster must agree. Default 300. */
  readonly shardsPerGroup?: number | undefined
  /**
   * How often the engine reads its storage for messages even when nothing woke it: the safety net
   * under the wake-up channel (ClusterWake.ts). Default `ClusterTiming.clusterFailover`'s.
   */
  readonly messagePollInterval?: Duration.DurationInput | undefined
  /**
   * Where a new task runs. `"submitter"` (the default): on the runner its serving process is connected
   * to (its id drawn among those whose shard that runner holds), so its events and answers stay in that
   * runner's process; tasks then spread as the serving processes' connections do. `"id"`: on whichever
   * runner holds its id's shard, spread evenly whatever the connections (for serving processes that all
   * reach one runner), each call then going through the engine to that runner and back.
   */
  readonly placement?: "submitter" | "id" | undefined
  /**
   * How long a runner told to stop (SIGTERM) may take to drain: hand its shards over and let its calls
   * in flight finish (ClusterDrain.ts), before it stops anyway. Default 10 s.
   */
  readonly drainGrace?: Duration.DurationInput | undefined
}

/**
 * The cluster's sharding config for this runner: its address, the failover timings of
 * `ClusterTiming.clusterFailover`, and a local message not serialized.
 */
export const shardingConfig = (options: RunnerOptions): Partial<ShardingConfig.ShardingConfig["Type"]> => ({
  runnerAddress: Option.some(RunnerAddress.make({ host: options.host ?? "127.0.0.1", port: options.port ?? 34431 })),
  shardsPerGroup: options.shardsPerGroup ?? 300,
  ...clusterFailover,
  // A message to an entity of this runner is handed over as it is, not encoded and decoded first: the
  // engine's default does that to catch, in tests, a payload that could not cross to another runner; ours
  // cross between runners in the tests of several runners.
  simulateRemoteSerialization: false,
  ...(options.messagePollInterval === undefined ? {} : { entityMessagePollInterval: options.messagePollInterval })
})

/**
 * The runners' own connections (msgpack over TCP), as `NodeClusterSocket` makes them but with Nagle's
 * algorithm off (`noDelay`) on both ends. A message between runners is a few small writes, each
 * answered: with Nagle on, a write waits for the peer's ack of the one before, which the peer
 * delays (up to 40-200 ms on Linux): a call of a task held by another runner than the one its
 * serving process is connected to took about 265 ms (three runners in processes of their own, tasks
 * one at a time), 10-50 ms with `noDelay`.
 */
const layerRunnerSockets = (config: Partial<ShardingConfig.ShardingConfig["Type"]>) => {
  const clientProtocol = Layer.effect(
    Runners.RpcClientProtocol,
    Effect.map(RpcSerialization.RpcSerialization, (serialization) => (address: RunnerAddress) =>
      NodeSocket.makeNet({ openTimeout: 1000, timeout: 5500, host: address.host, port: address.port, noDelay: true }).pipe(
        Effect.flatMap((socket) =>
          RpcClient.makeProtocolSocket().pipe(
            Effect.provideService(Socket.Socket, socket),
            Effect.provideService(RpcSerialization.RpcSerialization, serialization)
          )
        ),
        Effect.orDie
      ))
  )
  const listen = Option.getOrThrow(Option.orElse(config.runnerListenAddress ?? Option.none(), () => config.runnerAddress ?? Option.none()))
  const socketServer = NodeSocketServer.layer({ host: listen.host, port: listen.port, noDelay: true })
  const health = RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(clientProtocol))
  return SocketRunner.layer.pipe(
    Layer.provide([socketServer, clientProtocol]),
    Layer.provide(health),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
}

/**
 * The cluster (`Sharding`) for this runner, its storage on the `SqlClient` in context, and its drain
 * (`ClusterDrain.Drain`: on SIGTERM it hands its shards over before it stops).
 */
export const layerSharding = (options: RunnerOptions) => {
  const config = shardingConfig(options)
  // The engine's SQL storage, its messages announced to the runners that hold their shards (ClusterWake.ts),
  // the shards it holds known to the drain.
  const runnerStorage = ClusterDrain.layerStorage.pipe(Layer.provide(Layer.orDie(SqlRunnerStorage.layer)))
  const storage = Layer.merge(ClusterWake.layerStorage, runnerStorage)
  return Layer.merge(ClusterWake.layerListen, ClusterDrain.layer(options.drainGrace)).pipe(
    Layer.provideMerge(layerRunnerSockets(config)),
    Layer.provide(storage),
    Layer.provide(ShardingConfig.layerFromEnv(config)),
    Layer.provideMerge(ClusterWake.layerHolder),
    Layer.provideMerge(ClusterDrain.layerHeld)
  )
}
