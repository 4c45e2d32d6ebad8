/**
 * The tools module `serve --tools` loads in the shared-claims test (test/ServePostgres.test.ts): `charge`, idempotent,
 * appends `<WORKER> <task>/<call>` to `EFFECT_FILE` (its side effect); with `HOLD_UNTIL` set, it then waits until
 * that file exists before it answers.
 */
import { Effect, Schedule, Schema } from "effect"
import { appendFileSync, existsSync } from "node:fs"
import { Tool, ToolContext } from "../../src/index.js"

const env = (name: string) => process.env[name] ?? ""

export const charge = Tool.make("charge", {
  description: "Charges an order.",
  input: { order: Schema.String },
  timeout: "60 seconds",
  idempotent: true
}, ({ order }) =>
  Effect.gen(function*() {
    const ctx = yield* ToolContext.ToolContext
    appendFileSync(env("EFFECT_FILE"), `${env("WORKER")} ${ctx.taskId}/${ctx.toolCallId}\n`)
    const hold = env("HOLD_UNTIL")
    if (hold !== "") {
      yield* Effect.repeat(Effect.sync(() => existsSync(hold)), {
        until: (found) => found,
        schedule: Schedule.spaced("50 millis")
      })
    }
    return `charged ${order} on ${env("WORKER")}`
  }))
