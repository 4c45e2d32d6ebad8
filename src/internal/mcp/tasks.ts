/**
 * MCP tasks as a server runs them (design: MCP tasks): a task-augmented `tools/call` is written to the task store,
 * then run through the door like any call (deadline, retries, hooks, the call's trace), its task id the call's task
 * and call id (the key an idempotent tool's effect is keyed on); its result is written when it ends. Each session's
 * SDK `Server` is given the store seen by its principal (`storeFor`): another principal's task is not found, listed
 * or cancelled. `tasks/cancel` interrupts the handler (its finalizers run before the answer). Each status change is
 * told to the principal's sessions, and what a task's call asks its client (an approval, `ask_user`, its model)
 * goes through one of them, the task `input_required` meanwhile (taskSessions.ts). A server holds the tasks it runs
 * by a lease in the store; at start and every third of a lease, it takes back those whose lease lapsed (`resume`).
 */
import type { TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js"
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { type CallToolResult, type CreateTaskResult, ErrorCode, type Task } from "@modelcontextprotocol/sdk/types.js"
import { Clock, Duration, Effect, Fiber, Runtime, Schedule, type Scope } from "effect"
import { Ids } from "../../Ids.js"
import { defaults, McpTaskStore, type Status, type StoredTask } from "../../McpTasks.js"
import type * as Tool from "../../Tool.js"
import { OutcomeUnknown, type ToolResult, UnknownTool } from "../../ToolResult.js"
import type * as Door from "../call/door.js"
import * as TaskSessions from "./taskSessions.js"

/** Whether a tool may, must or must not be called as a task (`execution.taskSupport` in `tools/list`). */
export type TaskSupport = "required" | "optional" | "forbidden"

/** How a server's tools are run as tasks. */
export interface TasksOptions {
  /** A tool whose timeout is at least this long is `optional`; others `forbidden`. Default 5 seconds. */
  readonly threshold?: Duration.DurationInput | undefined
  /** Per tool name, its support, over the threshold's rule: `required` for a tool only ever called as a task. */
  readonly tools?: Readonly<Record<string, TaskSupport>> | undefined
  /** Told to clients as the time between polls. Default 1 second. */
  readonly pollInterval?: Duration.DurationInput | undefined
  /** A task's time to live when the client asks none. Default 1 hour. */
  readonly ttl?: Duration.DurationInput | undefined
  /** The longest time to live granted. Default 1 day. */
  readonly maxTtl?: Duration.DurationInput | undefined
  /**
   * How long this server's hold on the tasks it runs lasts unless renewed (it renews every third of it): another
   * server on the same store (or this one started again) takes back a task whose hold lapsed. Default 10 seconds.
   */
  readonly lease?: Duration.DurationInput | undefined
}

/** The tasks of one server (every session's). */
export interface TaskFace {
  readonly supportOf: (tool: Tool.Any) => TaskSupport
  /** The SDK's `TaskStore` as `principal` sees it: only its own tasks. */
  readonly storeFor: (principal: string) => TaskStore
  /** `server`, a session of `principal`: told its tasks' status changes, asked their questions (once initialized). */
  readonly attach: (principal: string, server: Server) => void
  /** A new task of `principal` calling `tool`, started from the session `from`; what `tools/call` answers at once. */
  readonly create: (
    principal: string,
    tool: Tool.Any,
    args: unknown,
    ttl: number | undefined,
    traceparent: unknown,
    from?: Server
  ) => Promise<CreateTaskResult>
  /**
   * Takes back the tasks a stopped server left (their leases lapsed): an idempotent tool's run again, any other's
   * failed; then renews this server's leases and takes back lapsed ones every third of a lease, until the scope ends.
   */
  readonly resume: Effect.Effect<void, never, Scope.Scope>
}

/** A JSON-RPC error whose message goes out as it is (an `McpError` would say "MCP error <code>: " twice). */
const protocolError = (code: number, message: string): Error & { readonly code: number } =>
  Object.assign(new Error(message), { code })

/** What a server with tasks declares: `tasks/list`, `tasks/cancel`, and `tools/call` as a task. */
export const capability = { list: {}, cancel: {}, requests: { tools: { call: {} } } } as const

/**
 * Whether a `tools/call` of `tool` runs as a task: when it asks to (`task` in its params) and the tool allows it.
 * A task asked of a `forbidden` tool, or a `required` tool called without one, is a protocol error naming the tool.
 */
export const asTask = (face: TaskFace, tool: Tool.Any, task: unknown): boolean => {
  const support = face.supportOf(tool)
  if (task !== undefined && support === "forbidden") {
    throw protocolError(ErrorCode.InvalidParams, `${tool.name} cannot be called as a task (its execution.taskSupport is forbidden)`)
  }
  if (task === undefined && support === "required") {
    throw protocolError(
      ErrorCode.MethodNotFound,
      `${tool.name} must be called as a task (its execution.taskSupport is required): add params.task`
    )
  }
  return task !== undefined
}

const notFound = (taskId: string) => protocolError(ErrorCode.InvalidParams, `Task not found: ${taskId}`)

/** A task in MCP's words. */
const taskOf = (task: StoredTask): Task => ({
  taskId: task.taskId,
  status: task.status,
  ttl: task.ttl,
  createdAt: new Date(task.createdAt).toISOString(),
  lastUpdatedAt: new Date(task.updatedAt).toISOString(),
  pollInterval: task.pollInterval,
  ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage })
})

/** A failed call's result in MCP's words. */
const failedResult = (text: string): CallToolResult => ({ content: [{ type: "text", text }], isError: true })

/**
 * The SDK's `TaskStore` over `store` as `principal` sees it; `cancel` interrupts a task's running call, `changed`
 * tells the principal's sessions of a status set here, `touched` that one of them asked about a task.
 */
const principalStore = (
  principal: string,
  store: McpTaskStore["Type"],
  promise: <A>(effect: Effect.Effect<A>) => Promise<A>,
  cancel: (taskId: string) => Effect.Effect<void>,
  changed: (principal: string, taskId: string) => Effect.Effect<void>,
  touched: (principal: string) => void
): TaskStore => {
  const own = (taskId: string) => {
    touched(principal)
    return promise(store.get(principal, taskId))
  }
  return {
    createTask: () => Promise.reject(protocolError(ErrorCode.InvalidRequest, "a task is created by tools/call")),
    getTask: async (taskId) => {
      const task = await own(taskId)
      return task === undefined ? null : taskOf(task)
    },
    storeTaskResult: async (taskId, status, result) => {
      if ((await own(taskId)) === undefined) throw notFound(taskId)
      await promise(store.finish(taskId, status, undefined, JSON.stringify(result)))
    },
    getTaskResult: async (taskId) => {
      const task = await own(taskId)
      if (task === undefined) throw notFound(taskId)
      if (task.result === undefined) {
        throw protocolError(ErrorCode.InvalidParams, `Task ${taskId} is ${task.status}: it has no result`)
      }
      return JSON.parse(task.result) as CallToolResult
    },
    updateTaskStatus: async (taskId, status, statusMessage) => {
      if ((await own(taskId)) === undefined) throw notFound(taskId)
      const set = await promise(store.setStatus(taskId, status as Status, statusMessage))
      // Set first: the call's end, which may come meanwhile, no longer overwrites it.
      if (set && status === "cancelled") await promise(cancel(taskId))
      if (set) await promise(changed(principal, taskId))
    },
    listTasks: async (cursor) => {
      const page = await promise(Effect.either(store.list(principal, cursor, defaults.pageSize)))
      if (page._tag === "Left") throw new Error(page.left)
      const tasks = page.right.tasks.map(taskOf)
      return page.right.nextCursor === undefined ? { tasks } : { tasks, nextCursor: page.right.nextCursor }
    }
  }
}

/**
 * How a server's tasks reach their principal's sessions: `changed` tells them a task's status (as it is now);
 * `servicesOf` is what a task's call may ask (an approval, `ask_user`; the client's model) through a session of its
 * principal, the task `input_required` meanwhile: a new task's, what the session that created it (or another of
 * the principal's) can be asked, else nothing, and the call goes on as without tasks (an approval refused). A task
 * taken back after a restart waits for a session to ask, within its time to live.
 */
const asking = (
  store: McpTaskStore["Type"],
  sessions: TaskSessions.TaskSessions,
  clock: Clock.Clock,
  maxTtl: number
) => {
  const changed = (principal: string, taskId: string) =>
    Effect.flatMap(store.get(principal, taskId), (task) => task === undefined ? Effect.void : sessions.notify(principal, taskOf(task)))
  const servicesOf = (task: StoredTask, from: Server | undefined, resumed: boolean) => {
    const left = task.ttl === null ? maxTtl : task.createdAt + task.ttl - clock.unsafeCurrentTimeMillis()
    return sessions.services({
      principal: task.principal,
      taskId: task.taskId,
      from,
      waitMillis: Math.max(0, left),
      all: resumed,
      status: (waiting) =>
        store.setStatus(task.taskId, waiting === undefined ? "working" : "input_required", waiting).pipe(
          Effect.flatMap((set) => set ? changed(task.principal, task.taskId) : Effect.void)
        )
    })
  }
  return { changed, servicesOf }
}

/**
 * A server's hold on the tasks it runs (design: MCP tasks), as `resume`: the tasks whose leases lapsed claimed and
 * taken back (an idempotent tool's run again by `run`, unless it runs here still; any other's failed, outcome
 * unknown); then, every third of a lease, this server's leases renewed (a task it no longer holds, cancelled or
 * taken by another server, interrupted here) and lapsed ones taken back.
 */
const leases = (options: {
  readonly store: McpTaskStore["Type"]
  readonly door: Door.Door
  readonly running: ReadonlyMap<string, Fiber.RuntimeFiber<void>>
  readonly changed: (principal: string, taskId: string) => Effect.Effect<void>
  readonly leaseMillis: number
  readonly lease: () => { readonly owner: string; readonly until: number }
  readonly run: (task: StoredTask, tool: Tool.Any) => void
}): Effect.Effect<void, never, Scope.Scope> => {
  const { changed, door, lease, leaseMillis, run, running, store } = options
  /** The tasks claimed: an idempotent tool's run again (unless it runs here still), any other's failed. */
  const takeBack = (claimed: ReadonlyArray<StoredTask>) => Effect.forEach(claimed, (task) => {
    if (running.has(task.taskId)) return Effect.void
    const tool = door.lookup(task.tool)
    if (tool instanceof UnknownTool) {
      return Effect.asVoid(store.finish(task.taskId, "failed", tool.text, JSON.stringify(failedResult(tool.text))))
    }
    if (tool.idempotent) {
      return Effect.sync(() => run(task, tool)).pipe(
        Effect.zipLeft(Effect.logInfo(`MCP task ${task.taskId} of ${tool.name} was running when its server stopped: run again`))
      )
    }
    const text = new OutcomeUnknown({ toolName: tool.name, earlierAttempt: "unfinished" }).text
    return Effect.zipRight(store.finish(task.taskId, "failed", text, JSON.stringify(failedResult(text))), changed(task.principal, task.taskId))
  }, { discard: true })

  /** Renews this server's leases (a task it no longer holds, cancelled or taken, is interrupted), takes back lapsed ones. */
  const keep = Effect.gen(function*() {
    // Those running before the renewal: a task created meanwhile is held, though the renewal did not see it.
    const before = [...running]
    const held = yield* store.renew(lease())
    yield* Fiber.interruptAll(before.filter(([taskId]) => !held.has(taskId)).map(([, fiber]) => fiber))
    yield* takeBack(yield* store.claim(lease()))
  }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("MCP tasks: the leases could not be renewed", cause)))

  return Effect.gen(function*() {
    yield* takeBack(yield* store.claim(lease()))
    const period = Duration.millis(leaseMillis / 3)
    yield* Effect.forkScoped(Effect.delay(Effect.repeat(keep, Schedule.spaced(period)), period))
  })
}

/**
 * The task face over the store in context, running calls through `door` on `runtime`; `encode` turns a call's
 * `ToolResult` into its `tools/call` result. Tasks running when the scope closes are interrupted and stay
 * unfinished in the store, their leases ended: the next server on it takes them back at once.
 */
export const make = (options: {
  readonly door: Door.Door
  readonly runtime: Runtime.Runtime<any>
  readonly encode: (tool: Tool.Any, result: ToolResult) => CallToolResult
  readonly tasks: TasksOptions | undefined
}): Effect.Effect<TaskFace, never, McpTaskStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* McpTaskStore
    const ids = yield* Ids
    const { door, encode, runtime } = options
    const threshold = Duration.decode(options.tasks?.threshold ?? defaults.threshold)
    const pollInterval = Duration.toMillis(options.tasks?.pollInterval ?? defaults.pollInterval)
    const ttlDefault = Duration.toMillis(options.tasks?.ttl ?? defaults.ttl)
    const maxTtl = Duration.toMillis(options.tasks?.maxTtl ?? defaults.maxTtl)
    const running = new Map<string, Fiber.RuntimeFiber<void>>()
    const promise = <A>(effect: Effect.Effect<A>) => Runtime.runPromise(runtime)(effect)
    const clock = yield* Effect.clock
    const sessions = TaskSessions.make()
    // This server, as the owner of the tasks it runs; they are left to the next at once when it stops.
    const owner = ids.make("process")
    const leaseMillis = Duration.toMillis(options.tasks?.lease ?? defaults.lease)
    const lease = () => ({ owner, until: clock.unsafeCurrentTimeMillis() + leaseMillis })
    yield* Effect.addFinalizer(() => Effect.zipRight(Fiber.interruptAll([...running.values()]), store.release(owner)))

    const { changed, servicesOf } = asking(store, sessions, clock, maxTtl)

    const supportOf = (tool: Tool.Any): TaskSupport =>
      options.tasks?.tools?.[tool.name] ?? (Duration.greaterThanOrEqualTo(tool.timeout, threshold) ? "optional" : "forbidden")

    /**
     * Runs the stored task's call in a fiber of its own, its questions asked through `servicesOf`; its result written
     * when it ends (not when interrupted), and told to the principal's sessions.
     */
    const run = (task: StoredTask, tool: Tool.Any, traceparent: unknown, from: Server | undefined, resumed: boolean) => {
      const asked = servicesOf(task, from, resumed)
      const started = door.open().run(tool.name, JSON.parse(task.arguments) as unknown, {
        taskId: task.taskId,
        toolCallId: task.taskId,
        traceparent
      })
      const call = Effect.provide(started, asked).pipe(
        Effect.flatMap((result) =>
          store.finish(
            task.taskId,
            result.error === undefined ? "completed" : "failed",
            result.error,
            JSON.stringify(encode(tool, result))
          )
        ),
        Effect.flatMap((finished) => finished ? changed(task.principal, task.taskId) : Effect.void)
      )
      const fiber = Runtime.runFork(runtime)(call)
      running.set(task.taskId, fiber)
      fiber.addObserver(() => void running.delete(task.taskId))
    }

    const create: TaskFace["create"] = (principal, tool, args, ttl, traceparent, from) =>
      promise(Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const task: StoredTask = {
          taskId: ids.make("task"),
          principal,
          tool: tool.name,
          arguments: JSON.stringify(args ?? {}),
          status: "working",
          statusMessage: undefined,
          ttl: Math.min(ttl ?? ttlDefault, maxTtl),
          pollInterval,
          createdAt: now,
          updatedAt: now,
          result: undefined
        }
        yield* store.create(task, lease())
        run(task, tool, traceparent, from, false)
        return { task: taskOf(task) }
      }))

    const cancel = (taskId: string) =>
      Effect.suspend(() => {
        const fiber = running.get(taskId)
        return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
      })

    const storeFor = (principal: string) => principalStore(principal, store, promise, cancel, changed, sessions.touched)

    const resume = leases({ store, door, running, changed, leaseMillis, lease, run: (task, tool) => run(task, tool, undefined, undefined, true) })

    return { supportOf, storeFor, attach: sessions.attach, create, resume }
  })
