/**
 * The loops of the tasks (Tasks.ts): a task's loop started in the platform's own fiber set, suspended
 * for approvals and going on once they are decided; a task taken up from the journal, on demand or at
 * start; and a new task, admitted, journaled and started.
 */
import { Clock, Context, Effect, Fiber, Option, Schema, Tracer } from "effect"
import * as SqlStore from "../internal/sql/store.js"
import { Signal } from "../internal/util/signal.js"
import { parseTraceparent, traceparentOf } from "../internal/util/traceContext.js"
import * as Journal from "../Journal.js"
import { type AgentLimitExceeded, type TaskEvent, type TaskOutput, UnknownTask } from "../protocol/Protocol.js"
import type * as Tool from "../Tool.js"
import { agentSettingsOf, type Limits, type Options } from "./Options.js"
import { type Book, checkUsage, type Task, uncount } from "./TaskBook.js"
import * as Metrics from "./Metrics.js"
import { deliverOf } from "./TaskDelivery.js"
import * as TaskRunner from "./TaskRunner.js"
import { EventJson, type Suspension } from "./TaskTypes.js"

// --- the loops: started, suspended for approvals, going on ---

/** The task's loop fiber, let go by the task once it ends: nothing of the loop (its prompt) outlives it. */
const letGoAtEnd = (task: Task, fiber: Fiber.RuntimeFiber<void>): Fiber.RuntimeFiber<void> => {
  fiber.addObserver(() => {
    if (task.loop === fiber) task.loop = undefined
  })
  return fiber
}

/** Starting a task's loop, and a suspended one going on, as `makeLoops` gives them. */
export interface Loops {
  /** Runs a task's loop, a new one or one taken back from the journal (`known`: what it holds of it, if just read). */
  readonly start: (
    task: Task,
    prompt: string,
    tools: Journal.TaskTools,
    parent?: Tracer.AnySpan,
    known?: Journal.OpenRun
  ) => void
  /** A suspended task goes on from the journal. */
  readonly goOn: (task: Task, suspension: Suspension) => Effect.Effect<void>
}

/** The tools the platform handles itself for a task. */
type ToolsOf = (task: Task) => ReadonlyArray<Tool.Any>

/** How a task's calls of tools its holder does not serve go out (TaskRoutes.ts). */
type RouteOf = (task: Task) => TaskRunner.TaskOptions["deliver"]

/**
 * The model, instructions, `maxSteps` and approvals of a task of `agentId`: its agent's own settings (`Options.agents`)
 * over the platform's, read as the task starts, so that a reloaded configuration applies to the tasks started after it.
 */
const agentRunOptions = (options: Options, agentId: string) => {
  const settings = agentSettingsOf(options, agentId)
  return {
    model: settings?.model,
    instructions: settings?.instructions ?? options.instructions,
    maxSteps: settings?.maxSteps ?? options.maxSteps,
    approve: settings?.approve
  }
}

/**
 * Starting a task's loop, and what a suspended one does at its first expiry or last decision;
 * `platformTools` gives the tools the platform handles itself for a task (`exec_agent`, `list_agents`), `route`
 * how its calls of tools its holder does not serve go to the agent's other processes (TaskRoutes.ts).
 */
export const makeLoops = (book: Book, platformTools: ToolsOf, route: RouteOf): Loops => {
  const { clock, journal, options, runTask } = book
  // The agents the tasks run, made once while their settings and tools stay the same.
  const agents = new TaskRunner.AgentCache()

  /**
   * The task waits for the calls of `event` to be decided (`decide`); at the first one's expiry it
   * goes on anyway, and the loop's gate denies what expired (the task never waits for ever).
   */
  const suspend = (task: Task, event: Suspension["event"]): void => {
    const suspension: Suspension = { event, undecided: new Set(event.pending.map((p) => p.toolCallId)), expiry: undefined }
    task.suspended = suspension
    const suspending = task.suspending
    task.suspending = new Signal()
    suspending.succeed(undefined)
    const first = Math.min(...event.pending.map((p) => p.expiresAt))
    suspension.expiry = runTask(Effect.gen(function*() {
      yield* Effect.sleep(Math.max(0, first - (yield* Clock.currentTimeMillis)))
      suspension.expiry = undefined
      yield* goOn(task, suspension)
    }))
  }

  /** A suspended task goes on: its loop runs again from the journal, which holds the decisions. */
  const goOn = (task: Task, suspension: Suspension): Effect.Effect<void> =>
    Effect.gen(function*() {
      if (journal === undefined || task.suspended !== suspension) return
      task.suspended = undefined
      if (suspension.expiry !== undefined) yield* Fiber.interrupt(suspension.expiry)
      yield* journal.resumed(task.taskId)
      const run = yield* Effect.orDie(journal.run(task.taskId))
      if (run === undefined || !Journal.isOpen(run)) {
        return yield* Effect.logWarning(`task ${task.taskId}: the journal no longer holds it open; it cannot go on`)
      }
      yield* Effect.logInfo(`task ${task.taskId}: its approvals are decided; it goes on`)
      start(task, run.prompt, run.tools, parseTraceparent(run.traceparent), run)
    })

  /**
   * Runs a task's loop: a new one, or with a journal, one taken back after a restart (from what it
   * journaled; `known`, what the journal holds of it if just read or written, is not read again).
   */
  const start = (
    task: Task,
    prompt: string,
    tools: Journal.TaskTools,
    parent?: Tracer.AnySpan,
    known?: Journal.OpenRun
  ): void => {
    const { taskId } = task
    // The task's trace goes on from its submitter's (design: Observability), when it came with one.
    // A child task's loop (an exec_agent call's) starts on a stack of its own, not its caller's (a cycle of agents
    // whose model answers at once would otherwise nest every task's loop on one stack, until it overflows), and in
    // a turn of the event loop of its own (300 calls of one turn would otherwise run 300 loops before any other
    // tenant's message is read).
    const own = <A, E, R>(loop: Effect.Effect<A, E, R>) => taskId.includes("/") ? Effect.zipRight(book.childTurn, loop) : loop
    const traced = <A, E, R>(loop: Effect.Effect<A, E, R>) =>
      own(parent === undefined ? loop : Effect.withParentSpan(loop, parent))
    const runOptions = {
      taskId,
      agentId: task.agentId,
      prompt,
      ...agentRunOptions(options, task.agentId),
      approvalExpiry: options.approvalExpiry,
      tools,
      platformTools: platformTools(task),
      output: task.output,
      deliver: deliverOf(task),
      route: route(task),
      agents,
      emit: (event: TaskEvent) => {
        if (event._tag !== "TaskSuspended") return void task.emit(event)
        // Kept with its offset: an attachment that comes back is given it as it was sent.
        const stamped = { ...event, offset: event.offset ?? 0 }
        suspend(task, stamped)
        stamped.offset = task.emit(event)
      }
    }
    if (journal === undefined) {
      task.loop = letGoAtEnd(task, runTask(traced(TaskRunner.run(runOptions))))
      return
    }
    // The task is a journaled run of the loop (design: Durable runs), taken up from what the journal holds.
    const journaled = TaskRunner.run({ ...runOptions, journaled: true, known }).pipe(
      Effect.provideService(Journal.Journal, journal),
      // Its statements waiting for the database say so on its stream.
      Effect.locally(SqlStore.currentOnUnreachable, (reason) => Effect.sync(() => task.waiting(reason))),
      // The end is journaled after the final event went out: a restart in between replays to the same end.
      Effect.zipRight(Effect.suspend(() =>
        task.final === undefined ? Effect.void : Schema.encode(EventJson)(task.final).pipe(
          Effect.orDie,
          Effect.flatMap((final) => journal.ended(taskId, { final }, task.endedAt ?? clock.unsafeCurrentTimeMillis()))
        )
      ))
    )
    task.loop = letGoAtEnd(task, runTask(traced(journaled)))
  }

  return { start, goOn }
}

// --- taking tasks up from the journal ---

/**
 * A task taken up from the journal (`makeHolding`'s `hold`, under its semaphore), by one generator function for
 * every task (design: Generators on hot paths).
 */
const takenUp = Effect.fnUntraced(function*(
  book: Book,
  journal: NonNullable<Book["journal"]>,
  start: Loops["start"],
  taskId: string
) {
  const { add, tasks } = book
  const raced = tasks.get(taskId)
  if (raced !== undefined) return raced
  const run = yield* Effect.orDie(journal.run(taskId))
  if (run === undefined || run.kind !== "task") return undefined
  const task = add(taskId, run.agentId, run.processId)
  if (Journal.isOpen(run)) {
    if (run.turns.length > 0) yield* Metrics.takenUp(taskId, run.agentId, run.turns.length)
    book.count(task, run.prompt)
    start(task, run.prompt, run.tools, parseTraceparent(run.traceparent), run)
  } else if (run.final !== undefined) {
    task.final = yield* Effect.orDie(Schema.decode(EventJson)(run.final))
    task.endedAt = run.endedAt
    task.ended.succeed(undefined)
  }
  return task
})

/** Taking up one task from the journal on demand (`hold`), and every one it holds at start (`takeBack`). */
export const makeHolding = (book: Book, { start }: Loops) =>
  Effect.gen(function*() {
    const { add, journal, tasks } = book
    /** Only one task is taken up from the journal at a time: two messages for it must not start two loops. */
    const holding = yield* Effect.makeSemaphore(1)

    /**
     * The task in this process, taken up from the journal if it is not (cluster mode: the runner that
     * owns the task's shard holds it): an open task's loop goes on from what it journaled, an ended
     * one answers its final event. Undefined if the journal does not hold it.
     */
    const hold = (taskId: string): Effect.Effect<Task | undefined> =>
      Effect.suspend(() => {
        const held = tasks.get(taskId)
        if (held !== undefined || journal === undefined) return Effect.succeed(held)
        return holding.withPermits(1)(takenUp(book, journal, start, taskId))
      })

    /** The agent's task held here; another agent's is unknown to it. */
    const held = (agentId: string, taskId: string): Effect.Effect<Task, UnknownTask> =>
      Effect.flatMap(hold(taskId), (task) =>
        task === undefined || task.agentId !== agentId ? Effect.fail(new UnknownTask({ taskId })) : Effect.succeed(task))

    /**
     * Takes back what the journal holds: recently ended tasks (for their final event) and every
     * task that had not ended, whose loop runs again from its journaled turns and answers.
     */
    const takeBack = (journal: Journal.Journal["Type"], keepEndedMillis: number) =>
      Effect.gen(function*() {
        const { ended, open } = yield* journal.tasks((yield* Clock.currentTimeMillis) - keepEndedMillis)
        for (const entry of ended) {
          if (entry.final === undefined) continue
          const task = add(entry.runId, entry.agentId, entry.processId)
          task.final = yield* Schema.decode(EventJson)(entry.final).pipe(
            Effect.mapError((error) => new Journal.JournalUnavailable({ path: journal.path, reason: error.message }))
          )
          task.endedAt = entry.endedAt
        }
        // Counted (never refused): what the platform held before the restart it holds again.
        for (const entry of open) {
          const task = add(entry.runId, entry.agentId, entry.processId)
          book.count(task, entry.prompt)
          start(task, entry.prompt, entry.tools, parseTraceparent(entry.traceparent))
        }
        if (open.length > 0) {
          yield* Effect.logInfo(`journal ${journal.path}: resumed ${open.length} unfinished task(s)`)
        }
      })

    return { hold, held, takeBack }
  })

// --- a new task ---

/** The span a task is made in (`Effect.currentSpan`'s), if any: read from the context, no failure made when there is none. */
const submitterSpan: Effect.Effect<Tracer.Span | undefined> = Effect.map(Effect.context<never>(), (context) => {
  const span = Context.getOption(context, Tracer.ParentSpan)
  return Option.isSome(span) && span.value._tag === "Span" ? span.value : undefined
})

/** What a new task is made of. */
export interface NewTask {
  readonly taskId: string
  readonly agentId: string
  readonly processId: string
  readonly prompt: string
  readonly tools: Journal.TaskTools
  readonly output?: TaskOutput | undefined
}

/** A new task, made and started as `createOf` does: what the submitter's `attach` gives, or the agent's limits refused it. */
export type Create = <A, R>(
  init: NewTask,
  attach: (task: Task) => Effect.Effect<A, never, R>
) => Effect.Effect<A, AgentLimitExceeded, R>

/**
 * A new task: admitted to its agent's limits, journaled before anyone learns its id, continuing the
 * trace of the span it is made in; its loop starts once `attach` has run (its submitter's stream, or
 * none), so that the first events reach that stream.
 */
export const createOf = (book: Book, limits: Limits, loops: Loops): Create =>
<A, R>(init: NewTask, attach: (task: Task) => Effect.Effect<A, never, R>): Effect.Effect<A, AgentLimitExceeded, R> =>
  Effect.gen(() => created(book, limits, loops, init, attach))

/** `createOf`'s task, made by one generator function for every task (design: Generators on hot paths). */
function* created<A, R>(
  book: Book,
  limits: Limits,
  loops: Loops,
  init: NewTask,
  attach: (task: Task) => Effect.Effect<A, never, R>
) {
  const { agentId, processId, prompt, taskId, tools } = init
  const { journal } = book
  yield* checkUsage(book.usage, limits.forAgent(agentId), agentId, Buffer.byteLength(prompt))
  const task = book.add(taskId, agentId, processId)
  book.count(task, prompt)
  // The submitter's span: the task's run continues its trace, here and once taken back from the journal.
  const parent = yield* submitterSpan
  const traceparent = parent === undefined ? undefined : traceparentOf(parent)
  // Journaled before anyone learns the task's id: a restart cannot lose a task a client knows.
  const record = { runId: taskId, kind: "task" as const, agentId, processId, prompt, tools, traceparent }
  if (journal !== undefined) {
    yield* Effect.onError(journal.started(record), () => Effect.sync(() => uncount(book.usage, task)))
  }
  task.output = init.output
  yield* Metrics.submitted(taskId, agentId)
  const attached = yield* attach(task)
  // What the journal holds of it now: nothing but its start.
  const known = { ...record, status: "running" as const, turns: [], calls: new Map(), approvals: new Map() }
  loops.start(task, prompt, tools, parent, journal === undefined ? undefined : known)
  return attached
}
