/**
 * A serving process for the crash test. It serves `append_line` (idempotent: appends the call id
 * to EFFECT_FILE) with its claims in the SQLite file CLAIMS_DB, and either submits PROMPT as a task
 * (MODE=submit) or attaches to TASK_ID (MODE=attach). It prints `task:<id>`, the handler's
 * `point:<name>` markers (so the test can kill it at a chosen moment) and `output:<json>`.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Stream } from "effect"
import { appendFileSync } from "node:fs"
import { Idempotency, PlatformClient, Serve, Tool, ToolContext, Toolkit } from "../../src/index.js"

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const appendLine = Tool.make("append_line", {
  description: "Append this call's id to the file.",
  input: {},
  // Long enough for a new process to start on a loaded machine before the platform gives up on the call.
  timeout: "90 seconds",
  idempotent: true
}, () =>
  Effect.gen(function*() {
    const { toolCallId } = yield* ToolContext.ToolContext
    yield* say("point:before")
    yield* Effect.sleep("15 millis")
    appendFileSync(process.env.EFFECT_FILE!, `${toolCallId}\n`)
    yield* say("point:after-effect")
    yield* Effect.sleep("15 millis")
    yield* say("point:returning")
    return "appended"
  }))

const program = Effect.gen(function*() {
  const served = yield* Serve.make(yield* Toolkit.make(appendLine))
  const events = process.env.MODE === "attach"
    ? served.attachTask(process.env.TASK_ID!)
    : served.submitTask(process.env.PROMPT!)
  yield* Stream.runForEach(events, (event) => {
    switch (event._tag) {
      case "TaskStarted":
        return say(`task:${event.taskId}`)
      case "TaskCompleted":
        return say(`output:${JSON.stringify(event.output)}`)
      case "TaskFailed":
        return say(`failed:${JSON.stringify(event.reason)}`)
      default:
        return Effect.void
    }
  })
}).pipe(
  Effect.scoped,
  Effect.provide(Layer.merge(
    PlatformClient.layer,
    Idempotency.layerSql({ filename: process.env.CLAIMS_DB!, lease: "300 millis" })
  ))
)

NodeRuntime.runMain(program)
