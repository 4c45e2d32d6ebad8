/**
 * The follower of a task (Cluster.ts): on the runner a process is connected to, the task's events from
 * its owner, wherever that is, attached again whenever its shard moves, with `TaskWaiting` while the
 * cluster's database cannot be reached; a task this runner owns is read in process (`Here`).
 */
import * as Sharding from "@effect/cluster/Sharding"
import * as SqlClient from "@effect/sql/SqlClient"
import { Cause, Data, Duration, Effect, Mailbox, Option, Schedule, type Scope, Stream } from "effect"
import type { Ids } from "../Ids.js"
import * as SqlStore from "../internal/sql/store.js"
import { endsTaskStream, type EventsWanted, isTaskEnd, type TaskEvent, type UnknownTask } from "../protocol/Protocol.js"
import { type Timing } from "../Timing.js"
import { followAlive } from "./ClusterTiming.js"
import { type Alive, type AttachPayload, holdsShardOf, type TaskEntity } from "./ClusterEntities.js"
import type * as ClusterTasks from "./ClusterTasks.js"
import { writtenStraight } from "./TaskDelivery.js"
import type { EventsWriter } from "./Wire.js"

/**
 * How long the follower of a task just submitted, on the runner that holds its shard, waits for the
 * task's `Run` (sent just before) to hold it there before it attaches through the engine.
 */
const runHeldWithin = Duration.seconds(2)

/** The stream from the task's owner broke, or ended before the task did: its shard moved; attach again. */
class Moved extends Data.TaggedError("Moved") {}

/**
 * Whether the cluster's database answers, for the task streams of this runner's front: `unreachable`
 * asks it now (why it cannot be reached, in the driver's words, or undefined if it answers within
 * 1 s); `away` is what the last of this runner's checks, every second while it lives, found.
 * `SELECT 1` that fails in any way, or dies, did not answer: whatever the driver's words for a
 * broken connection (some are not `SqlStore.isUnreachable`'s), the streams say so; and the check
 * cannot die, which would leave `away` at what it last found for the runner's life.
 */
export const watchDatabase = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Disconnected: an interrupted statement cancels itself with another statement (up to 5 s while the
  // server is away); the probe answers at its second, not when that cancel gives up.
  const unreachable: Effect.Effect<string | undefined> = sql`SELECT 1`.pipe(
    Effect.disconnect,
    Effect.timeoutOption("1 second"),
    Effect.matchCause({
      onFailure: (cause) => SqlStore.describe(Cause.squash(cause)),
      onSuccess: Option.match({ onNone: () => "no answer within 1 s", onSome: () => undefined })
    })
  )
  let away: string | undefined
  yield* Effect.forkScoped(Effect.repeat(
    Effect.flatMap(unreachable, (reason) => Effect.sync(() => (away = reason))),
    Schedule.spaced("1 second")
  ))
  return { unreachable, away: () => away }
})

/** What a task's stream says while the platform's database cannot be reached. */
const waitingEvent = (taskId: string, reason: string): TaskEvent => ({
  _tag: "TaskWaiting",
  taskId,
  reason: `the platform's database cannot be reached (${reason}); the task goes on from its journal once it is back`
})

/**
 * The tasks this runner owns, reached without the engine: a task whose shard this runner holds, and
 * whose `Run` holds it here, is attached to and answered here, as its entity's handlers would (the
 * same `ClusterTasks` calls), with no message through the cluster (each a request, its serialization,
 * a reply, an ack per event). The engine stays the way to every other runner's tasks, and to this
 * one's once its shard moves: the stream of a task let go here ends (`runHere`), and the follower
 * attaches again, through the engine. Never to a task its `Run` does not hold (yet): one taken up
 * here in process while the shard moved on before its `Run` held it was let go by no one, its loop
 * going on here with the follower attached to it while the next owner ran the task for no one.
 */
export interface Here {
  /** The task's shard is this runner's. */
  readonly holdsShard: (taskId: string) => boolean
  /** The task's shard is this runner's and its `Run` holds it here. */
  readonly owns: (taskId: string) => boolean
  readonly tasks: ClusterTasks.ClusterTasks
}

/** The tasks this runner owns, reached without the engine (`Here`). */
export const makeHere = (tasks: ClusterTasks.ClusterTasks) =>
  Effect.map(Sharding.Sharding, (sharding): Here => {
    const holdsShard = holdsShardOf(sharding)
    return { holdsShard, owns: (taskId) => tasks.runsHere(taskId) && holdsShard(taskId), tasks }
  })

/** What a follower (`followOn`) passed on of its task so far, and how it passes on an event from the task's owner. */
export class Passing<E> {
  started = false
  ended = false
  /** The owner's stream broke since the last event. */
  broke = false
  /** `TaskWaiting` was passed on since the last event. */
  waiting = false
  /** An event came since the last attach. */
  progressed = false
  constructor(
    readonly taskId: string,
    readonly out: Pick<Mailbox.Mailbox<TaskEvent, E>, "unsafeOffer">,
    readonly away: () => string | undefined
  ) {}

  /**
   * `TaskWaiting` with the reason, once until the next event; never before `TaskStarted`, the stream's
   * greeting (a client takes the task's id from its first event): a follower that finds the database
   * away before it has passed that on says it at its next check after.
   */
  say(reason: string): void {
    if (!this.started || this.waiting || this.ended) return
    this.waiting = true
    this.out.unsafeOffer(waitingEvent(this.taskId, reason))
  }

  /** `say`, if this runner's last check found the database away. */
  sayIfAway(): void {
    const reason = this.away()
    if (reason !== undefined) this.say(reason)
  }

  pass(event: TaskEvent | typeof Alive.Type): void {
    if (event._tag === "Alive") {
      // An owner that keeps the stream open while its loop waits for an answer says nothing itself.
      this.sayIfAway()
      return
    }
    this.broke = false
    this.progressed = true
    // The owner said it (its statements wait for the database): not said again here.
    this.waiting = event._tag === "TaskWaiting"
    // Its end, or another attachment took it over (which must not be taken back by attaching again).
    if (endsTaskStream(event)) this.ended = true
    if (event._tag === "TaskStarted") {
      if (this.started) return
      this.started = true
    }
    this.out.unsafeOffer(event)
  }
}

/**
 * `attempt` (one attach of a follower) again after each `Moved`, while `reconnect` allows; counted
 * afresh once events flow again. A defect once it gives up.
 */
const reattaching = <E>(
  attempt: Effect.Effect<void, E | Moved>,
  reconnect: Schedule.Schedule<unknown, unknown>,
  passing: { progressed: boolean; readonly taskId: string }
): Effect.Effect<void, Exclude<E, Moved>> =>
  Effect.flatMap(Schedule.driver(reconnect), (driver) => {
    const follow: Effect.Effect<void, Exclude<E, Moved>> = Effect.catchIf(
      attempt,
      (error): error is Moved => error instanceof Moved,
      () =>
        Effect.suspend(() => {
          const reset = passing.progressed ? driver.reset : Effect.void
          passing.progressed = false
          return Effect.zipRight(reset, driver.next(undefined)).pipe(
            Effect.matchEffect({
              onFailure: () => Effect.die(`task ${passing.taskId}: its owner could not be reached again`),
              onSuccess: () => follow
            })
          )
        })
    )
    return follow
  })

/** What `followOn` needs of its runner. */
interface FollowDeps {
  readonly tasks: Effect.Effect.Success<typeof TaskEntity.client>
  readonly here: Here
  readonly ids: Ids["Type"]
  readonly policy: Timing["Type"]
  readonly away: () => string | undefined
  readonly unreachable: Effect.Effect<string | undefined>
}

/**
 * The task's events from its owner, into a mailbox, attached again (same task, same pending calls,
 * `TaskStarted` once) whenever the owner's stream breaks or ends before the task's end: a runner died
 * and its shards moved, or the shard was handed over. Ends with the task's final event, or with
 * `TaskTakenOver`. While the database cannot be reached (a stream broke then: its owner stopped it,
 * its shard locks kept there; or this runner found it away), the mailbox gets `TaskWaiting` once,
 * rather than silence until the database is back.
 *
 * A task this runner owns (`Here`) is read straight from its own mailbox: no stream, no fiber per
 * event, no liveness ticks (its `Run`, let go, ends the attachment, and the follower attaches again);
 * about half of what a runner spent on a call went into the stream combinators this replaced. A task
 * owned elsewhere comes through its entity's `Attach` stream, given up when it goes quiet.
 * `unknown` is what an `UnknownTask` from the owner becomes: the attach's failure, or a defect for a
 * task just submitted.
 */
export const followOn = (deps: FollowDeps) =>
<E>(
  agentId: string,
  taskId: string,
  events: EventsWanted | undefined,
  connection: string,
  unknown: (error: UnknownTask) => Effect.Effect<never, E>,
  // Just submitted through this runner: its `Run` was just sent, and its first attach may wait for it.
  submitted = false,
  // The stream call's connection's writer: the events written straight to it, as the embedded platform writes them.
  write?: EventsWriter | undefined
): Effect.Effect<Mailbox.ReadonlyMailbox<TaskEvent, E>, never, Scope.Scope> =>
  Effect.gen(() => following(deps, agentId, taskId, events, connection, unknown, submitted, write))

/** `followOn`'s follower, by one generator function for every task followed (design: Generators on hot paths). */
function* following<E>(
  deps: FollowDeps,
  agentId: string,
  taskId: string,
  events: EventsWanted | undefined,
  connection: string,
  unknown: (error: UnknownTask) => Effect.Effect<never, E>,
  submitted: boolean,
  write: EventsWriter | undefined
) {
  const out = yield* Mailbox.make<TaskEvent, E>()
  const sink = write === undefined ? out : writtenStraight(out, write)
  const passing = new Passing(taskId, sink, deps.away)
  // A re-attach names the first attach: one taken over while its shard moved must not take the task back.
  const attachmentId = deps.ids.make("attachment")
  let attempts = 0
  /** The task's events from its mailbox here, the final one once its end is journaled. */
  const inProcess = (payload: AttachPayload) =>
    Effect.scoped(passedHere(deps.here, agentId, taskId, events, attachmentId, connection, passing, payload))
  /** The task's events through the engine, from its owner wherever it is; given up when quiet past `followAlive.within`. */
  const viaEngine = (payload: AttachPayload) =>
    deps.tasks(taskId).Attach(payload).pipe(
      Stream.timeoutFail(() => new Moved(), followAlive.within),
      Stream.runForEach((event) => Effect.sync(() => passing.pass(event)))
    )
  /** One attach, to its end: fails with `Moved` unless the task ended. */
  const attempt = Effect.suspend(() => {
    const reattach = attempts++ > 0
    // A task just submitted started its loop before this attach: its events so far come first (its first turn's).
    const payload = { agentId, events, attachmentId, reattach, connection, fromStart: submitted && !reattach }
    // A new task's first attach, its shard here: in process once its `Run`, sent just before, holds it.
    const source = payload.fromStart && deps.here.holdsShard(taskId)
      ? Effect.flatMap(
        deps.here.tasks.heldByRun(taskId, runHeldWithin),
        (held) => held && deps.here.owns(taskId) ? inProcess(payload) : viaEngine(payload)
      )
      : deps.here.owns(taskId)
      ? inProcess(payload)
      : viaEngine(payload)
    // Not asked before the greeting is passed on: `say` would drop the answer the probe waited for.
    const waitingIfAway = Effect.suspend(() =>
      !passing.broke || passing.waiting || !passing.started
        ? Effect.void
        : Effect.map(deps.unreachable, (why) => why === undefined ? undefined : passing.say(why)))
    return Effect.zipRight(waitingIfAway, source).pipe(
      Effect.catchAllCause((cause): Effect.Effect<void, UnknownTask | Moved> => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && failure.value._tag === "UnknownTask") return Effect.fail(failure.value)
        passing.broke = true
        return Effect.fail(new Moved())
      }),
      Effect.zipRight(Effect.suspend(() => {
        if (passing.ended) return Effect.void
        passing.broke = true
        return Effect.fail(new Moved())
      }))
    )
  })
  // Said also on this runner's own check, every second: an owner that stays silent (its events
  // and `Alive` held up with the database) is not left to silence until its stream times out.
  yield* Effect.forkScoped(Effect.repeat(
    Effect.sync(() => passing.sayIfAway()),
    Schedule.spaced("1 second")
  ))
  yield* Effect.forkScoped(reattaching(attempt, deps.policy.reconnect, passing).pipe(
    Effect.catchTag("UnknownTask", unknown),
    Effect.exit,
    Effect.flatMap((exit) => Effect.sync(() => sink.unsafeDone(exit)))
  ))
  return out
}

/** The task's events from its mailbox here (`followOn`'s in-process attach), the final one once its end is journaled. */
const passedHere = Effect.fnUntraced(function*(
  here: Here,
  agentId: string,
  taskId: string,
  events: EventsWanted | undefined,
  attachmentId: string,
  connection: string,
  passing: Passing<unknown>,
  payload: AttachPayload
) {
  const mailbox = yield* here.tasks.attachRunning({
    agentId,
    taskId,
    events,
    follower: { attachmentId, reattach: payload.reattach },
    connection,
    fromStart: payload.fromStart
  })
  while (true) {
    const [batch, done] = yield* mailbox.takeAll
    for (const event of batch) {
      if (isTaskEnd(event)) yield* here.tasks.endJournaled(agentId, taskId)
      passing.pass(event)
    }
    if (done) return
  }
})
