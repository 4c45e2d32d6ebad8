/**
 * The pipeline behind `Invocation.run` (design: Input, Error text, Deadlines, Retries, Call context), and its fast
 * path for loops that start many calls at once (the agent loop): a call started on the caller's
 * stack that completes synchronously is its `ToolResult`, with no fiber switch; one that suspends is
 * an effect awaiting it. Only the door (`door.ts`) starts calls here: every face goes through it, and
 * `Invocation.run` is its `runTool`.
 *
 * The stages, in order: `traced` (the call's span) -> `admit` (deadline check, strict decode) ->
 * `withHooks` (the tool hooks around the rest) -> `runHandler` (the attempts, then `toResult`) ->
 * `withRetries` (re-runs a failed attempt) -> `runAttempt` (one run of the handler, within the
 * deadline) -> `toResult` (output encode, JSON and limits check, the failure's kind and text).
 * Every failure on the way becomes a failed `ToolResult`; nothing escapes as a defect.
 *
 * The stages from `deduped` to `runHandler` are here; the rest, and the parts they run, live in
 * modules beside this one that code outside `internal/call/` does not import: `span.ts` (`traced`'s
 * span and count), `input.ts` (`admit`'s checks and decode, on the tool's `compiled.ts` parts),
 * `attempt.ts` (`runAttempt`), `retries.ts` (`withRetries`) and `result.ts` (`toResult`,
 * `checkResult`). The configuration and the observer (`config.ts`), the caller's fiber and the
 * options (`caller.ts`) are declared there too, and re-exported here and by `Invocation`, so that
 * none of them needs anything of this module or of `Invocation` (no import cycle).
 */
import { Context, Effect, Exit, type Tracer } from "effect"
import { Ids } from "../../Ids.js"
import * as Reuse from "./reuse.js"
import { awaitStarted, type Started } from "./reuse.js"
import { mayRun, notApproved, runToolHooks, type ToolCall, ToolHooks } from "../hooks/tool.js"
import * as Metrics from "../util/metrics.js"
import type * as Tool from "../../Tool.js"
import type { ToolCallInfo } from "../../ToolContext.js"
import { DeadlinePassed, InvalidInput, type ToolResult } from "../../ToolResult.js"
import { type Outcome, runAttempt } from "./attempt.js"
import { CallingFiber, LocalCallInfo, onFiber, type Options, settledInfo } from "./caller.js"
import { type Compiled, compile } from "./compiled.js"
import { expiringThresholdMillis } from "./config.js"
import { decodeArgs } from "./input.js"
import { failed, toResult } from "./result.js"
import { withRetries } from "./retries.js"
import { counted, endWhenDone, openSpan } from "./span.js"

export { type Admitted, CallingFiber, type Gate, type Options } from "./caller.js"
export { type Config, defaultConfig, InvocationConfig, InvocationObserver, type RetryEvent } from "./config.js"
export { ParsedArguments } from "./input.js"
export { checkResult, Verbatim } from "./result.js"
export { awaitStarted, type Started } from "./reuse.js"

/**
 * THE entry of the pipeline, called by the door alone (`door.ts`): `Invocation.run` is it as an effect; faces
 * that start many calls at once (the agent loop) or answer at once (MCP) call it on their own stack. A call that completes synchronously is its result,
 * with no fiber switch; one that suspends is already running when this returns, and the returned
 * effect awaits it within its deadline. Reuse (`reuse`, `dedupe`) and a caller's `gate` are options
 * here, so no caller decodes or keys an input itself.
 */
export const start = (calling: CallingFiber, tool: Tool.Any, args: unknown, options?: Options): Started =>
  options?.dedupe === undefined ? traced(calling, tool, args, options) : deduped(calling, options.dedupe, tool, args, options)

/**
 * The id of a call its caller gave none: the `Ids` generator's in force (`call-<UUID>` by default,
 * `call-<n>` under `Ids.layerDeterministic`), so that no count is kept for the process.
 */
const localCallId = (calling: CallingFiber): string => Context.get(calling.context, Ids).make("call")

/** `call`'s id, made on first read when its caller gave none (`LocalCallInfo`). */
const idOf = (calling: CallingFiber, call: Call): string => call.toolCallId ??= localCallId(calling)

// ---------------------------------------------------------------------------------------------
// The stages.

/**
 * Stage 0, `deduped`: a delivered call (task id, call id) through the delivery store around the
 * rest (design: Delivery dedupe): it runs once however often it is delivered. Whether its handler started
 * tells the store what an interruption leaves behind (design: Interruption and shutdown).
 */
const deduped = (calling: CallingFiber, dedupe: Reuse.Deliveries, tool: Tool.Any, args: unknown, options: Options): Started => {
  let handlerStarted = false
  const inner: Options = {
    ...options,
    dedupe: undefined,
    onStart: () => {
      handlerStarted = true
      options.onStart?.()
    }
  }
  const key = { taskId: options.taskId ?? "local", toolCallId: options.toolCallId ?? localCallId(calling) }
  const claim = { toolName: tool.name, timeout: tool.timeout, idempotent: tool.idempotent, started: () => handlerStarted }
  const run = Effect.withFiberRuntime<ToolResult>((fiber, status) =>
    awaitStarted(traced(onFiber(calling, tool, fiber, status.runtimeFlags), tool, args, { ...inner, toolCallId: key.toolCallId }))
  )
  return Effect.map(dedupe.once(key, claim, run), ({ result }) => result)
}

/** Stage 1, `traced`: the call's span `execute_tool <name>` around the other stages, when tracing is on. */
const traced = (calling: CallingFiber, tool: Tool.Any, args: unknown, options: Options | undefined): Started => {
  // No span to name it: the id is made when something reads it (`LocalCallInfo`).
  if (!calling.tracing) return counted(calling, tool, admit(calling, tool, args, options, options?.toolCallId, undefined))
  const toolCallId = options?.toolCallId ?? localCallId(calling)
  const span = openSpan(calling, tool, toolCallId, options, args)
  return counted(calling, tool, endWhenDone(calling, span, admit(calling, tool, args, options, toolCallId, span)))
}

/** A call past `admit`: decoded, its delivered deadline known, its span open (when tracing). */
interface Call {
  readonly tool: Tool.Any
  readonly compiled: Compiled
  readonly input: unknown
  /** Undefined until read when the caller gave none (`idOf`). */
  toolCallId: string | undefined
  readonly span: Tracer.Span | undefined
  readonly options: Options | undefined
  /** The delivered deadline, if any. */
  readonly deliveredAt: number | undefined
}

/**
 * Stage 2, `admit`: refuses a call whose delivered deadline has passed (`DeadlinePassed`) or whose
 * arguments do not decode strictly (`InvalidInput`); else goes on, to the gate or reuse.
 */
const admit = (
  calling: CallingFiber,
  tool: Tool.Any,
  args: unknown,
  options: Options | undefined,
  toolCallId: string | undefined,
  span: Tracer.Span | undefined
): Started => {
  const config = calling.config
  const compiled = compile(tool)
  const given = options?.deadlineAt
  const deliveredAt = given === undefined ? undefined : typeof given === "number" ? given : given.getTime()
  if (deliveredAt !== undefined && deliveredAt <= calling.clock.unsafeCurrentTimeMillis()) {
    return failed(new DeadlinePassed({ toolName: tool.name }), config)
  }
  const decoded = decodeArgs(tool, compiled, args, config)
  if (typeof decoded === "string") return failed(new InvalidInput({ toolName: tool.name, reason: decoded }), config)
  const call: Call = { tool, compiled, input: decoded.value, toolCallId, span, options, deliveredAt }
  if (options?.gate === undefined && (options?.reuse === undefined || !tool.idempotent)) {
    return withHooks(calling, call, deliveredAt, options?.approved === true)
  }
  return reuseOrGate(calling, call)
}

/**
 * Stage 3, `reuseOrGate`: an idempotent tool's same call in the `reuse` scope answers it (design: Per-run reuse),
 * else it runs and its outcome is kept there; with a `gate`, the gate decides instead, from the `Admitted` call.
 */
const reuseOrGate = (calling: CallingFiber, call: Call): Started => {
  const { options, span, tool } = call
  const reuse = tool.idempotent ? options?.reuse : undefined
  // Keyed when something reads the key: reuse, or a gate's approval (a gate's other calls need none).
  let inputKey: string | undefined
  const inputKeyOf = () => inputKey ??= Reuse.inputKey(tool, call.input)
  const reused = (): Started | undefined => {
    const known = reuse?.get(Reuse.sameCall(tool.name, inputKeyOf()))
    if (known === undefined) return undefined
    reuse!.markReused(idOf(calling, call))
    if (calling.exporting) Metrics.toolReused.unsafeUpdate(1, Metrics.toolLabels(tool.name))
    span?.attribute("agent_tools.reused", true)
    return known
  }
  const keep = (started: Started): Started =>
    reuse === undefined ? started : reuse.keep(Reuse.sameCall(tool.name, inputKeyOf()), started)
  const gate = options?.gate
  if (gate === undefined) return reused() ?? keep(withHooks(calling, call, call.deliveredAt, options?.approved === true))
  return gate({
    tool,
    toolCallId: idOf(calling, call),
    input: call.input,
    get inputKey() {
      return inputKeyOf()
    },
    reused,
    keep,
    run: (overrides) =>
      Effect.withFiberRuntime((fiber, status) => {
        const running = onFiber(calling, tool, fiber, status.runtimeFlags)
        const deadlineAt = overrides?.deadlineAt ?? call.deliveredAt
        if (deadlineAt !== undefined && deadlineAt <= running.clock.unsafeCurrentTimeMillis()) {
          return Effect.succeed(failed(new DeadlinePassed({ toolName: tool.name }), running.config))
        }
        return awaitStarted(withHooks(running, call, deadlineAt, overrides?.approved ?? options?.approved === true))
      })
  })
}

/**
 * The call's context as of `now`: its deadline the earlier of `now` + the tool's timeout and `deadlineAt`.
 * With no id given, its id is made when read (`LocalCallInfo`).
 */
const infoAt = (calling: CallingFiber, call: Call, now: number, deadlineAt: number | undefined): ToolCallInfo => {
  const byTimeout = now + call.compiled.timeoutMillis
  const taskId = call.options?.taskId ?? "local"
  const deadline = deadlineAt === undefined ? byTimeout : Math.min(byTimeout, deadlineAt)
  const expiring = expiringThresholdMillis(calling.config)
  const toolCallId = call.toolCallId
  return toolCallId === undefined
    ? new LocalCallInfo(taskId, deadline, expiring, () => idOf(calling, call))
    : { taskId, toolCallId, attempt: 1, deadlineAt: deadline, expiringThresholdMillis: expiring }
}

/**
 * Stage 4, `withHooks`: the installed tool hooks (design: Hooks) around the run of the call; `proceed` may
 * run it again, or not at all. None installed: straight on, at the cost of one context lookup. The
 * handler's time starts when the handler does, not when the hooks do: a hook that waits (an approval
 * asking a person) takes nothing from the tool's timeout; only a delivered deadline bounds both. A call whose
 * tool needs approval, not `approved` and not approved by a hook (`Hooks.approved`), is refused unrun (`Denied`).
 */
const withHooks = (calling: CallingFiber, call: Call, deadlineAt: number | undefined, approved: boolean): Started => {
  const hooks = Context.get(calling.context, ToolHooks)
  const onStart = call.options?.onStart
  const now = calling.clock.unsafeCurrentTimeMillis()
  if (hooks.length === 0) {
    // Approvals fail closed: with no hook, only the journal or the platform can have given one.
    if (call.tool.needsApproval) call.span?.attribute("agent_tools.approval", approved ? "approved" : "denied")
    if (call.tool.needsApproval && !approved) return failed(notApproved(call.tool.name), calling.config)
    onStart?.()
    return runHandler(calling, call, infoAt(calling, call, now, deadlineAt), now, undefined)
  }
  const progress = { attempt: 1 }
  const { input, tool } = call
  const context = settledInfo(infoAt(calling, call, now, deadlineAt))
  let handler: { readonly info: ToolCallInfo; readonly start: number } | undefined
  const run = call.options?.run
  const hookCall: ToolCall = { tool, input, context, attempts: () => progress.attempt, run, approved }
  return runToolHooks(
    hooks,
    hookCall,
    Effect.suspend(() => {
      // Innermost, after every hook: a call that needs approval runs only if one was given (`Hooks.approved`).
      const may = mayRun(hookCall)
      if (tool.needsApproval) call.span?.attribute("agent_tools.approval", may ? "approved" : "denied")
      if (!may) return Effect.succeed(failed(notApproved(tool.name), calling.config))
      const now = calling.clock.unsafeCurrentTimeMillis()
      // The hooks took until the delivered deadline: the handler would have no time at all.
      if (deadlineAt !== undefined && deadlineAt <= now) {
        return Effect.succeed(failed(new DeadlinePassed({ toolName: tool.name }), calling.config))
      }
      // Fixed when the handler first starts: a hook that proceeds again shares it, as retries do.
      handler ??= { info: settledInfo(infoAt(calling, call, now, deadlineAt)), start: now }
      onStart?.()
      return awaitStarted(runHandler(calling, call, handler.info, handler.start, progress))
    })
  )
}

/**
 * Stage 5, `runHandler`: the handler's attempts (one, or `withRetries` for a tool with retries),
 * and `toResult` of the outcome. A handler that completes synchronously costs no closure and no timer.
 */
const runHandler = (
  calling: CallingFiber,
  call: Call,
  info: ToolCallInfo,
  start: number,
  progress: { attempt: number } | undefined
): Started => {
  const { compiled, input, span, tool } = call
  const config = calling.config
  const allowed = info.deadlineAt - start
  span?.attribute("agent_tools.deadline", new Date(info.deadlineAt).toISOString())
  if (tool.retries <= 0) {
    const outcome = runAttempt(calling, tool, input, info, span)
    if (Exit.isExit(outcome)) return toResult(tool, compiled, outcome, config, allowed)
    return Effect.map(outcome, (outcome) => toResult(tool, compiled, outcome, config, allowed))
  }
  return Effect.map(
    // The retries run on whichever fiber awaits them: take its context there, not the starter's.
    Effect.withFiberRuntime<Outcome>((fiber, status) =>
      withRetries(onFiber(calling, tool, fiber, status.runtimeFlags), tool, input, settledInfo(info), start, span, progress)
    ),
    (outcome) => toResult(tool, compiled, outcome, config, allowed)
  )
}
