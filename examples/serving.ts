/** The shop's tools served to the platform: for good, or as a scoped service that submits tasks. */
import { Effect } from "effect"
import { Builtins, Toolkit } from "../src/index.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { issueRefund, lookupOrder } from "./tools.js"

/** Serves until `stop` completes. */
export const serveUntil = (stop: Effect.Effect<void>) =>
  Effect.gen(function*() {
    // #region serve
    const toolkit = yield* Toolkit.make(lookupOrder, issueRefund)

    // Until interrupted, or until `stop` completes; drains, then deregisters, either way.
    yield* Serve.serveConfig(toolkit, { stop, shutdownGrace: "30 seconds" }).pipe(Effect.provide(PlatformClient.layer))
    // #endregion
  })

/** Serves while the scope lives, and submits a task from the same process. */
export const serveAndSubmit = (prompt: string) =>
  Effect.gen(function*() {
    const toolkit = yield* Toolkit.make(lookupOrder, issueRefund)
    const biggerToolkit = yield* Toolkit.make(lookupOrder, issueRefund, Builtins.getTodayDate)
    // #region make
    const served = yield* Serve.makeConfig(toolkit, { shutdownGrace: "30 seconds", resumeTasks: true }) // or Serve.layerConfig
    const output = yield* served.runTask("Order ord-4821 was charged twice; refund the duplicate")
    const events = served.submitTask(prompt)              // Stream of task events, TaskStarted first
    yield* served.republish(biggerToolkit)                // a tool added: registered again at once
    // #endregion
    return { output, events }
  })
