/**
 * MCP tasks as a server runs them (design: MCP tasks): a task-augmented `tools/call` is written to the task store,
 * then run through the door like any call (deadline, retries, hooks, the call's trace), its task id the call's task
 * and call id (the key an idempotent tool's effect is keyed on); its result is written when it ends. Each session's
 * SDK `Server` is given the store seen by its principal (`storeFor`): another principal's task is not found, listed
 * or cancelled. `tasks/cancel` interrupts the handler (its finalizers run before the answer). At start, the tasks a
 * stopped process left are taken back (`resume`).
 */
import type { TaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js"
import { type CallToolResult, type CreateTaskResult, ErrorCode, type Task } from "@modelcontextprotocol/sdk/types.js"
import { Clock, Duration, Effect, Fiber, Runtime, type Scope } from "effect"
import { Ids } from "../../Ids.js"
import { defaults, McpTaskStore, type Status, type StoredTask } from "../../McpTasks.js"
import type * as Tool from "../../Tool.js"
import { OutcomeUnknown, type ToolResult, UnknownTool } from "../../ToolResult.js"
import type * as Door from "../call/door.js"

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
}

/** The tasks of one server (every session's). */
export interface TaskFace {
  readonly supportOf: (tool: Tool.Any) => TaskSupport
  /** The SDK's `TaskStore` as `principal` sees it: only its own tasks. */
  readonly storeFor: (principal: string) => TaskStore
  /** A new task of `principal` calling `tool`, started; what `tools/call` answers at once. */
  readonly create: (
    principal: string,
    tool: Tool.Any,
    args: unknown,
    ttl: number | undefined,
    traceparent: unknown
  ) => Promise<CreateTaskResult>
  /** Takes back the tasks a stopped process left: an idempotent tool's run again, any other's failed. */
  readonly resume: Effect.Effect<void>
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

/** The SDK's `TaskStore` over `store` as `principal` sees it; `cancel` interrupts a task's running call. */
const principalStore = (
  principal: string,
  store: McpTaskStore["Type"],
  promise: <A>(effect: Effect.Effect<A>) => Promise<A>,
  cancel: (taskId: string) => Effect.Effect<void>
): TaskStore => {
  const own = (taskId: string) => promise(store.get(principal, taskId))
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
      const changed = await promise(store.setStatus(taskId, status as Status, statusMessage))
      // Set first: the call's end, which may come meanwhile, no longer overwrites it.
      if (changed && status === "cancelled") await promise(cancel(taskId))
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
 * The task face over the store in context, running calls through `door` on `runtime`; `encode` turns a call's
 * `ToolResult` into its `tools/call` result. Tasks running when the scope closes are interrupted and stay
 * `working` in the store: the next process on it takes them back.
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
    yield* Effect.addFinalizer(() => Fiber.interruptAll([...running.values()]))

    const supportOf = (tool: Tool.Any): TaskSupport =>
      options.tasks?.tools?.[tool.name] ?? (Duration.greaterThanOrEqualTo(tool.timeout, threshold) ? "optional" : "forbidden")

    /** Runs the stored task's call in a fiber of its own; its result written when it ends (not when interrupted). */
    const run = (task: StoredTask, tool: Tool.Any, traceparent: unknown) => {
      const call = door.open().run(tool.name, JSON.parse(task.arguments) as unknown, {
        taskId: task.taskId,
        toolCallId: task.taskId,
        traceparent
      }).pipe(
        Effect.flatMap((result) =>
          store.finish(
            task.taskId,
            result.error === undefined ? "completed" : "failed",
            result.error,
            JSON.stringify(encode(tool, result))
          )
        ),
        Effect.asVoid
      )
      const fiber = Runtime.runFork(runtime)(call)
      running.set(task.taskId, fiber)
      fiber.addObserver(() => void running.delete(task.taskId))
    }

    const create: TaskFace["create"] = (principal, tool, args, ttl, traceparent) =>
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
        yield* store.create(task)
        run(task, tool, traceparent)
        return { task: taskOf(task) }
      }))

    const cancel = (taskId: string) =>
      Effect.suspend(() => {
        const fiber = running.get(taskId)
        return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
      })

    const storeFor = (principal: string) => principalStore(principal, store, promise, cancel)

    const resume = Effect.gen(function*() {
      for (const task of yield* store.unfinished) {
        const tool = door.lookup(task.tool)
        if (tool instanceof UnknownTool) {
          yield* store.finish(task.taskId, "failed", tool.text, JSON.stringify(failedResult(tool.text)))
        } else if (tool.idempotent) {
          yield* Effect.logInfo(`MCP task ${task.taskId} of ${tool.name} was running when its server stopped: run again`)
          run(task, tool, undefined)
        } else {
          const text = new OutcomeUnknown({ toolName: tool.name, earlierAttempt: "unfinished" }).text
          yield* store.finish(task.taskId, "failed", text, JSON.stringify(failedResult(text)))
        }
      }
    })

    return { supportOf, storeFor, create, resume }
  })
