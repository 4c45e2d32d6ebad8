/**
 * A serving process for the crash and shutdown tests. It serves `append_line` (idempotent: appends
 * the call id to EFFECT_FILE, BEFORE_MS into its body; returns AFTER_MS later) with its claims in the
 * SQLite file CLAIMS_DB, and submits PROMPT as a task (MODE=submit), attaches to TASK_ID
 * (MODE=attach), or only serves, taking back the tasks it held by itself (MODE=resume). GRACE_MS is
 * its shutdown grace period. It prints `task:<id>`, the handler's `point:<name>` markers (so the
 * test can stop it at a chosen moment), `output:<json>` and `serving` once registered.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Stream } from "effect"
import { appendFileSync } from "node:fs"
import { Tool, ToolContext, Toolkit } from "../../src/index.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"

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
    yield* Effect.sleep(Number(process.env.BEFORE_MS ?? 15))
    appendFileSync(process.env.EFFECT_FILE!, `${toolCallId}\n`)
    yield* say("point:after-effect")
    yield* Effect.sleep(Number(process.env.AFTER_MS ?? 15))
    yield* say("point:returning")
    return "appended"
  }))

const program = Effect.gen(function*() {
  const grace = process.env.GRACE_MS
  const served = yield* Serve.makeConfig(yield* Toolkit.make(appendLine), {
    shutdownGrace: grace === undefined ? undefined : Number(grace)
  })
  yield* say("serving")
  if (process.env.MODE === "resume") return yield* Effect.never
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
    Serve.layerStoreSql({ filename: process.env.CLAIMS_DB!, lease: "300 millis" })
  ))
)

NodeRuntime.runMain(program)
