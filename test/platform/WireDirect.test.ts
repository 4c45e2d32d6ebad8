/**
 * A submit's stream the platform's wire answers itself, past `RpcServer` (design: Serving): it ends as one through
 * `RpcServer` does, when its client cancels it (the cancel frame) and when its connection closes, and the task
 * learns it (no events written for it after that, its calls answered from the agent's other connections).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type { LanguageModel } from "../../src/index.js"
import { Protocol } from "../../src/exports/protocol.js"
import { ToolResult } from "../../src/ToolResult.js"
import { embedded, holdEntry } from "../support/hostileWireSuite.js"
import { type Frame, rawConnection as connect } from "../support/rawConnection.js"

const call = (id: string): LanguageModel.ToolCall => ({ id, name: "hold", arguments: "{}" })

/** Two turns of one call each, then the answer. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ toolCalls: [call("c1")] }, { toolCalls: [call("c2")] }, { text: "done" }]

const caller = { agentId: "agent-1", processId: "p1" }
const encodeResult = Schema.encodeSync(Protocol.ToolCallResult)

const requested = (toolCallId: string) => (frame: Frame) =>
  frame.events?.some((e) => e._tag === "ToolCallRequested" && e.toolCallId === toolCallId) === true

const answer = (taskId: string, toolCallId: string) => ({
  id: 10,
  call: "CompleteToolCall",
  payload: { ...caller, results: [encodeResult({ taskId, toolCallId, result: new ToolResult(1, undefined) })] }
})

describe("a submit's stream answered on the platform's wire", () => {
  it.live("cancelled by its client, it ends: none of its task's events written on it after", () =>
    Effect.gen(function*() {
      const url = yield* embedded(script)
      const a = yield* connect(url)
      a.send({ id: 1, call: "Register", payload: { ...caller, manifest: [holdEntry], manifestHash: "h" } })
      a.send({ id: 2, call: "SubmitTask", payload: { ...caller, prompt: "go" } })
      const first = yield* a.waitFor("c1 requested", requested("c1"))
      const taskId = first.events![0]!.taskId
      // Its end is not written (an interrupted call's end never is): a heartbeat's answer, after it, says it was read.
      a.send(`{"id":2,"cancel":true}`)
      a.send({ id: 4, call: "Heartbeat", payload: { ...caller, manifestHash: "h" } })
      yield* a.waitFor("the heartbeat's answer", (frame) => frame.id === 4)
      const streamFrames = a.frames.filter((frame) => frame.id === 2).length
      // The task goes on without it: c1's answer taken, c2 asked; a new attach reads it, the cancelled stream does not.
      a.send(answer(taskId, "c1"))
      a.send({ id: 3, call: "AttachTask", payload: { ...caller, taskId } })
      yield* a.waitFor("c2 requested on the new attach", (frame) => frame.id === 3 && requested("c2")(frame))
      assert.strictEqual(a.frames.filter((frame) => frame.id === 2).length, streamFrames, JSON.stringify(a.frames))
    }).pipe(Effect.scoped), 20_000)

  it.live("its connection closed, the task is no longer that connection's: another of the agent's answers its call", () =>
    Effect.gen(function*() {
      const url = yield* embedded(script)
      const a = yield* connect(url)
      a.send({ id: 1, call: "Register", payload: { ...caller, manifest: [holdEntry], manifestHash: "h" } })
      a.send({ id: 2, call: "SubmitTask", payload: { ...caller, prompt: "go" } })
      const taskId = (yield* a.waitFor("c1 requested", requested("c1"))).events![0]!.taskId
      a.socket.close()
      yield* Effect.promise(() => new Promise((resolve) => a.socket.once("close", resolve)))
      // Answered from another connection before it attaches: taken only once the task has no attachment.
      const b = yield* connect(url)
      b.send(answer(taskId, "c1"))
      yield* b.waitFor("the answer's acknowledgment", (frame) => frame.id === 10)
      b.send({ id: 3, call: "AttachTask", payload: { ...caller, taskId } })
      yield* b.waitFor("c2 requested on the attach", (frame) => frame.id === 3 && requested("c2")(frame))
    }).pipe(Effect.scoped), 20_000)
})
