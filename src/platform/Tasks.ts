/**
 * The tasks (design: The platform): each one's loop (TaskRunner) runs in a fiber of the platform's
 * own, its calls go out on whichever stream attached to it last and wait for their answers. With a
 * journal, every step is journaled, and the tasks the journal holds are taken back at start; a task
 * that waits for approvals suspends and goes on from the journal once they are decided.
 *
 * Shutdown: the loops and the approvals' expiry timers are fibers of one `FiberSet`, interrupted when
 * the platform's scope closes them, after the retention sweep and the redelivery have stopped and
 * before the journal closes (see Parts.ts).
 *
 * Made of a module a subject, reached through this one by the rest of the platform: what they share
 * (TaskTypes.ts), a task and the book of those held here (TaskBook.ts), delivery and attachments
 * (TaskDelivery.ts), the calls given to the agents' other processes (TaskRoutes.ts), the loops (TaskLoops.ts),
 * answers and approvals (TaskAnswers.ts) and the tasks `exec_agent` calls start (TaskChildren.ts).
 */
import { Effect, Option } from "effect"
import { Ids } from "../Ids.js"
import * as Metrics from "../internal/util/metrics.js"
import * as Invocation from "../Invocation.js"
import type * as Journal from "../Journal.js"
import { type Caller, type EventsWanted, type TaskOutput, UnknownTask } from "../protocol/Protocol.js"
import type * as AgentCalls from "./AgentCalls.js"
import type { Limits, Options } from "./Options.js"
import { completeOf, decidedOn, decideOf } from "./TaskAnswers.js"
import { type Book, makeBook, type Task } from "./TaskBook.js"
import { type Children, makeChildren, stop } from "./TaskChildren.js"
import type { EventsWriter } from "./Wire.js"
import { attachTo, upkeep } from "./TaskDelivery.js"
import { makeCancel } from "./TaskCancel.js"
import { createOf, makeHolding, makeLoops } from "./TaskLoops.js"
import { makeRoutes, type RouteDeps } from "./TaskRoutes.js"
import type { Delivery } from "./TaskRunner.js"

export { answersCallFrom, ignoredAnswer } from "./TaskAnswers.js"
export { type Task, usageProblem } from "./TaskBook.js"
export { childTaskId } from "./TaskChildren.js"
export { attachTo } from "./TaskDelivery.js"
export type { Follower } from "./TaskTypes.js"

/** How many submit keys the platform remembers (with the task each made), the oldest forgotten first. */
const maxSubmitKeys = 10_000

// --- the tasks ---

/**
 * The tasks of this process; with `journal`, journaled and taken up from it; with `host`, the tasks
 * of an agent allowed to call others are offered `exec_agent` and `list_agents`; `routing`, where the calls of
 * tools a task's holder does not serve go (TaskRoutes.ts).
 */
export const makeTasks = (
  options: Options,
  limits: Limits,
  journal: Journal.Journal["Type"] | undefined,
  host: AgentCalls.Host | undefined,
  routing: Omit<RouteDeps, "graceMillis">
) =>
  Effect.gen(function*() {
    const book = yield* makeBook(options, journal)
    const config = yield* Invocation.InvocationConfig
    const ids = yield* Ids
    // The calls of a task its holder does not serve go to the agent's other processes.
    const routes = yield* makeRoutes(book, { ...routing, graceMillis: limits.workerGraceMillis })
    // A task's platform tools start tasks, which needs the loops: bound once both exist.
    let children: Children | undefined
    const route = (task: Task) => (call: Delivery) => routes.deliver(task, call)
    const loops = makeLoops(book, (task) => children?.toolsOf(task) ?? [], route)
    const { held, hold, takeBack } = yield* makeHolding(book, loops)
    const create = createOf(book, limits, loops)
    const cancel = makeCancel(book, routes, hold, host?.cancelElsewhere)
    if (host !== undefined) children = makeChildren(book, host, create, hold, cancel)
    return {
      /**
       * A new task, attached at once to `connection`; its loop starts. Refused with
       * `AgentLimitExceeded` past the agent's `maxTasksPerAgent` or `maxPromptBytesPerAgent`.
       */
      submit: submitOf(book, ids, create),
      /** Another attachment to a task of the agent's, from `connection`. */
      attach: (
        { after, agentId, connection, events, taskId, writeEvents }: {
          readonly agentId: string
          readonly taskId: string
          readonly events?: EventsWanted | undefined
          readonly connection: string
          readonly writeEvents?: EventsWriter | undefined
          readonly after?: number | undefined
        }
      ) =>
        Effect.suspend(() => {
          const task = book.own(agentId, taskId)
          return task === undefined
            ? Effect.fail(new UnknownTask({ taskId }))
            : attachTo(task, events, undefined, connection, after, writeEvents)
        }),
      complete: completeOf(book, config),
      decide: decideOf(book, loops, host?.decidedElsewhere),
      /**
       * Cluster mode: a decision on `toolCallId` of `taskId`, a task of a tree decided at its root on another
       * runner (journaled there), reached the task's owner: it goes on once it waits for nothing more.
       */
      decided: (taskId: string, toolCallId: string): Effect.Effect<void> =>
        Effect.flatMap(hold(taskId), (task) => task === undefined ? Effect.void : decidedOn(task, toolCallId, loops.goOn)),
      /**
       * Stops the agent's task for `reason` (held here, taken up from the journal if need be), as an
       * `exec_agent` call past its deadline stops the task it started (cluster mode: on the task's owner).
       */
      stop: (agentId: string, taskId: string, reason: string): Effect.Effect<void> =>
        Effect.flatMap(Effect.option(held(agentId, taskId)), (task) =>
          Option.isSome(task) ? stop(book, task.value, reason) : Effect.void),
      /**
       * Cancels the agent's task (held here, taken up from the journal if need be; design: Cancelling a task),
       * `by` who (`agent <id>`, `operator <name>`): its end is `TaskCancelled`. False if it had ended already.
       */
      cancel: (agentId: string, taskId: string, by: string, reason: string): Effect.Effect<boolean, UnknownTask> =>
        Effect.flatMap(held(agentId, taskId), (task) => cancel(task, by, reason)),
      takeBack,
      ...upkeep(book, yield* Metrics.Exporting, routes),
      /** The calls given to the agents' serving processes (TaskRoutes.ts). */
      routes,
      /** The task, held here (taken up from the journal if need be); undefined if the journal does not hold it. */
      hold,
      /** The agent's task, held here (taken up from the journal if need be). */
      held,
      /** The task if it is held here now (never taken up from the journal): what an operator may watch. */
      find: (taskId: string) => book.tasks.get(taskId),
      /** Every task's events from now on, as they are emitted (`Book.watch`). */
      watch: book.watch
    }
  })

/** `submit` of the tasks: a new task made by `create`, or the one a submit with the same key made (a retry). */
const submitOf = (book: Book, ids: Ids["Type"], create: ReturnType<typeof createOf>) => {
  // The tasks submits with a key made, by agent and key: a repeat finds its task while the platform holds it.
  const submitted = new Map<string, string>()
  const remember = (key: string, taskId: string) => {
    submitted.delete(key)
    submitted.set(key, taskId)
    // The oldest go first: a retry comes within seconds, not after thousands of other submits.
    if (submitted.size > maxSubmitKeys) submitted.delete(submitted.keys().next().value!)
  }
  return (
    { agentId, events, output, processId, prompt, submitKey, writeEvents }: Caller & {
      readonly prompt: string
      readonly events?: EventsWanted | undefined
      readonly output?: TaskOutput | undefined
      readonly submitKey?: string | undefined
      readonly writeEvents?: EventsWriter | undefined
    },
    tools: Journal.TaskTools,
    connection: string
  ) =>
    Effect.suspend(() => {
      // A submit retried with its key (its answer was lost) is answered with the task the first made.
      const key = submitKey === undefined ? undefined : `${agentId}\n${submitKey}`
      const made = key === undefined ? undefined : submitted.get(key)
      const task = made === undefined ? undefined : book.own(agentId, made)
      if (task !== undefined) return attachTo(task, events, undefined, connection, undefined, writeEvents)
      // Unguessable as well as unique: knowing one task's id tells nothing of another's.
      const taskId = ids.make("task")
      if (key !== undefined) remember(key, taskId)
      return create(
        { taskId, agentId, processId, prompt, tools, output },
        (task) => attachTo(task, events, undefined, connection, undefined, writeEvents)
      )
    })
}

/** The tasks, as `makeTasks` gives them. */
export type Tasks = Effect.Effect.Success<ReturnType<typeof makeTasks>>
