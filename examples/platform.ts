/** The platform on a real WebSocket, with every option of its handlers. */
import { Layer } from "effect"
import { type LanguageModel, Model, PlatformServer } from "../src/index.js"

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ text: "Nothing to do." }]

// #region platform
// A real WebSocket server on 127.0.0.1; the tasks' model comes from the context.
export const platform = PlatformServer.layerWebSocket({ port: 8787 }).pipe(
  Layer.provide(PlatformServer.layerHandlers({
    tokens: PlatformServer.parseTokens("secret-1:support-agent,secret-2:billing-agent"), // PLATFORM_TOKENS format
    heartbeatInterval: "60 seconds",     // 3 silent intervals hide an agent's tools
    lifecycleBudget: 30,                  // register/heartbeat/deregister calls per agent per window
    lifecycleWindow: "1 minute",
    instructions: "You are a support agent.", // the tasks' system instructions
    maxSteps: 20,                         // model turns per task
    journal: "tasks.sqlite",              // optional: tasks survive a restart (PLATFORM_JOURNAL, --journal)
    keepEndedTasks: "10 minutes",         // an ended task can be attached for its final event this long
    evictSilentAfter: 10                  // heartbeat intervals of silence before a process is forgotten
  })),
  Layer.provide(Model.layer("scripted", { script }))
)
// #endregion
