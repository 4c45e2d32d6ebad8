/**
 * The operator API's event streams (docs: operations): a task's events and the platform's, as Server-Sent
 * Events whose ids resume them exactly. A task's ids are its event offsets (TaskBook.ts: each event but the
 * greeting has one, growing, and the task keeps its latest); the platform's are the sequence of its own feed
 * (`makeFeed`), which keeps the latest events of every task. A stream resumed with `Last-Event-ID` gets the
 * kept events past it, then each new one: the kept ones are read and the stream is told of new ones in one
 * synchronous step, between two events, so none is missed and none comes twice. Deltas (the model's text as
 * it writes it) are left out: a turn's whole text comes as `ModelText`.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Exit, Mailbox, Schedule, Schema, Stream } from "effect"
import { isTaskEnd, TaskEvent } from "../../protocol/Protocol.js"
import { carries, type Task } from "../TaskBook.js"

/** One event of a stream: its id, its name (the event's `_tag`) and its data, as JSON. */
export interface Frame {
  readonly id: number
  readonly event: string
  readonly data: unknown
}

/**
 * A stream's source: `follow` gives the kept frames past `after` to `onFrame`, then each new one, until
 * `onEnd` (the task ended) or the function it gives is called; undefined when there is nothing to follow.
 */
export type Follow = (
  after: number | undefined,
  onFrame: (frame: Frame) => void,
  onEnd: () => void
) => (() => void) | undefined

/** How many events the platform's feed keeps for streams that resume (between this and twice as many). */
export const feedEvents = 4096

/** Frames queued for a client that does not read; past it its stream ends, and it resumes from its last id. */
export const maxQueuedFrames = 4096

const encodeEvent = Schema.encodeSync(TaskEvent)

/** The event as JSON a client reads: the protocol's encoding (a call's result as `{ value }` or `{ error, failure }`). */
const dataOf = (event: TaskEvent): unknown => {
  try {
    return encodeEvent(event)
  } catch {
    return { _tag: event._tag, taskId: event.taskId }
  }
}

/** Whether an operator's stream carries `event`: every event but the deltas. */
const carried = (event: TaskEvent): boolean => carries("all", event._tag)

const isEnd = (event: TaskEvent): boolean => isTaskEnd(event)

// --- the platform's feed ---

/** An event of the platform's feed: its id in the feed, and its task's agent; its frame once a stream read it. */
interface Entry {
  readonly id: number
  readonly agentId: string
  readonly event: TaskEvent
  frame?: Frame
}

/** The entry's frame, encoded once whatever the streams that read it. */
const entryFrame = (entry: Entry): Frame =>
  entry.frame ??= { id: entry.id, event: entry.event._tag, data: { agentId: entry.agentId, event: dataOf(entry.event) } }

/**
 * The platform's feed: every task's events (deltas left out) as the book tells them (`watch`), each with the
 * next id, the latest `feedEvents` to `2 * feedEvents` kept. Ids start from the clock (x1000), as a task's
 * offsets do, so that a platform restarted goes on above the ids it gave before. `stop` lets go of the book.
 */
export const makeFeed = (
  watch: (listener: (task: Task, event: TaskEvent) => void) => () => void,
  now: number
) => {
  let last = now * 1000
  let kept: Array<Entry> = []
  const listeners = new Set<(entry: Entry) => void>()
  const stop = watch((task, event) => {
    if (!carried(event)) return
    const entry: Entry = { id: ++last, agentId: task.agentId, event }
    kept.push(entry)
    if (kept.length > 2 * feedEvents) kept = kept.slice(kept.length - feedEvents)
    for (const listener of listeners) listener(entry)
  })
  /** The platform's events (of `agentId`'s tasks only, if given) past `after`; with no `after`, from now on. */
  const follow = (agentId: string | undefined): Follow => (after, onFrame) => {
    const wanted = (entry: Entry) => agentId === undefined || entry.agentId === agentId
    if (after !== undefined) for (const entry of kept) if (entry.id > after && wanted(entry)) onFrame(entryFrame(entry))
    const listener = (entry: Entry) => wanted(entry) && onFrame(entryFrame(entry))
    listeners.add(listener)
    return () => void listeners.delete(listener)
  }
  return { follow, stop }
}

/** The platform's feed, as `makeFeed` makes it. */
export type Feed = ReturnType<typeof makeFeed>

// --- a task's events ---

/**
 * A task's events past `after` (its offsets), then each new one, until its end: the events it keeps, and its
 * end if the client did not have it (a task taken back from the journal keeps its end only).
 */
export const followTask = (
  task: Task,
  watch: (listener: (task: Task, event: TaskEvent) => void) => () => void
): Follow =>
(after, onFrame, onEnd) => {
  const from = after ?? 0
  const frame = (event: TaskEvent): Frame => ({ id: event.offset ?? from + 1, event: event._tag, data: dataOf(event) })
  const backlog = task.keptAfter(from, "all")
  for (const event of backlog) onFrame(frame(event))
  const final = task.final
  if (final !== undefined) {
    if (!backlog.includes(final) && (final.offset === undefined || final.offset > from)) onFrame(frame(final))
    onEnd()
    return () => {}
  }
  return watch((held, event) => {
    if (held !== task || !carried(event)) return
    onFrame(frame(event))
    if (isEnd(event)) onEnd()
  })
}

// --- as Server-Sent Events ---

const frameText = (frame: Frame): string => `id: ${frame.id}\nevent: ${frame.event}\ndata: ${JSON.stringify(frame.data)}\n\n`

/**
 * `follow` as a `text/event-stream` response: a `retry` hint first, then its frames, a comment every 15 s
 * while none comes (so that proxies keep the connection), until its end or the client goes. A client that
 * does not read gets its stream ended once `maxQueuedFrames` wait for it: it resumes from its last id.
 */
export const eventStream = (follow: Follow, after: number | undefined) =>
  Effect.gen(function*() {
    const frames = yield* Mailbox.make<string>()
    let queued = 0
    const stop = follow(after, (frame) => {
      if (++queued > maxQueuedFrames) return void frames.unsafeDone(Exit.void)
      frames.unsafeOffer(frameText(frame))
    }, () => void frames.unsafeDone(Exit.void))
    const body = Stream.concat(
      Stream.make("retry: 2000\n\n"),
      Mailbox.toStream(frames).pipe(Stream.tap(() => Effect.sync(() => void queued--)))
    ).pipe(
      Stream.merge(Stream.fromSchedule(Schedule.spaced("15 seconds")).pipe(Stream.as(": keep-alive\n\n")), {
        haltStrategy: "left"
      }),
      Stream.ensuring(Effect.sync(() => stop?.())),
      Stream.encodeText
    )
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-cache", "x-accel-buffering": "no" }
    })
  })
