/**
 * A runner that drains (design: Cluster mode): on SIGTERM (a deploy, a supervisor's stop) a runner is
 * draining (`Drain.draining`, what a readiness check reads), takes no more shards and hands the ones it
 * holds over to the other runners through the engine's own shutdown (its runner unregistered, its
 * entities stopped shard by shard, each shard's lock released as soon as its entities stopped), lets
 * the calls in flight on it finish, all within `RunnerOptions.drainGrace`, then stops as before. Each
 * step is logged. The tasks it held go on at their shards' next owners from the journal; the serving
 * processes connected to it keep their connection until it stops, and then go on to another runner.
 */
import * as Entity from "@effect/cluster/Entity"
import type { RunnerAddress } from "@effect/cluster/RunnerAddress"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Sharding from "@effect/cluster/Sharding"
import type * as ShardId from "@effect/cluster/ShardId"
import * as Rpc from "@effect/rpc/Rpc"
import { Clock, Context, Deferred, Duration, Effect, ExecutionStrategy, Exit, Layer, Runtime, Scope } from "effect"
import { formatDuration } from "../internal/util/duration.js"
import * as Health from "./Health.js"

/** A runner's drain: whether it is draining, and the drain itself. */
export class Drain extends Context.Tag("agent-tools/platform/ClusterDrain/Drain")<Drain, {
  /** True from the moment the runner begins to drain: not ready for new work (a readiness check reads it). */
  readonly draining: Effect.Effect<boolean>
  /** Drains the runner (once; a second call waits for the first): done when it may stop. */
  readonly drain: (why: string) => Effect.Effect<void>
  /** A call in flight on this runner: a drain waits for it (within its grace). */
  readonly track: <A, E, R>(call: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}>() {}

/**
 * The shards whose locks this runner holds, as its runner storage acquired, refreshed and released them; and
 * those it acquired since they were last taken (`acquired`), `wake` opened at each acquisition: their open
 * tasks are taken up from the journal (Cluster.ts).
 */
export class HeldShards extends Context.Tag("agent-tools/platform/ClusterDrain/HeldShards")<HeldShards, {
  readonly held: Set<string>
  readonly acquired: Array<ShardId.ShardId>
  readonly wake: Effect.Latch
}>() {}

/** The default of `RunnerOptions.drainGrace`. */
export const defaultDrainGrace = Duration.seconds(10)

/**
 * The engine's runner storage (`RunnerStorage`, below), the shards it holds kept in `HeldShards`: a
 * drain waits until none is held.
 */
export const layerStorage = Layer.effect(
  RunnerStorage.RunnerStorage,
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.RunnerStorage
    const { acquired: fresh, held, wake } = yield* HeldShards
    const keep = (shards: ReadonlyArray<{ toString(): string }>) => {
      held.clear()
      for (const shard of shards) held.add(shard.toString())
    }
    return RunnerStorage.RunnerStorage.of({
      ...storage,
      acquire: (address, shardIds) =>
        Effect.tap(storage.acquire(address, shardIds), (acquired) => {
          for (const shard of acquired) held.add(shard.toString())
          if (acquired.length === 0) return
          fresh.push(...acquired)
          wake.unsafeOpen()
        }),
      refresh: (address, shardIds) => Effect.tap(storage.refresh(address, shardIds), keep),
      release: (address, shardId) => Effect.tap(storage.release(address, shardId), () => held.delete(shardId.toString())),
      releaseAll: (address: RunnerAddress) => Effect.tap(storage.releaseAll(address), () => held.clear())
    })
  })
)

/** No shard held yet. */
export const layerHeld: Layer.Layer<HeldShards> = Layer.sync(
  HeldShards,
  () => ({ held: new Set<string>(), acquired: [], wake: Effect.unsafeMakeLatch(false) })
)

/**
 * An entity of no use but its registration: closing its scope is how a drain begins the engine's
 * shutdown (`ShardingConfig.preemptiveShutdown`), which unregisters the runner and hands its shards over.
 */
const DrainEntity = Entity.make("agent-tools/Drain", [Rpc.make("Nothing")])

/** Waits (every 50 ms) until `done`, or `within` passes: whether it was done. */
const until = (done: () => boolean, within: Duration.Duration) =>
  Effect.suspend(() => done() ? Effect.succeed(true) : Effect.as(Effect.sleep("50 millis"), false)).pipe(
    Effect.repeat({ until: (ok) => ok }),
    Effect.timeoutTo({ duration: within, onSuccess: () => true, onTimeout: () => false })
  )

/**
 * The drain of this runner (`Drain`), `grace` its longest; on SIGTERM the process drains before it stops
 * (`onSigterm`). Needs the cluster (`Sharding`) and the shards it holds (`HeldShards`).
 */
export const layer = (grace: Duration.DurationInput = defaultDrainGrace) =>
  Layer.scoped(
    Drain,
    Effect.gen(function*() {
      const { held } = yield* HeldShards
      const sharding = yield* Sharding.Sharding
      const graceDuration = Duration.decode(grace)
      // Closed by a drain: the engine's shutdown begins (its runner unregistered, its shards handed over).
      const entityScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
      yield* Layer.buildWithScope(DrainEntity.toLayer({ Nothing: () => Effect.void }), entityScope).pipe(
        Effect.provideService(Sharding.Sharding, sharding)
      )
      const done = yield* Deferred.make<void>()
      let draining = false
      let inFlight = 0

      const steps = (why: string) =>
        Effect.gen(function*() {
          const since = yield* Clock.currentTimeMillis
          const elapsed = Effect.map(Clock.currentTimeMillis, (now) => formatDuration(Duration.millis(now - since)))
          yield* Effect.logInfo(
            `draining (${why}): not ready; this runner takes no more shards and hands its ${held.size} over to the ` +
              `other runners, its calls in flight ${inFlight}, within ${formatDuration(graceDuration)}`
          )
          yield* Scope.close(entityScope, Exit.void)
          const handed = yield* until(() => held.size === 0, graceDuration)
          yield* handed
            ? Effect.flatMap(elapsed, (after) => Effect.logInfo(`draining: shards handed over in ${after}`))
            : Effect.logWarning(`draining: ${held.size} shards still held after the grace; their locks expire after it stops`)
          const left = Duration.millis(Math.max(0, Duration.toMillis(graceDuration) - ((yield* Clock.currentTimeMillis) - since)))
          const before = inFlight
          const finished = yield* until(() => inFlight === 0, left)
          yield* finished
            ? Effect.logInfo(`draining: ${before} calls in flight finished`)
            : Effect.logWarning(`draining: ${inFlight} calls still in flight after the grace are interrupted`)
          yield* Effect.flatMap(elapsed, (after) => Effect.logInfo(`drained in ${after}; stopping`))
        })

      // The process's readiness (Health.ts) says it is not ready from the drain's first step.
      const flag = yield* Health.Draining
      const drain = (why: string) =>
        Effect.suspend(() => {
          if (draining) return Deferred.await(done)
          draining = true
          return Effect.zipRight(flag.set(true), Effect.ensuring(steps(why), Deferred.done(done, Exit.void)))
        })
      const track = <A, E, R>(call: Effect.Effect<A, E, R>) =>
        Effect.acquireUseRelease(Effect.sync(() => inFlight++), () => call, () => Effect.sync(() => inFlight--))
      yield* onSigterm(drain)
      return Drain.of({ draining: Effect.sync(() => draining), drain, track })
    })
  )

/**
 * While the layer lives, SIGTERM drains first: the process's own SIGTERM listeners (the runtime's, that
 * stop the program) are set aside and called once the drain is done, or at a second SIGTERM; with none,
 * the signal is raised again once drained, to end the process as it would have.
 */
const onSigterm = (drain: (why: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const runtime = yield* Effect.runtime<never>()
    const others = process.listeners("SIGTERM")
    let handedOn = false
    const handOn = () => {
      if (handedOn) return
      handedOn = true
      process.removeListener("SIGTERM", onTerm)
      for (const listener of others) process.on("SIGTERM", listener)
      if (others.length === 0) process.kill(process.pid, "SIGTERM")
      else for (const listener of others) listener("SIGTERM")
    }
    let signalled = false
    function onTerm() {
      if (signalled) return handOn()
      signalled = true
      Runtime.runFork(runtime)(Effect.ensuring(drain("SIGTERM"), Effect.sync(handOn)))
    }
    for (const listener of others) process.removeListener("SIGTERM", listener)
    process.on("SIGTERM", onTerm)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        if (handedOn) return
        handedOn = true
        process.removeListener("SIGTERM", onTerm)
        for (const listener of others) if (!process.listeners("SIGTERM").includes(listener)) process.on("SIGTERM", listener)
      })
    )
  })
