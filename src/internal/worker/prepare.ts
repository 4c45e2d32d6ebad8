/**
 * What a face's door does before its first call (`prepare`, design: The call pipeline): start the worker threads
 * of its tools (design: Worker threads).
 */
import { Context, Effect } from "effect"
import type * as Tool from "../../Tool.js"
import { ToolWorkers } from "./service.js"
import { modulesOf } from "./types.js"

/**
 * Starts the pools of `tools` made with `worker` and waits until their workers are ready. A pool
 * that cannot start is logged, not fatal: each call of its tools then fails with the reason.
 */
export const prepareWorkers = (tools: Iterable<Tool.Any>): Effect.Effect<void> =>
  // Every agent run asks: a toolkit without worker tools (known once per list) costs nothing more.
  modulesOf(tools).length === 0 ? Effect.void : Effect.contextWithEffect((context: Context.Context<never>) =>
    Context.get(context, ToolWorkers).prepare(tools).pipe(
      Effect.catchAll((error) => Effect.logWarning(`the worker threads of some tools could not start: ${error.message}`))
    )
  )
