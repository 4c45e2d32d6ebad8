/**
 * The pipeline's log lines about a handler, written in the process where it ran, through the
 * calling fiber's loggers and annotations (design: Logs): a handler's raw failure (a throw, a
 * rejection, a defect: the cause with its stack; the model reads only the error text), and a
 * synchronous body that held the event loop past the threshold. Both are rare, so each is written
 * at once, on a runtime of the calling fiber, without making the call itself an Effect.
 */
import { type Cause, type Context, Effect, type Fiber, LogLevel, Runtime } from "effect"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"

/** The caller as a log line needs it: its services and its fiber refs (loggers, level, annotations). */
export interface Caller {
  readonly context: Context.Context<never>
  readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
}

const write = (caller: Caller, line: Effect.Effect<void>): void =>
  Runtime.runSync(
    Runtime.make({ context: caller.context, fiberRefs: caller.fiber.getFiberRefs(), runtimeFlags: Runtime.defaultRuntimeFlags })
  )(line)

/** Logs a handler's failure at `level` ("None": not at all): the tool, the call's ids and the cause, stack included. */
export const handlerFailed = (
  caller: Caller,
  tool: Tool.Any,
  info: ToolCallInfo,
  cause: Cause.Cause<unknown>,
  level: LogLevel.Literal
): void => {
  if (level === "None") return
  write(
    caller,
    Effect.logWithLevel(LogLevel.fromLiteral(level), `${tool.name} failed (attempt ${info.attempt}); the model reads its error text`, cause).pipe(
      Effect.annotateLogs({ tool: tool.name, toolCallId: info.toolCallId, taskId: info.taskId })
    )
  )
}

/** Warns that `tool`'s synchronous body held the event loop for `millis`, and says the line that moves it off. */
export const blockedLoop = (caller: Caller, tool: Tool.Any, info: ToolCallInfo, millis: number): void =>
  write(
    caller,
    Effect.logWarning(
      `${tool.name} held the event loop for ${millis} ms: nothing else ran meanwhile. Run its body on a worker ` +
        `thread with one line in its Tool.make options, worker: import.meta.url (and export the tool)`
    ).pipe(Effect.annotateLogs({ tool: tool.name, toolCallId: info.toolCallId, taskId: info.taskId }))
  )
