/**
 * Running the handler: one attempt, stage `runAttempt` (design: Handler shapes, Deadlines). A body that
 * is a value or an `Exit` is done; an Effect runs in a fiber of its own that the deadline interrupts,
 * with the call's `Scope` (`scope.ts`); a promise is awaited, its call's signal aborted at the deadline.
 * A raw failure is logged where the handler ran (design: Logs).
 *
 * What stops a call at its deadline: the handler's fiber, started on the caller's stack with
 * `Runtime.runFork`, is interrupted by a timer armed only once the body suspends (`armDeadline`): a
 * `setTimeout` on the live clock, a forked `clock.sleep` on any other (a `TestClock`). Not
 * `Effect.timeout`, which races the body against a sleep fiber on every call: measured side by side on
 * one machine, about 12 times today's cost for a body that completes at once (34 us against 2.7 us) and
 * 3 times for one that suspends once (39 us against 12 us); and it would run the body on the awaiting
 * fiber, not on the caller's stack at once.
 */
import {
  Cause,
  Clock,
  Context,
  DefaultServices,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberId,
  FiberRef,
  FiberRefs,
  Option,
  Runtime,
  RuntimeFlags,
  Scope,
  Tracer
} from "effect"
import * as Logs from "./logs.js"
import { ToolWorkers } from "../worker/service.js"
import * as Tool from "../../Tool.js"
import { CallContext, ToolContext, type ToolCallInfo } from "../../ToolContext.js"
import { type CallingFiber, settledInfo } from "./caller.js"
import { derived } from "./config.js"
import { CallScope } from "./scope.js"

/** The outcome of an attempt stopped at the deadline. */
export const ReachedDeadline = Symbol.for("agent-tools/pipeline/ReachedDeadline")
/** What an attempt ends with: its exit, or `ReachedDeadline`. */
export type Outcome = Exit.Exit<unknown, unknown> | typeof ReachedDeadline

/**
 * Stage 6, `runAttempt`: one run of the handler, within the deadline. The handler's body may be an Effect, a `PromiseLike` or the output itself (design: Handler shapes): a
 * plain value, or an `Exit` (`Effect.succeed(x)`, `Effect.fail(e)`), is done: there is nothing to
 * run or to interrupt. Any other runs in a fiber of its own, so that the deadline can interrupt it
 * without interrupting the caller; the fiber starts at once on this stack, and a handler that
 * completes synchronously costs no timer and no scheduling.
 */
export const runAttempt = (...args: Parameters<typeof attempt>): Exit.Exit<unknown, unknown> | Effect.Effect<Outcome> => {
  const [calling, tool, , info] = args
  // Real time, whatever the clock: how long the body's synchronous part held the event loop.
  const started = Date.now()
  const outcome = attempt(...args)
  const held = Date.now() - started
  if (held > derived(calling.config).blockingMillis && tool.worker === undefined) Logs.blockedLoop(calling, tool, info, held)
  // Logged once timed (a line's writing is not the body's time); a body's synchronous end is never a worker's.
  return Exit.isExit(outcome) ? logged(calling, tool, info, false, outcome) : outcome
}

/** `runAttempt`'s run of the body by its shape; a raw failure that ends later is logged then (`logged`). */
const attempt = (
  calling: CallingFiber,
  tool: Tool.Any,
  input: unknown,
  info: ToolCallInfo,
  span: Tracer.Span | undefined
): Exit.Exit<unknown, unknown> | Effect.Effect<Outcome> => {
  const call = new CallContext(info, calling.clock, calling, span)
  let body: unknown
  try {
    // A body made to run on a worker thread (`worker: import.meta.url`) is an Effect here: its pool's job.
    body = tool.worker === undefined ? tool.handler(input, call) : Context.get(calling.context, ToolWorkers).run(tool, input, info)
  } catch (defect) {
    // Toolkit.make refuses a handler that is not a function; a tool run without one says the same.
    const problem = Tool.handlerProblem(tool)
    return problem === undefined ? Exit.die(defect) : Exit.fail(new HandlerShapeError(problem))
  }
  if (Exit.isExit(body)) return body
  if (!Effect.isEffect(body)) {
    if (!isThenable(body)) return Exit.succeed(body)
    return Effect.map(awaitPromise(calling, tool, body, call, info), (outcome) => logged(calling, tool, info, true, outcome))
  }
  return runEffect(calling, tool, body, call, info, span)
}

/**
 * An Effect body in a fiber of its own, started on this stack, with the call's services: its
 * `ToolContext`, its `Scope` (`CallScope`, closed as the fiber ends), its span. Done at once: its
 * exit. Else the deadline is armed, and the returned effect awaits the fiber (and its finalizers).
 */
const runEffect = (
  calling: CallingFiber,
  tool: Tool.Any,
  body: Effect.Effect<unknown, unknown, unknown>,
  call: CallContext,
  info: ToolCallInfo,
  span: Tracer.Span | undefined
): Exit.Exit<unknown, unknown> | Effect.Effect<Outcome> => {
  // A worker's failure is a throw in the body there; an Effect's typed failure is the tool's answer.
  // A worker's body has its scope there; the job here has nothing to release.
  const raw = tool.worker !== undefined
  const scope = raw ? undefined : new CallScope()
  const runtime = handlerRuntime(calling, info, span, scope)
  // The R of the handler is in the caller's context: `Invocation.run` demands it of its caller.
  const fiber = Runtime.runFork(runtime, body as Effect.Effect<unknown, unknown, never>, { immediate: true })
  scope?.closeWhenDone(fiber, runtime)
  const done = fiber.unsafePoll()
  if (done !== null) {
    if (scope === undefined) return done
    // Its finalizers, if any, have run or are running: the exit once they have.
    const after = scope.after(done, runtime)
    return Exit.isExit(after) ? after : Effect.map(after, (exit) => logged(calling, tool, info, raw, exit))
  }
  // It suspended: arm the deadline, on the caller's clock. On the live clock a plain timer;
  // on any other (TestClock) a timer fiber. Either interrupts the handler at the deadline (its
  // finalizers, its scope's too, run before the call answers); no race, no second fork per call.
  let timedOut = false
  const cancel = armDeadline(calling, info, runtime, () => {
    timedOut = true
    call.abort(deadlineReason(tool))
    fiber.unsafeInterruptAsFork(FiberId.none)
  })
  const outcome = (exit: Exit.Exit<unknown, unknown>): Outcome =>
    timedOut && Exit.isInterrupted(exit) ? ReachedDeadline : logged(calling, tool, info, raw, exit)
  const closed = (exit: Exit.Exit<unknown, unknown>): Effect.Effect<Exit.Exit<unknown, unknown>> => {
    const after = scope === undefined ? exit : scope.after(exit, runtime)
    return Exit.isExit(after) ? Effect.succeed(after) : after
  }
  return Fiber.await(fiber).pipe(
    Effect.flatMap((exit) => {
      cancel()
      return Effect.map(closed(exit), outcome)
    }),
    Effect.onInterrupt(() => Effect.zipRight(Effect.sync(cancel), Effect.flatMap(Fiber.interrupt(fiber), closed)))
  )
}

/** The handler's runtime: the caller's services and fiber refs, and the call's. */
const handlerRuntime = (
  calling: CallingFiber,
  info: ToolCallInfo,
  span: Tracer.Span | undefined,
  scope: CallScope | undefined
): Runtime.Runtime<never> => {
  // Plain data: the handler may spread it.
  let context = Context.add(calling.context, ToolContext, settledInfo(info))
  if (scope !== undefined) context = Context.add(context, Scope.Scope, scope)
  return Runtime.make({
    context: span === undefined ? context : Context.add(context, Tracer.ParentSpan, span),
    // Its failure is the call's outcome, reported as such: not an "unhandled error" log line.
    fiberRefs: FiberRefs.updateAs(calling.fiber.getFiberRefs(), {
      fiberId: FiberId.none,
      fiberRef: FiberRef.unhandledErrorLogLevel,
      value: Option.none()
    }),
    // The caller may be in an uninterruptible region; the handler must still be stoppable.
    runtimeFlags: RuntimeFlags.enable(calling.runtimeFlags, RuntimeFlags.Interruption)
  })
}

/**
 * `outcome`, its raw failure logged where the handler ran (design: Logs): a defect always; a failure
 * when `raw` (a rejection, a worker's throw), not an Effect's typed failure; never an interruption.
 */
const logged = <O extends Outcome>(calling: CallingFiber, tool: Tool.Any, info: ToolCallInfo, raw: boolean, outcome: O): O => {
  if (outcome !== ReachedDeadline && Exit.isFailure(outcome as Exit.Exit<unknown, unknown>)) {
    const cause = (outcome as Exit.Failure<unknown, unknown>).cause
    if (raw ? !Cause.isInterruptedOnly(cause) : Cause.isDie(cause)) {
      Logs.handlerFailed(calling, tool, info, cause, derived(calling.config).failureLogLevel)
    }
  }
  return outcome
}

/** A handler that cannot be called: `Tool.handlerProblem`'s text as the call's failure. */
class HandlerShapeError extends Error {
  override readonly name = "HandlerShapeError"
}

const isThenable = (u: unknown): u is PromiseLike<unknown> =>
  typeof u === "object" && u !== null && typeof (u as { then?: unknown }).then === "function"

/**
 * Awaits an async body (design: Handler shapes) on the awaiting fiber: no fiber of its own, since there is nothing of
 * Effect's to interrupt; the deadline and an interruption abort `call.signal` instead. Both callbacks
 * are attached at once, whatever becomes of the call, so a promise that rejects after the deadline
 * is handled, never an unhandled rejection. A rejection is the call's failure (error text of the reason).
 */
const awaitPromise = (
  calling: CallingFiber,
  tool: Tool.Any,
  promise: PromiseLike<unknown>,
  call: CallContext,
  info: ToolCallInfo
): Effect.Effect<Outcome> => {
  let outcome: Outcome | undefined
  let resume: ((effect: Effect.Effect<Outcome>) => void) | undefined
  let cancel: () => void = noop
  const settle = (settled: Outcome) => {
    if (outcome !== undefined) return
    outcome = settled
    cancel()
    resume?.(Effect.succeed(settled))
  }
  try {
    promise.then((value) => settle(Exit.succeed(value)), (error) => settle(Exit.fail(error)))
  } catch (defect) {
    // A hand-made thenable whose `then` throws.
    settle(Exit.die(defect))
  }
  if (outcome === undefined) {
    cancel = armDeadline(calling, info, Runtime.defaultRuntime, () => {
      call.abort(deadlineReason(tool))
      settle(ReachedDeadline)
    })
  }
  return Effect.async<Outcome>((callback) => {
    if (outcome !== undefined) return callback(Effect.succeed(outcome))
    resume = callback
    return Effect.sync(() => {
      resume = undefined
      cancel()
      call.abort(new DOMException("the call was interrupted", "AbortError"))
    })
  })
}

const noop = () => {}

const deadlineReason = (tool: Tool.Any) => new DOMException(`${tool.name} reached its deadline`, "TimeoutError")

/**
 * Calls `expire` at the call's deadline, on the caller's clock: on the live clock a plain timer, on
 * any other (TestClock) a timer fiber run by `runtime`. Returns the cancel.
 */
const armDeadline = (
  calling: CallingFiber,
  info: ToolCallInfo,
  runtime: Runtime.Runtime<never>,
  expire: () => void
): () => void => {
  const wait = Math.max(0, info.deadlineAt - calling.clock.unsafeCurrentTimeMillis())
  if (calling.clock === liveClock) {
    const handle = setTimeout(expire, Math.min(wait, maxTimerMillis))
    return () => clearTimeout(handle)
  }
  const timer = Runtime.runFork(runtime, Effect.flatMap(calling.clock.sleep(Duration.millis(wait)), () => Effect.sync(expire)))
  return () => timer.unsafeInterruptAsFork(FiberId.none)
}

/** The clock fibers have unless one is provided (a TestClock, say). */
const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)
/** Node's timers hold at most 2^31 - 1 ms. */
const maxTimerMillis = 2 ** 31 - 1
