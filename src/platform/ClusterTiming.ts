/**
 * Cluster mode's timings (design: Cluster mode): failover, the wake-up channel, a follower's liveness
 * and how long an answer waits for its task's owner. The platform's own, not the package's.
 */
import { Duration } from "effect"

/**
 * Cluster mode's failover (design: Cluster mode): a runner renews its shard locks every second and
 * they expire 5 s after its last renewal; runners check each other's health every 2 s. A dead
 * runner's shards move in about 3-6 s, well inside `redelivery`'s interval, so its tasks go on
 * elsewhere before a serving process would have seen their calls again. (The engine's defaults,
 * 35 s and 1 minute, took 33 s to fail over.) A stored message wakes its shard's owner at once (over
 * the runners' socket, or PostgreSQL's `NOTIFY`: platform/ClusterWake.ts); the engine's own read of
 * its storage every 5 s is only the safety net, for a notification lost on the way. A runner that
 * stops gives its entities 1 s to finish: a task's `Run` never finishes on its own (it runs the task),
 * so the engine's 15 s would hold every shutdown that long; interrupted, the task goes on at the
 * next owner from its journal. Runners read who the others are every second (the engine's default is
 * 3 s): a runner that drains (ClusterDrain.ts) is left out of the shards' layout that soon, by itself
 * and by the others, so that its shards move within a second or two of its SIGTERM.
 */
export const clusterFailover = {
  shardLockRefreshInterval: Duration.seconds(1),
  shardLockExpiration: Duration.seconds(5),
  runnerHealthCheckInterval: Duration.seconds(2),
  entityMessagePollInterval: Duration.seconds(5),
  entityTerminationTimeout: Duration.seconds(1),
  refreshAssignmentsInterval: Duration.seconds(1)
}

/**
 * Cluster mode's wake-up channel (platform/ClusterWake.ts): how often a runner opens its listening
 * connection anew (one lost with the database says nothing; a notification missed meanwhile is the
 * poll's), and how often it tries again while it cannot.
 */
export const clusterWake = {
  relisten: Duration.seconds(30),
  retry: Duration.seconds(1)
}

/**
 * Cluster mode: how often the runner that owns a task tells the runners following it that it is
 * there (`every`), and how long a follower waits without a word before it attaches again (`within`).
 * A runner's stream to a task can break without ending (its owner died, its shard moved): this is
 * what finds out, in seconds rather than at the serving process's next heartbeat.
 */
export const followAlive = {
  every: Duration.seconds(1),
  within: Duration.seconds(5)
}

/**
 * Cluster mode: how long the runner a serving process answers through waits for the task's owner to
 * take an answer. Past it the answer is let go (logged): the owner delivers the call again, and the
 * serving process answers it again from its dedupe store. An owner whose entity stopped under the
 * answer (its shard locks lost while the database was away) may never reply, and one answer waited
 * on for ever held every later answer of that serving process behind it.
 */
export const clusterAnswerWithin = Duration.seconds(5)

/**
 * Cluster mode: how long a task's entity stays after its last message. The engine's default (a minute)
 * kept every task of the last minute in memory (its entity's RPC server, scopes, fibers and latches):
 * a runner that had run a few hundred tasks spent its CPU collecting that garbage (one runner, 8 tasks
 * at a time: 11.7 ms of CPU a call against 10.2 ms with this and local messages not serialized, in the
 * same run, load average 10-14). A message for an entity let go makes it anew (a task entity holds nothing).
 */
export const taskEntityIdle = Duration.seconds(5)
