/**
 * Hooks (design: Hooks): what wraps every call, or changes the agent's own state, is a hook, not a tool. A
 * tool hook wraps each call that goes through `Invocation` (agent runs, served calls and MCP alike);
 * a turn hook wraps each model turn of the agent loop. Provided as a Layer; they compose in order
 * (the first is outermost). A hook that fails gives the call an error result. None installed: the
 * pipeline takes its usual path and pays one context lookup.
 */
import { Cause, Context, Duration, Effect, Layer, Option } from "effect"
import type * as LanguageModel from "./LanguageModel.js"
import type * as Tool from "./Tool.js"
import type { ToolCallInfo } from "./ToolContext.js"
import { Denied, HookFailed, ToolResult } from "./ToolResult.js"
import { UserPrompt } from "./UserPrompt.js"

/** A call as a tool hook sees it. */
export interface ToolCall {
  readonly tool: Tool.Any
  /** The decoded input (after the strict decode of design: Input; hooks never see bad input). */
  readonly input: unknown
  /** Task, call id and deadline; `attempt` is the first attempt's. */
  readonly context: ToolCallInfo
  /** The attempt number reached so far (retries inside the call raise it). */
  readonly attempts: () => number
}

/**
 * Wraps a call: `proceed` runs it (handler, deadline, retries, output encoding) and may be run
 * again, or not at all (deny). What the hook returns is what the caller gets.
 */
export type ToolHook = (call: ToolCall, proceed: Effect.Effect<ToolResult>) => Effect.Effect<ToolResult, unknown>

/** A model turn as a turn hook sees it; a hook may pass on other instructions or fewer tools. */
export interface Turn {
  readonly step: number
  readonly instructions: string | undefined
  readonly tools: ReadonlyArray<LanguageModel.ToolDefinition>
}

/** Wraps a model turn: `proceed(turn)` asks the model with `turn`'s instructions and tools. */
export type TurnHook = (
  turn: Turn,
  proceed: (turn: Turn) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>
) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>

/** The hooks installed. */
export interface Installed {
  readonly tool: ReadonlyArray<ToolHook>
  readonly turn: ReadonlyArray<TurnHook>
}

/** The hooks in force: none by default. */
export class Hooks extends Context.Reference<Hooks>()("agent-tools/Hooks", {
  defaultValue: (): Installed => ({ tool: [], turn: [] })
}) {}

/** Installs hooks, in order: the first wraps the others. */
export const layer = (
  hooks: { readonly tool?: ReadonlyArray<ToolHook>; readonly turn?: ReadonlyArray<TurnHook> }
): Layer.Layer<never> => Layer.succeed(Hooks, { tool: hooks.tool ?? [], turn: hooks.turn ?? [] }) as Layer.Layer<never>

/** Runs `proceed` through `hooks`; a hook's failure or defect becomes the call's error result. */
export const runToolHooks = (
  hooks: ReadonlyArray<ToolHook>,
  call: ToolCall,
  proceed: Effect.Effect<ToolResult>
): Effect.Effect<ToolResult> => {
  let wrapped = proceed
  for (let i = hooks.length - 1; i >= 0; i--) {
    const hook = hooks[i]!
    const next = wrapped
    // Each hook fails closed on its own, so the one around it sees a result, never a failure.
    wrapped = Effect.catchAllCause(Effect.suspend(() => hook(call, next)), (cause) =>
      // An interruption stays one (the call was cancelled).
      Cause.isInterruptedOnly(cause)
        ? Effect.interrupt
        : Effect.succeed(ToolResult.failure(new HookFailed({ toolName: call.tool.name, cause }))))
  }
  return wrapped
}

/** Runs a model turn through `hooks`. */
export const runTurnHooks = (
  hooks: ReadonlyArray<TurnHook>,
  turn: Turn,
  ask: (turn: Turn) => Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure>
): Effect.Effect<LanguageModel.ModelTurn, LanguageModel.ModelFailure> => {
  let wrapped = ask
  for (let i = hooks.length - 1; i >= 0; i--) {
    const hook = hooks[i]!
    const next = wrapped
    wrapped = (t) => hook(t, next)
  }
  return wrapped(turn)
}

// ---------------------------------------------------------------------------------------------
// The hooks shipped with the runtime.

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

/**
 * Tools made with `needsApproval: true` ask the `UserPrompt` service first; anything but a yes is
 * an error result the model sees, and so is the lack of anyone to ask.
 */
export const approval: ToolHook = (call, proceed) => {
  if (!call.tool.needsApproval) return proceed
  return Effect.flatMap(Effect.serviceOption(UserPrompt), (prompt) => {
    if (Option.isNone(prompt)) {
      return Effect.succeed(denied(call, "needs approval, and no user is available to give it"))
    }
    return prompt.value.ask(`Allow ${call.tool.name} ${JSON.stringify(call.input)}? [y/N]`).pipe(
      Effect.flatMap((answer) =>
        /^\s*y(es)?\s*$/i.test(answer)
          ? proceed
          : Effect.succeed(denied(call, "the user did not approve this call; it did not run"))
      )
    )
  })
}

/** At most `limit` calls per tool per run (agent runs) or per task (served calls); past it, an error result. */
export const callBudget = (limit: number): ToolHook => {
  const used = new Map<string, number>()
  return (call, proceed) =>
    Effect.suspend(() => {
      const key = `${call.context.taskId}\u0000${call.tool.name}`
      const n = (used.get(key) ?? 0) + 1
      used.set(key, n)
      return n <= limit
        ? proceed
        : Effect.succeed(denied(call, `the budget of ${limit} calls for this run is spent; it did not run`))
    })
}
