/**
 * The calls of one model turn (design: Calls in a turn): all started at once by default (at most the agent's
 * limit; one at a time when sequential), each through the pipeline, their records in call order; and a
 * record as the model reads it back.
 */
import { Effect } from "effect"
import * as Content from "../../Content.js"
import type * as LanguageModel from "../../LanguageModel.js"
import type * as Toolkit from "../../Toolkit.js"
import { ToolResult } from "../../ToolResult.js"
import * as Door from "../call/door.js"
import * as Json from "../util/json.js"
import { startCall } from "./call.js"
import { startJournaled } from "./replay.js"
import { awaitingApproval, type Run } from "./run.js"
import { AgentEvent, type ToolCallRecord } from "./types.js"

/**
 * Runs the calls of one turn; records come back in call order. At most the run's `limit` run at once
 * (1: sequential). Calls start on this stack, in order, until `limit` of them are waiting: one that
 * completes synchronously is recorded at once and costs no fiber; the rest start as the waiting ones finish.
 */
export const execute = (
  run: Run,
  step: number,
  calls: ReadonlyArray<LanguageModel.ToolCall>
): Effect.Effect<Array<ToolCallRecord>> =>
  Effect.withFiberRuntime((fiber, status) => {
    // Each call's arguments are parsed once: for its events and record, and for the pipeline.
    const inputs = calls.map((call) => parseInput(call.arguments))
    if (run.emit !== undefined) {
      for (let i = 0; i < calls.length; i++) {
        const call = calls[i]!
        run.emit(AgentEvent.ToolCallStarted({ step, id: call.id, name: call.name, input: inputs[i] }))
      }
    }
    const records = new Array<ToolCallRecord>(calls.length)
    // Starts call `i` on the stack of `calling`: undefined once recorded, else the wait for its record.
    const begin = (calling: Door.CallingFiber, i: number): Effect.Effect<void> | undefined => {
      const call = calls[i]!
      const input = inputs[i]
      const args = input === call.arguments ? call.arguments : new Door.ParsedArguments(call.arguments, input)
      const startedAt = calling.clock.unsafeCurrentTimeMillis()
      const started = run.journaled === undefined
        ? startCall(run, calling, call, args)
        : startJournaled(run, calling, step, call, args)
      if (started instanceof ToolResult) {
        records[i] = record(run, calling, step, call, input, started, startedAt)
        return undefined
      }
      return Effect.map(started, (result) => {
        records[i] = record(run, calling, step, call, input, result, startedAt)
      })
    }
    const limit = run.limit
    const calling = new Door.CallingFiber(fiber, status.runtimeFlags)
    const waits: Array<Effect.Effect<void>> = []
    let next = 0
    while (next < calls.length && waits.length < limit) {
      const wait = begin(calling, next++)
      if (wait !== undefined) waits.push(wait)
    }
    for (let i = next; i < calls.length; i++) {
      waits.push(Effect.withFiberRuntime((fiber, status) =>
        begin(new Door.CallingFiber(fiber, status.runtimeFlags), i) ?? Effect.void
      ))
    }
    if (waits.length === 0) return Effect.succeed(records)
    // One call left to wait for: wait in this fiber, no fork.
    if (waits.length === 1) return Effect.as(waits[0]!, records)
    const concurrency = limit === 1 ? undefined : limit === Infinity ? "unbounded" as const : limit
    return Effect.as(Effect.all(waits, { concurrency, discard: true }), records)
  })

/** A finished call's record (reused or not, how long it took), told to the run's observer unless it waits for approval. */
const record = (
  run: Run,
  calling: Door.CallingFiber,
  step: number,
  call: LanguageModel.ToolCall,
  input: unknown,
  result: ToolResult,
  startedAt: number
): ToolCallRecord => {
  const record: ToolCallRecord = {
    id: call.id,
    name: call.name,
    input,
    result,
    cached: run.door.wasReused(call.id),
    durationMillis: calling.clock.unsafeCurrentTimeMillis() - startedAt
  }
  if (result !== awaitingApproval) run.emit?.(AgentEvent.ToolCallFinished({ step, call: record }))
  return record
}

/**
 * A call's outcome as the model reads it: the error text, a content output's rendering (design: Content), or JSON;
 * under the id the provider gave the call (`said`, in call order), which the run's own id may differ from.
 */
export const toMessage = (toolkit: Toolkit.Toolkit<any>, said: ReadonlyArray<LanguageModel.ToolCall>) =>
(record: ToolCallRecord, i: number): LanguageModel.Message => ({
  _tag: "ToolResultMessage",
  toolCallId: said[i]?.id ?? record.id,
  name: record.name,
  content: record.result.error ?? contentText(toolkit, record) ?? JSON.stringify(record.result.value),
  isError: record.result.error !== undefined
})

const contentText = (toolkit: Toolkit.Toolkit<any>, record: ToolCallRecord): string | undefined => {
  const tool = toolkit.byName.get(record.name)
  return tool !== undefined && Content.isContentSchema(tool.output)
    ? Content.render(record.result.value as Content.Item | Content.Items)
    : undefined
}

/**
 * A call's arguments as a record and an event show them: the parsed JSON, or the raw text when it is
 * not JSON within the limits (design: Hostile clients). A value nested past them stays text, so no
 * consumer of the record (a stream, a journal writing the run's result) can exhaust its stack on it.
 */
const parseInput = (text: string): unknown => {
  const parsed = Json.parse(text)
  return "value" in parsed && !Json.deeperThan(parsed.value, Json.defaultLimits.maxDepth) ? parsed.value : text
}

