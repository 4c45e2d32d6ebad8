/**
 * The calls of the tasks (Tasks.ts) on their way out: a call delivered on its task's stream and waited
 * on, a new attachment to a task and what its end leaves pending, and the upkeep that delivers again
 * the calls not answered in time and forgets the tasks ended long enough ago.
 */
import { Clock, Context, Effect, Either, Exit, Mailbox, Schema, Scope } from "effect"
import * as Metrics from "../internal/util/metrics.js"
import * as Plain from "../internal/util/plain.js"
import * as PlainEvents from "../protocol/plainEvents.js"
import { Signal } from "../internal/util/signal.js"
import { type EventsWanted, TaskEvent } from "../protocol/Protocol.js"
import type { ToolResult } from "../ToolResult.js"
import * as AgentCalls from "./AgentCalls.js"
import { type Attachment, type Book, type Task, uncount } from "./TaskBook.js"
import * as TaskMetrics from "./Metrics.js"
import type { Routes } from "./TaskRoutes.js"
import type * as TaskRunner from "./TaskRunner.js"
import type { EventsWriter } from "./Wire.js"
import type { Follower, PendingCall, Usage } from "./TaskTypes.js"

// --- the calls' way out: delivery and attachments ---

/** Delivers a call of `task` on its stream and waits for the answer (one taken already is the answer). */
export const deliverOf = (task: Task) => (call: TaskRunner.Delivery): Effect.Effect<ToolResult> =>
  Effect.withFiberRuntime((fiber) => {
    const now = Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis()
    const exporting = Context.get(fiber.currentContext, Metrics.Exporting)
    const answered = task.answered?.get(call.toolCallId)
    if (answered !== undefined) return Effect.succeed(answered)
    // A child task's calls end by its `exec_agent` call's deadline, whatever their own timeouts.
    const capped = task.deadlineAt !== undefined && task.deadlineAt < call.deadlineAt ? { ...call, deadlineAt: task.deadlineAt } : call
    const event = { _tag: "ToolCallRequested" as const, taskId: task.taskId, ...capped }
    const done = new Signal<ToolResult>()
    const pending: PendingCall = { event, done, sentAt: now, offset: 0 }
    task.pending?.set(call.toolCallId, pending)
    if (exporting) Metrics.deliveries.unsafeUpdate(1, Metrics.deliveryLabels.first)
    pending.offset = task.emit(event)
    return Effect.ensuring(TaskMetrics.timedAnswer(done.await, now, exporting), Effect.sync(() => task.pending?.delete(call.toolCallId)))
  })

/**
 * The process that held `task` went away (its attachment's connection closed) while calls of it were pending, and no
 * attachment came back within `AgentCalls.regiveAfter` (a reconnect does at once): logged at the platform (agent,
 * process, task, calls), and said on the task's stream (`TaskWaiting`, kept for the attachment that comes back after
 * it), so that whoever follows the task learns why nothing comes.
 */
const detached = (task: Task, mailbox: Attachment): Effect.Effect<void> => {
  // The calls that wait for it: not those given to other processes of the agent (TaskRoutes.ts).
  const waiting = () => [...task.pending?.values() ?? []].flatMap((call) => call.route === undefined ? [call.event.toolCallId] : [])
  const still = () => task.attachment === undefined && task.final === undefined && waiting().length > 0
  if (!still()) return Effect.void
  const said = Effect.suspend(() => {
    if (!still() || mailbox === task.attachment) return Effect.void
    const pending = waiting()
    const calls = `${pending.length === 1 ? "call" : "calls"} ${pending.join(", ")}`
    const reason = `process ${task.processId} of agent ${task.agentId}, which held the task, went away (its connection ` +
      `closed) with ${calls} pending; they wait for a process of agent ${task.agentId} to attach`
    task.emit({ _tag: "TaskWaiting", taskId: task.taskId, reason })
    return Effect.logWarning(`task ${task.taskId}: ${reason}`)
  })
  return Effect.asVoid(Effect.forkDaemon(Effect.delay(said, AgentCalls.regiveAfter)))
}

/**
 * A new attachment to the task, from `connection` (whose answers are then the only ones taken); the
 * scope's end is how the platform learns the client went away.
 */
export const attachTo = Effect.fnUntraced(function*(
  task: Task,
  wanted: EventsWanted | undefined,
  follower?: Follower,
  connection?: string,
  after?: number,
  writeEvents?: EventsWriter
) {
  const mailbox = yield* Mailbox.make<TaskEvent>()
  const attachment = writeEvents === undefined ? mailbox : writtenStraight(mailbox, writeEvents)
  task.attach(attachment, wanted ?? "all", follower, connection, after)
  // Its calls then wait for a re-attach (and any connection of the agent's may answer them). On the scope itself,
  // not `Effect.addFinalizer`, which restores this fiber's references around its finalizer at twice its cost here.
  yield* Scope.addFinalizer(
    yield* Effect.scope,
    Effect.suspend(() => {
      if (task.attachment !== attachment) return Effect.void
      task.attachment = undefined
      task.answerer = undefined
      return detached(task, attachment)
    })
  )
  return mailbox
})

/** An event as its stream carries it: most without Effect's parser (`Plain`), as it encodes them. */
const encodeEvent = Plain.orParse(Plain.plainTagged(TaskEvent.ast, PlainEvents.encoders), Schema.encodeUnknownEither(TaskEvent))

/**
 * The events written at once, with those waiting before them: what a process waits on to act (a call to run,
 * one to stop) and a stream's last events. The others (a task's start, its turns, a call's end, the model's
 * text and deltas, a suspension) are news: written with the next event written at once, or within
 * `newsWithinMillis`, whichever comes first, so that a call's end and the next turn go with the call they lead to.
 */
const writtenAtOnce: ReadonlySet<TaskEvent["_tag"]> = new Set<TaskEvent["_tag"]>([
  "ToolCallRequested",
  "ToolCallCancelled",
  "TaskTakenOver",
  "TaskCompleted",
  "TaskFailed",
  "TaskCancelled"
])

/** How long news waits for an event written at once to go with (a runner's journal's statement or two between them). */
const newsWithinMillis = 5

/**
 * An attachment whose events are written on its connection as they are emitted (Wire.ts, `StreamWriters`): no
 * fiber wakes between an event and its frame. Those in `writtenAtOnce` go at once, in one frame with the news
 * waiting before them; news with nothing written at once after it goes within `newsWithinMillis`. Its end goes
 * through `mailbox`, which the stream's call reads, after the last events. An event that cannot be encoded ends
 * the stream with that defect, as `RpcServer` would end it. A cluster runner's follower writes through one too.
 */
export const writtenStraight = <E = never>(
  mailbox: Mailbox.Mailbox<TaskEvent, E>,
  write: EventsWriter
): Pick<Mailbox.Mailbox<TaskEvent, E>, "unsafeOffer" | "unsafeDone"> => {
  // The events not written yet, in order; whether a write of them is set (`newsWithinMillis`).
  let waiting: Array<unknown> = []
  let set = false
  const flush = () => {
    if (waiting.length === 0) return
    const events = waiting as [unknown, ...Array<unknown>]
    waiting = []
    write(events)
  }
  const later = () => {
    set = false
    flush()
  }
  return {
    unsafeOffer: (event) => {
      const encoded = encodeEvent(event)
      if (Either.isLeft(encoded)) {
        flush()
        return mailbox.unsafeDone(Exit.die(encoded.left))
      }
      waiting.push(encoded.right)
      if (writtenAtOnce.has(event._tag)) flush()
      else if (!set) {
        set = true
        setTimeout(later, newsWithinMillis)
      }
      return true
    },
    unsafeDone: (exit) => {
      flush()
      return mailbox.unsafeDone(exit)
    }
  }
}

// --- upkeep: redelivery and retention ---

/** What the redelivery and the retention sweep (Parts.ts) do to the tasks (`routes`: their calls given to workers). */
export const upkeep = ({ tasks, usage }: Book, exporting: boolean, routes: Routes) => ({
  /** Delivers again each pending call last sent at or before `sentBy` (a routed one to its worker); it counts as sent `now`. */
  redeliver: (sentBy: number, now: number): void => {
    routes.redeliver(sentBy, now)
    for (const task of tasks.values()) {
      for (const call of task.pending?.values() ?? []) {
        // A routed call is given again to its worker (TaskRoutes.ts, `redeliver`).
        if (call.route === undefined && call.sentAt <= sentBy) {
          call.sentAt = now
          if (exporting) Metrics.deliveries.unsafeUpdate(1, Metrics.deliveryLabels.again)
          call.offset = task.emit(call.event)
        }
      }
    }
  },
  /** Forgets the tasks that ended at or before `before`. */
  forgetEnded: (before: number): void => {
    for (const task of tasks.values()) {
      if (task.endedAt !== undefined && task.endedAt <= before) tasks.delete(task.taskId)
    }
  },
  count: (): number => tasks.size,
  /** What the agent's tasks not ended yet hold (its prompts' bytes), counted against its limits. */
  usageOf: (agentId: string): Usage => ({ ...(usage.get(agentId) ?? { tasks: 0, promptBytes: 0 }) }),
  /** Lets go of `task` (cluster mode: its shard moved); a task taken up again since is kept. */
  letGo: (task: Task): void => {
    uncount(usage, task)
    if (tasks.get(task.taskId) === task) tasks.delete(task.taskId)
  }
})
