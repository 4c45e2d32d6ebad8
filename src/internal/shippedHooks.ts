/** The tool hooks shipped with the runtime (design: Hooks): `Hooks.logging`, `Hooks.approval`, `Hooks.callBudget`. */
import { Duration, Effect, Option } from "effect"
import { Denied, ToolResult } from "../ToolResult.js"
import { UserPrompt, type UserPromptError } from "../UserPrompt.js"
import type { ToolCall, ToolHook } from "./toolHooks.js"

const denied = (call: ToolCall, reason: string): ToolResult =>
  ToolResult.failure(new Denied({ toolName: call.tool.name, reason }))

/** One structured log line per call: tool, call id, task, attempts, duration, outcome. */
export const logging: ToolHook = (call, proceed) =>
  Effect.timed(proceed).pipe(
    Effect.tap(([duration, result]) =>
      Effect.logInfo("tool call").pipe(Effect.annotateLogs({
        tool: call.tool.name,
        toolCallId: call.context.toolCallId,
        taskId: call.context.taskId,
        attempts: call.attempts(),
        durationMillis: Math.round(Duration.toMillis(duration)),
        outcome: result.success ? "success" : "error",
        reused: false
      }))
    ),
    Effect.map(([, result]) => result)
  )

/** Asks a person to approve a call of `toolName` with `input`: true for a yes. */
export const askApproval = (
  prompt: UserPrompt["Type"],
  toolName: string,
  input: unknown
): Effect.Effect<boolean, UserPromptError> =>
  Effect.map(prompt.ask(`Allow ${toolName} ${JSON.stringify(input)}? [y/N]`), (answer) => /^\s*y(es)?\s*$/i.test(answer))

/**
 * Tools made with `needsApproval: true` ask the `UserPrompt` service first; anything but a yes is
 * a `Denied` result the model sees, and so is the lack of anyone to ask. A call of a journaled
 * run was approved (or suspended) by the run itself (design: Durable runs) and is not asked again.
 */
export const approval: ToolHook = (call, proceed) => {
  if (!call.tool.needsApproval || call.approved) return proceed
  return Effect.flatMap(Effect.serviceOption(UserPrompt), (prompt) => {
    if (Option.isNone(prompt)) {
      return Effect.succeed(denied(call, "needs approval, and no user is available to give it"))
    }
    return askApproval(prompt.value, call.tool.name, call.input).pipe(
      Effect.flatMap((yes) =>
        yes ? proceed : Effect.succeed(denied(call, "the user did not approve this call; it did not run"))
      )
    )
  })
}

/**
 * At most `limit` calls per tool per run (agent runs) or per task (served calls); past it, a
 * `Denied` result. An agent run's counts are kept in the run's own state, so they go with it.
 */
export const callBudget = (limit: number): ToolHook => {
  const key = {}
  // Outside an agent run nothing says when a task ends: its counts stay for the life of the hook.
  const byTask = new Map<string, Map<string, number>>()
  const countsOf = (call: ToolCall): Map<string, number> => {
    if (call.run !== undefined) return call.run.get(key, () => new Map<string, number>())
    let counts = byTask.get(call.context.taskId)
    if (counts === undefined) byTask.set(call.context.taskId, counts = new Map())
    return counts
  }
  return (call, proceed) =>
    Effect.suspend(() => {
      const counts = countsOf(call)
      const n = (counts.get(call.tool.name) ?? 0) + 1
      counts.set(call.tool.name, n)
      if (n <= limit) return proceed
      return Effect.succeed(denied(call, `the budget of ${limit} calls for this run is spent; it did not run`))
    })
}
