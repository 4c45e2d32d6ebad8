/**
 * How a task's events are framed on the serving process's connection (design: Serving): what a process waits on
 * to act (a call, the task's end) is written at once, and the news before it (the task's start, a call's end, the
 * next turn) goes in the same frame, so that a turn of a task costs one frame, not three.
 */
import * as Headers from "@effect/platform/Headers"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type { LanguageModel } from "../../src/index.js"
import { Protocol } from "../../src/exports/protocol.js"
import { ToolResult } from "../../src/ToolResult.js"
import { connectionHeader, StreamWriters, streamHeader } from "../../src/platform/Wire.js"
import { embedded, holdEntry } from "../support/hostileWireSuite.js"
import { type Frame, rawConnection } from "../support/rawConnection.js"

const call = (id: string): LanguageModel.ToolCall => ({ id, name: "hold", arguments: "{}" })

/** Two turns of one call each, then the answer. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ toolCalls: [call("c1")] }, { toolCalls: [call("c2")] }, { text: "done" }]

const encodeResult = Schema.encodeSync(Protocol.ToolCallResult)

describe("a task's events on the serving process's connection", () => {
  it.live("a call goes in one frame with the news before it (the task's start, the last call's end, its turn)", () =>
    Effect.gen(function*() {
      const url = yield* embedded(script)
      const { frames, socket: ws, waitFor } = yield* rawConnection(url)
      const caller = { agentId: "agent-1", processId: "p1" }
      let answers = 10
      // Each call answered as it comes, as a serving process answers it.
      ws.on("message", (data) => {
        const frame = JSON.parse(String(data)) as Frame
        for (const event of frame.events ?? []) {
          if (event._tag !== "ToolCallRequested") continue
          const result = encodeResult({ taskId: event.taskId, toolCallId: event.toolCallId!, result: new ToolResult(1, undefined) })
          ws.send(JSON.stringify({ id: answers++, call: "CompleteToolCall", payload: { ...caller, results: [result] } }))
        }
      })
      ws.send(JSON.stringify({ id: 1, call: "Register", payload: { ...caller, manifest: [holdEntry], manifestHash: "h" } }))
      ws.send(JSON.stringify({ id: 2, call: "SubmitTask", payload: { ...caller, prompt: "go" } }))
      yield* waitFor("the stream's end", (frame) => frame.id === 2 && frame.events === undefined)
      const tags = frames.filter((frame) => frame.id === 2 && frame.events !== undefined).map((frame) => frame.events!.map((e) => e._tag))
      assert.deepStrictEqual(tags, [
        ["TaskStarted", "TurnStarted", "ToolCallRequested"],
        ["ToolCallCompleted", "TurnStarted", "ToolCallRequested"],
        ["ToolCallCompleted", "TurnStarted", "ModelText", "TaskCompleted"]
      ])
    }).pipe(Effect.scoped), 20_000)

  it("a stream's events that come after its connection closed are not written on it", () => {
    const writers = new StreamWriters()
    const written: Array<string> = []
    writers.opened("c1", (frame) => written.push(frame))
    const write = writers.writerOf(Headers.fromInput({ [connectionHeader]: "c1", [streamHeader]: "7" }))!
    write([{ _tag: "TurnStarted" }])
    writers.closed("c1")
    write([{ _tag: "ModelText" }])
    // The same connection id opened again is another connection: not this stream's either.
    writers.opened("c1", (frame) => written.push(`again ${frame}`))
    write([{ _tag: "ToolCallCompleted" }])
    assert.deepStrictEqual(written.map((frame) => JSON.parse(frame).events[0]._tag), ["TurnStarted"])
  })
})
