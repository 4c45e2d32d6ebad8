/** The platform on a real WebSocket, with every option of its handlers. */
import { Effect, Layer, Stream } from "effect"
import { type LanguageModel } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Model } from "../src/exports/providers.js"
import { PlatformClient, type Serve } from "../src/exports/serve.js"

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ text: "Nothing to do." }]

// #region platform
// A real WebSocket server on 127.0.0.1; the tasks' model comes from the context.
export const platform = PlatformServer.layerWebSocket({ port: 8787 }).pipe(
  Layer.provide(PlatformServer.layerHandlers({
    tokens: PlatformServer.parseTokens("secret-1:support-agent,secret-2:billing-agent"), // PLATFORM_TOKENS format
    heartbeatInterval: "60 seconds",     // 3 silent intervals hide an agent's tools; processes beat on it
    lifecycleBudget: 30,                  // register/heartbeat/deregister calls per agent per window
    lifecycleWindow: "1 minute",
    instructions: "You are a support agent.", // the tasks' system instructions
    maxSteps: 20,                         // model turns per task
    journal: "tasks.sqlite",              // optional: tasks survive a restart (PLATFORM_JOURNAL, --journal)
    approvalExpiry: "24 hours",           // with a journal: how long a task waits for a decision on a call
    keepEndedTasks: "10 minutes",         // an ended task can be attached for its final event this long
    evictSilentAfter: 10                  // heartbeat intervals of silence before a process is forgotten
  })),
  Layer.provide(Model.layer("scripted", { script }))
)
// #endregion

// #region approve
// The submitting process decides the calls a suspended task waits for (TaskSuspended names them).
export const refundWithApproval = (served: Serve.Serve["Type"]) =>
  Effect.flatMap(PlatformClient.PlatformClient, (client) =>
    served.submitTask("Refund order A-1").pipe(
      Stream.runForEach((event) =>
        event._tag !== "TaskSuspended" ? Effect.void : Effect.forEach(event.pending, (call) =>
          (call.input as { readonly amount: number }).amount <= 100
            ? client.approve(event.taskId, call.toolCallId)
            : client.deny(event.taskId, call.toolCallId, { reason: "a refund over 100 needs a manager" }))
      )
    ))
// #endregion

// #region cancel
// A client of the task's agent cancels it: its running calls are interrupted, its stream ends TaskCancelled.
export const withdraw = (taskId: string) =>
  Effect.flatMap(PlatformClient.PlatformClient, (client) => client.cancel(taskId, "the customer withdrew")).pipe(
    Effect.tap(({ cancelled }) => Effect.logInfo(cancelled ? "cancelled" : "it had ended already"))
  )
// #endregion
