/**
 * The task of the cluster bench (test/bench/cluster.ts), asked of the scripted model: `callsPerTask` calls of `echo`,
 * one a turn, then the answer "done". Shared with the test that counts what such a task costs
 * (test/platform/TaskWork.test.ts), so that the count is of the bench's task.
 */
import type { LanguageModel } from "../../src/index.js"

/** Calls a task makes, one a model turn, before its last turn answers. */
export const callsPerTask = 2

const step = (request: LanguageModel.ModelRequest) => request.messages.filter((m) => m._tag === "AssistantMessage").length

/** The model's turns (with `perConversation: true`, each conversation from its first). */
export const script: ReadonlyArray<LanguageModel.ScriptedTurn> = Array.from({ length: callsPerTask + 1 }, () => (request) =>
  step(request) < callsPerTask
    ? { toolCalls: [{ id: `c${step(request)}`, name: "echo", arguments: `{"n":${step(request)}}` }] }
    : { text: "done" })
