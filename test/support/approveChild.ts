/**
 * A second process that decides on an approval a suspended run waits for (design: Durable runs):
 * it opens the run's journal (a SQLite file), approves or denies the call, prints `decided`, exits.
 * Env: JOURNAL (the file), RUN_ID, CALL_ID, DECISION (`approve` or `deny`), REASON (optional).
 */
import { Effect } from "effect"
import { Agent, Journal } from "../../src/index.js"

const env = (name: string): string => {
  const value = process.env[name]
  if (value === undefined) throw new Error(`approveChild: ${name} is not set`)
  return value
}

const runId = env("RUN_ID")
const callId = env("CALL_ID")
const decision = env("DECISION") === "deny"
  ? Agent.deny(runId, callId, { reason: process.env.REASON })
  : Agent.approve(runId, callId)

Effect.runPromise(decision.pipe(Effect.provide(Journal.layerSql({ filename: env("JOURNAL") })))).then(
  () => console.log(`decided ${callId}`),
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exitCode = 1
  }
)
