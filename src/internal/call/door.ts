/**
 * The door (design: The call pipeline): the one way every face reaches the pipeline, and the one caller of
 * its `start` outside it. A door is over a toolkit and holds the state of one run of calls (an agent run, a
 * served task, an MCP session): the hook state (`RunState`, design: Hooks) and, by the face's reuse policy,
 * the outcomes an idempotent tool's same call reuses (`Outcomes`, design: Per-run reuse). It finds a tool by
 * name and answers an unknown one (`Toolkit.unknownTool`, design: Error text), starts the toolkit's worker
 * pools (`prepare`, design: Worker threads), turns a W3C `traceparent` into the call's parent span (design:
 * Observability), and starts the call, on the caller's stack (`start`: the agent loop's and MCP's fast path)
 * or as an effect (`run`). `Invocation.run` (one tool, no toolkit) is `runTool`; `Invocation.dispatcher` is
 * `make`, seen through `Dispatcher`.
 */
import { type Context, Effect, Runtime, type Scope } from "effect"
import { RunState } from "../hooks/tool.js"
import { parseTraceparent } from "../util/traceContext.js"
import { type OwnWorkers, prepareWorkers, withOwnWorkers } from "../worker/prepare.js"
import type * as Tool from "../../Tool.js"
import type { CallServices } from "../../ToolContext.js"
import * as Toolkit from "../../Toolkit.js"
import { ToolResult, type UnknownTool } from "../../ToolResult.js"
import { withContext } from "./caller.js"
import { awaitStarted, CallingFiber, type Gate, type Options, start, type Started } from "./pipeline.js"
import { type Deliveries, Outcomes, type OutcomesOptions } from "./reuse.js"

export { type Admitted, awaitStarted, CallingFiber, type Gate, ParsedArguments, type Started } from "./pipeline.js"

/**
 * How a scope keeps its outcomes (design: Per-run reuse): `joinInFlight`, a duplicate that comes while the
 * first call runs waits for it (an agent run, whose turn's calls start together); `maxBytes`, at most this much
 * JSON of keys and outcomes is kept (an MCP session).
 */
export type ReusePolicy = OutcomesOptions

/** The face's policy for a door's calls: what their state is part of, and what may answer a call again. */
export interface DispatcherOptions {
  /** What the calls are part of, as the hooks' texts name it (`RunState`'s kind). Default `"run"`. */
  readonly kind?: "run" | "task" | "session" | undefined
  /** The hook state to share in place of one of the door's own: a sub-agent's run shares its root's. */
  readonly state?: RunState | undefined
  /** An idempotent tool's same call is answered by the first one's outcome, kept so. Default: no reuse. */
  readonly reuse?: ReusePolicy | undefined
  /** The store in which each call's delivery (task id, call id) runs once (design: Delivery dedupe): `Serve`'s. */
  readonly dedupe?: Deliveries | undefined
}

/** What a face knows of one call. */
export interface CallOptions {
  /** The run or task the call is part of. Default `"local"`. */
  readonly taskId?: string | undefined
  /** Default: a fresh id from the `Ids` generator in force (`call-<UUID>`). */
  readonly toolCallId?: string | undefined
  /** The delivered deadline (epoch milliseconds or a Date): the call ends at the earlier of this and its timeout. */
  readonly deadlineAt?: number | Date | undefined
  /** A person approved this call through a journal or the platform (design: Durable runs). */
  readonly approved?: boolean | undefined
  /**
   * The W3C `traceparent` the call carried, as it came (MCP's `_meta`, a platform's delivery): the call's span
   * continues that trace. Anything that is not one is ignored.
   */
  readonly traceparent?: unknown
}

/**
 * The door's calls as a face outside the package sees them (`Invocation.dispatcher`): the tools of `toolkit`,
 * run by name with the state of one run, session or task. `R` is what the handlers need.
 */
export interface Dispatcher<R = never> {
  readonly toolkit: Toolkit.Toolkit<R>
  /** The hook state of its calls (design: Hooks). */
  readonly state: RunState
  /**
   * Starts the worker threads of the toolkit's `worker` tools (design: Worker threads): once, before the first
   * call. In the pools provided (`WorkerPool.layerTools`), else in pools of the door's own, which the scope
   * owns (closing it stops them) and the doors it opens share.
   */
  readonly prepare: Effect.Effect<void, never, Scope.Scope>
  /** The tool named `name`, or the `UnknownTool` every face answers for a name the toolkit does not have. */
  lookup(name: string): Tool.Any | UnknownTool
  /**
   * Runs one call of the tool named `name` with `args` (JSON text or a parsed value). Never fails and never dies:
   * an unknown name, like every other problem, is a failed `ToolResult`.
   */
  run(name: string, args: unknown, options?: CallOptions): Effect.Effect<ToolResult, never, Exclude<R, CallServices>>
  /** Whether call `toolCallId` was answered by an earlier outcome (design: Per-run reuse). */
  wasReused(toolCallId: string): boolean
}

/** What a face inside the package asks of one call besides: a journaled run's `gate` (design: Durable runs). */
export interface StartOptions extends CallOptions {
  readonly gate?: Gate | undefined
}

/** The door as the faces inside the package use it: its calls started on their own stack, its toolkit swapped. */
export interface Door extends Omit<Dispatcher, "toolkit"> {
  readonly toolkit: Toolkit.Toolkit<any>
  /**
   * Starts one call on the stack of `calling`: a call that completes synchronously is its `ToolResult` (an
   * unknown name's at once), with no fiber switch; one that suspends is an effect awaiting it.
   */
  start(calling: CallingFiber, name: string, args: unknown, options?: StartOptions): Started
  /** The same run's door over another toolkit (a handoff, a toolkit published again): its state, its policy. */
  over(toolkit: Toolkit.Toolkit<any>): Door
  /** A door over the same toolkit with the same policy and state of its own: the next session or task. */
  open(): Door
}

/** What a door's calls share, however many toolkits it is seen over: their state, and the policy it was made by. */
interface Shared {
  readonly state: RunState
  readonly outcomes: Outcomes | undefined
  readonly dedupe: Deliveries | undefined
  readonly options: DispatcherOptions | undefined
  /** The worker pools `prepare` made, none being provided: the door's, and the doors' it opens. */
  readonly workers: OwnWorkers
}

const sharedOf = (options: DispatcherOptions | undefined, workers: OwnWorkers = { workers: undefined }): Shared => ({
  state: options?.state ?? new RunState(options?.kind),
  outcomes: options?.reuse === undefined ? undefined : new Outcomes(options.reuse),
  dedupe: options?.dedupe,
  options,
  workers
})

/** A call `begin` starts with the running fiber as its caller, awaited: `start` as an effect. */
const onThisFiber = (begin: (calling: CallingFiber) => Started): Effect.Effect<ToolResult> =>
  Effect.withFiberRuntime((fiber, status) => awaitStarted(begin(new CallingFiber(fiber, status.runtimeFlags))))

class ToolkitDoor implements Door {
  constructor(readonly toolkit: Toolkit.Toolkit<any>, private readonly shared: Shared) {}

  get state(): RunState {
    return this.shared.state
  }

  get prepare(): Effect.Effect<void, never, Scope.Scope> {
    return prepareWorkers(this.toolkit.tools, this.shared.workers)
  }

  lookup(name: string): Tool.Any | UnknownTool {
    return this.toolkit.byName.get(name) ?? Toolkit.unknownTool(this.toolkit, name)
  }

  start(calling: CallingFiber, name: string, args: unknown, options?: StartOptions): Started {
    const tool = this.toolkit.byName.get(name)
    if (tool === undefined) return ToolResult.failure(Toolkit.unknownTool(this.toolkit, name))
    const { dedupe, outcomes, state, workers } = this.shared
    const traceparent = options?.traceparent
    const pipeline: Options = {
      taskId: options?.taskId,
      toolCallId: options?.toolCallId,
      deadlineAt: options?.deadlineAt,
      approved: options?.approved,
      run: state,
      reuse: outcomes,
      dedupe,
      parentSpan: traceparent === undefined ? undefined : parseTraceparent(traceparent),
      gate: options?.gate
    }
    // A worker tool's call runs on the door's own pools, unless some are provided.
    const context = withOwnWorkers(calling.context, tool, workers)
    return start(context === calling.context ? calling : withContext(calling, context), tool, args, pipeline)
  }

  run(name: string, args: unknown, options?: CallOptions): Effect.Effect<ToolResult> {
    return onThisFiber((calling) => this.start(calling, name, args, options))
  }

  wasReused(toolCallId: string): boolean {
    return this.shared.outcomes?.wasReused(toolCallId) ?? false
  }

  over(toolkit: Toolkit.Toolkit<any>): Door {
    return toolkit === this.toolkit ? this : new ToolkitDoor(toolkit, this.shared)
  }

  open(): Door {
    const { options } = this.shared
    const shared = sharedOf(options?.state === undefined ? options : { ...options, state: undefined }, this.shared.workers)
    return new ToolkitDoor(this.toolkit, shared)
  }
}

/** A door over `toolkit` with state of its own (or the shared `state`), keeping outcomes by `reuse`. */
export const make = (toolkit: Toolkit.Toolkit<any>, options?: DispatcherOptions): Door =>
  new ToolkitDoor(toolkit, sharedOf(options))

/** One call of `tool`, outside any toolkit or run (`Invocation.run`): `start` as an effect. */
export const runTool = (tool: Tool.Any, args: unknown, options?: Omit<Options, "gate" | "reuse">): Effect.Effect<ToolResult> =>
  onThisFiber((calling) => start(calling, tool, args, options))

/**
 * `runtime` as the caller of the calls a face starts on its own stack (MCP's request handler): the same services,
 * fiber refs and flags as a fiber it runs.
 */
export const callerOf = (runtime: Runtime.Runtime<any>): CallingFiber =>
  Runtime.runSync(runtime)(
    Effect.withFiberRuntime((fiber, status) => Effect.succeed(new CallingFiber(fiber, status.runtimeFlags)))
  )

/**
 * `calling` with the call's own services as its context (a listener of its progress and log lines, the client's
 * user and model): a call costs no fiber of its own until it suspends. Its limits and clock stay the caller's.
 */
export const withServices = (calling: CallingFiber, context: Context.Context<never>): CallingFiber =>
  withContext(calling, context)
