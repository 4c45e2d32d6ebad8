/** The tool hooks shipped with the runtime (design: Hooks): `Hooks.logging`, `Hooks.approval`, `Hooks.callBudget`. */
import { Duration, Effect, Option } from "effect"
import { Denied, ToolResult } from "../../ToolResult.js"
import { UserPrompt, type UserPromptError } from "../../UserPrompt.js"
import { approved, mayRun, type ToolCall, type ToolHook } from "./tool.js"

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
 * Tools made with `needsApproval: true` ask the `UserPrompt` service first; a yes approves the call
 * (`approved`), anything else is a `Denied` result the model sees, and so is the lack of anyone to
 * ask. A call approved already (through a journaled run or the platform, design: Durable runs; or by a
 * hook around this one) is not asked again.
 */
export const approval: ToolHook = (call, proceed) => {
  if (mayRun(call)) return proceed
  return Effect.flatMap(Effect.serviceOption(UserPrompt), (prompt) => {
    if (Option.isNone(prompt)) {
      return Effect.succeed(denied(call, "needs approval, and no user is available to give it"))
    }
    return askApproval(prompt.value, call.tool.name, call.input).pipe(
      Effect.flatMap((yes) =>
        yes ? approved(call, proceed) : Effect.succeed(denied(call, "the user did not approve this call; it did not run"))
      )
    )
  })
}

/**
 * At most `limit` calls per tool per run state (design: Hooks): per agent run, per served task (its
 * follower in this process), per MCP session; past it, a `Denied` result. The counts are kept in the
 * run state, so they go with it: the hook itself keeps nothing. A call given no run state (a bare
 * `Invocation.run`) is a budget of its own: it counts as its first call.
 */
export const callBudget = (limit: number): ToolHook => {
  const key = {}
  return (call, proceed) =>
    Effect.suspend(() => {
      const counts = call.run?.get(key, () => new Map<string, number>())
      const n = (counts?.get(call.tool.name) ?? 0) + 1
      counts?.set(call.tool.name, n)
      if (n <= limit) return proceed
      return Effect.succeed(denied(call, `the budget of ${limit} ${limit === 1 ? "call" : "calls"} for this ${call.run?.kind ?? "call"} is spent; it did not run`))
    })
}
