/**
 * Tool hooks, beside the pipeline that runs them (design: Hooks): what wraps every call that goes
 * through `Invocation` (agent runs, served calls and MCP alike). None installed: the pipeline takes
 * its usual path and pays one context lookup.
 */
import { Cause, Context, Effect } from "effect"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import { Denied, HookFailed, ToolResult } from "../../ToolResult.js"

/**
 * What hooks keep for one run of calls, dropped with it: per-run budgets and counters. An agent run
 * has one, a served task one per follower in this process (`Serve`), an MCP session one (`Mcp`).
 */
export class RunState {
  private values: Map<object, unknown> | undefined = undefined

  /** What the calls are part of, as texts about it name it. */
  constructor(readonly kind: "run" | "task" | "session" = "run") {}

  /** The value kept under `key` for this run, made by `make` at its first use. */
  get<A>(key: object, make: () => A): A {
    const values = this.values ??= new Map()
    if (values.has(key)) return values.get(key) as A
    const value = make()
    values.set(key, value)
    return value
  }
}

/** A call as a tool hook sees it. */
export interface ToolCall {
  readonly tool: Tool.Any
  /** The decoded input (after the strict decode of design: Input; hooks never see bad input). */
  readonly input: unknown
  /** Task, call id and deadline; `attempt` is the first attempt's. */
  readonly context: ToolCallInfo
  /** The attempt number reached so far (retries inside the call raise it). */
  readonly attempts: () => number
  /**
   * The state of the run the call is part of (an agent run, a served task, an MCP session); undefined
   * for a call given none (a bare `Invocation.run`).
   */
  readonly run: RunState | undefined
  /**
   * A person approved this call already, through the run's journal or the platform (design: Durable runs):
   * `Hooks.approval` does not ask again.
   */
  readonly approved: boolean
}

/** The calls a hook approved (`approved`): the call objects the pipeline made, so a copy approves nothing. */
const approvedByHook = new WeakSet<ToolCall>()

/**
 * `proceed` as a hook that gives the call its approval runs it (design: Hooks): a call of a tool with
 * `needsApproval` runs only if it was approved through the journal or the platform, or a hook
 * proceeded through this. Marks `call` (the one the hook was given) when the effect runs, not before.
 */
export const approved = (call: ToolCall, proceed: Effect.Effect<ToolResult>): Effect.Effect<ToolResult> =>
  Effect.suspend(() => {
    approvedByHook.add(call)
    return proceed
  })

/** True when `call` may run as far as approval goes: its tool needs none, or it was given one. */
export const mayRun = (call: ToolCall): boolean =>
  !call.tool.needsApproval || call.approved || approvedByHook.has(call)

/**
 * The refusal of a call that needs approval and was given none (design: Hooks): approvals fail closed,
 * and the text says how to give one.
 */
export const notApproved = (toolName: string): Denied =>
  new Denied({
    toolName,
    reason: "needs approval, and nothing here gave it: install Hooks.approval (it asks the UserPrompt service), " +
      "run the agent with a journal and decide with Agent.approve, or approve the call on a platform with a journal; " +
      "it did not run"
  })

/**
 * Wraps a call: `proceed` runs it (handler, deadline, retries, output encoding) and may be run
 * again, or not at all (deny). What the hook returns is what the caller gets. `R`: the services the
 * hook's effect needs (`Hooks.layer` gives them from where it is built); none by default.
 */
export type ToolHook<R = never> = (call: ToolCall, proceed: Effect.Effect<ToolResult>) => Effect.Effect<ToolResult, unknown, R>

/** The tool hooks in force, the first outermost: none by default. Each needs nothing (`Hooks.layer` gave it its services). */
export class ToolHooks extends Context.Reference<ToolHooks>()("agent-tools/ToolHooks", {
  defaultValue: (): ReadonlyArray<ToolHook> => []
}) {}

/** Runs `proceed` through `hooks`; a hook's failure or defect becomes the call's `HookFailed` result. */
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
