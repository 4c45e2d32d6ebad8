/**
 * What a face's door does before its first call (`prepare`, design: The call pipeline): start the worker threads
 * of its tools (design: Worker threads), in the pools provided (`WorkerPool.layerTools`) or, none provided, in
 * pools of the door's own, owned by the face's scope.
 */
import { Context, Effect, type Scope } from "effect"
import type * as Tool from "../../Tool.js"
import { loadPools, ToolWorkers, unprovided } from "./service.js"
import { modulesOf, type ToolWorkersService } from "./types.js"

/** A door's own pools, once made: shared by the doors it opens and the toolkits it is seen over. */
export interface OwnWorkers {
  workers: ToolWorkersService | undefined
}

/**
 * Starts the pools of `tools` made with `worker` and waits until their workers are ready: the provided
 * `ToolWorkers`', else `own` pools, made in the scope (closing it stops them). A pool that cannot
 * start is logged, not fatal: each call of its tools then fails with the reason.
 */
export const prepareWorkers = (tools: Iterable<Tool.Any>, own: OwnWorkers): Effect.Effect<void, never, Scope.Scope> =>
  // Every agent run asks: a toolkit without worker tools (known once per list) costs nothing more.
  modulesOf(tools).length === 0 ? Effect.void : Effect.contextWithEffect((context: Context.Context<Scope.Scope>) => {
    const provided = Context.get(context, ToolWorkers)
    const workers = provided !== unprovided ? Effect.succeed(provided) : ownWorkers(own)
    return Effect.flatMap(workers, (workers) => workers.prepare(tools)).pipe(
      Effect.catchAll((error) => Effect.logWarning(`the worker threads of some tools could not start: ${error.message}`))
    )
  })

/** `own` pools, made in the scope the first time. */
const ownWorkers = (own: OwnWorkers): Effect.Effect<ToolWorkersService, never, Scope.Scope> =>
  own.workers !== undefined ? Effect.succeed(own.workers) : Effect.flatMap(
    Effect.zip(loadPools, Effect.scope),
    ([pools, scope]) => Effect.sync(() => own.workers ??= pools.makeToolWorkers(scope, {}))
  )

/**
 * `context` with the door's own pools as `ToolWorkers` for a call of `tool`, when it runs on a worker and none
 * is provided: the context itself otherwise.
 */
export const withOwnWorkers = (
  context: Context.Context<never>,
  tool: Tool.Any,
  own: OwnWorkers
): Context.Context<never> =>
  tool.worker === undefined || own.workers === undefined || Context.get(context, ToolWorkers) !== unprovided
    ? context
    : Context.add(context, ToolWorkers, own.workers)
