/**
 * A handler's raw failure is logged where the tool ran (design: Logs): one line with the tool, the
 * call id and the cause (stack included), in an agent run and in a serving process; the model still
 * reads only the error text. A typed failure is the tool's answer and is not logged.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, HashMap, Layer, Logger, LogLevel, Schedule, Schema } from "effect"
import { Agent, Invocation, LanguageModel, Timing, Tool, Toolkit } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"

interface Line {
  readonly level: string
  readonly message: string
  readonly annotations: Record<string, unknown>
  readonly cause: string
}

/** A logger that keeps every line, and the lines it kept. */
const capture = () => {
  const lines: Array<Line> = []
  const layer = Logger.replace(
    Logger.defaultLogger,
    Logger.make(({ annotations, cause, logLevel, message }) =>
      void lines.push({
        level: logLevel.label,
        message: String(message),
        annotations: Object.fromEntries(HashMap.toEntries(annotations)),
        cause: Cause.isEmpty(cause) ? "" : Cause.pretty(cause)
      })
    )
  )
  return { lines, layer }
}

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const throws = Tool.make("score_ticket", { description: "Throws.", input: {}, timeout: "5 seconds" }, (): number => {
  throw new TypeError("cannot read the ticket's priority")
})
const typed = Tool.make("find_ticket", { description: "Not found.", input: {}, timeout: "5 seconds" }, () =>
  Effect.fail(new NotFound({ message: "no ticket" })))
const rejects = Tool.make("fetch_ticket", { description: "Rejects.", input: {}, timeout: "5 seconds" }, async (): Promise<number> => {
  throw new Error("the ticket service said 503")
})

const failures = (lines: ReadonlyArray<Line>) => lines.filter((line) => line.message.includes(" failed (attempt"))

describe("a handler's raw failure, logged where it ran (design: Logs)", () => {
  it.effect("in an agent run: one line with the tool, the call id and the stack; the model reads the text only", () => {
    const { layer, lines } = capture()
    return Effect.gen(function*() {
      const agent = Agent.make({ tools: [throws, typed] })
      const result = yield* Agent.run(agent, "go")
      assert.strictEqual(result.toolCalls[0]!.result.error, "TypeError: cannot read the ticket's priority")
      assert.strictEqual(result.toolCalls[1]!.result.error, "NotFound: no ticket")
      const logged = failures(lines)
      assert.strictEqual(logged.length, 1)
      assert.strictEqual(logged[0]!.level, "ERROR")
      assert.deepInclude(logged[0]!.annotations, { tool: "score_ticket", toolCallId: "c1" })
      assert.include(logged[0]!.cause, "TypeError: cannot read the ticket's priority")
      assert.match(logged[0]!.cause, /\n\s+at /)
    }).pipe(Effect.provide(Layer.merge(
      layer,
      LanguageModel.layerScripted([
        { toolCalls: [{ id: "c1", name: "score_ticket", arguments: "{}" }, { id: "c2", name: "find_ticket", arguments: "{}" }] },
        { text: "done" }
      ])
    )))
  })

  it.effect("a rejection too; the level is the config's, and \"None\" writes no line", () => {
    const { layer, lines } = capture()
    return Effect.gen(function*() {
      yield* Invocation.run(rejects, {}, { toolCallId: "r1" })
      yield* Invocation.run(rejects, {}, { toolCallId: "r2" }).pipe(Effect.provide(Invocation.layer({ failureLogLevel: "None" })))
      yield* Invocation.run(rejects, {}, { toolCallId: "r3" }).pipe(Effect.provide(Invocation.layer({ failureLogLevel: "Warning" })))
      assert.deepStrictEqual(failures(lines).map((l) => [l.annotations.toolCallId, l.level]), [["r1", "ERROR"], ["r3", "WARN"]])
      assert.include(failures(lines)[0]!.cause, "the ticket service said 503")
    }).pipe(Effect.provide(layer), Logger.withMinimumLogLevel(LogLevel.All))
  })

  it.effect("in a serving process: the served call's failure is logged there, once, with the task's ids", () => {
    const { layer, lines } = capture()
    const script: Array<LanguageModel.ScriptedTurn> = [
      { toolCalls: [{ id: "c1", name: "score_ticket", arguments: "{}" }] },
      { text: "done" }
    ]
    const platform = PlatformClient.layerTest.pipe(
      Layer.provideMerge(
        PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) }).pipe(
          Layer.provide(LanguageModel.layerScripted(script, { repeat: false }))
        )
      ),
      Layer.provideMerge(Timing.layer({ heartbeat: Schedule.spaced("60 seconds") })),
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]]))))
    )
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(throws))
      yield* served.runTask("score it")
      const logged = failures(lines)
      assert.strictEqual(logged.length, 1)
      assert.strictEqual(logged[0]!.annotations.tool, "score_ticket")
      assert.strictEqual(logged[0]!.annotations.toolCallId, "c1")
      assert.notStrictEqual(logged[0]!.annotations.taskId, "local")
      assert.match(logged[0]!.cause, /TypeError: cannot read the ticket's priority\n\s+at /)
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(platform, layer)))
  })
})
