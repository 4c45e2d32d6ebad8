/** A CPU-bound body moved off the event loop by one line of its tool's definition. */
// #region tool
// score.ts: every worker loads this module to find the tool, so it defines and exports tools and does
// nothing else at load (no server started, no program run).
import { Effect, Schema } from "effect"
import { Agent, Tool, WorkerPool } from "../src/index.js"

export const scorePriority = Tool.make("score_priority", {
  description: "Score a ticket's priority from its text, 0 to 100.",
  input: { ticket: Schema.String },
  output: Schema.Number,
  timeout: "5 seconds",
  worker: import.meta.url // the body runs on a worker thread, off the event loop
}, ({ ticket }) => score(ticket))

// A stand-in for a model that takes a few hundred milliseconds of CPU.
function score(text: string): number {
  let hash = 0
  for (let round = 0; round < 2_000_000; round++) hash = (hash * 31 + text.charCodeAt(round % text.length)) | 0
  return Math.abs(hash) % 101
}
// #endregion

// #region layer
// An agent run starts its tools' workers as it opens, Serve before it registers, Mcp before it serves.
// To start them with your program instead (and size the pools), build this layer first:
export const workers = WorkerPool.layerTools([scorePriority], { size: 2 })
export const triage = Agent.run(Agent.make({ tools: [scorePriority] }), "Score ticket T-1").pipe(Effect.provide(workers))
// #endregion
