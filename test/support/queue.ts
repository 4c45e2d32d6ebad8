/**
 * What the job-queue tests share (test/platform/JobQueue.test.ts embedded, ClusterJobQueue.test.ts in cluster mode):
 * child processes for the test's scope, their lines, the submitter's events, and waiting for a condition.
 */
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import type { Protocol } from "../../src/exports/protocol.js"
import { type Child, startChild } from "./childProcess.js"

/** A child process for the test's scope, SIGKILLed at its end if it still runs. */
export const start = (...args: Parameters<typeof startChild>) =>
  Effect.acquireRelease(
    Effect.sync(() => startChild(...args)),
    (child) =>
      Effect.promise(() => {
        if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGKILL")
        return child.exited
      })
  )

/** The first line of `child` starting with `prefix`, past it; fails the test after `seconds`. */
export const line = (child: Child, prefix: string, seconds: number) =>
  Effect.flatMap(Effect.promise(() => child.waitFor(prefix, seconds * 1000)), (found) =>
    found === undefined
      ? Effect.dieMessage(`no "${prefix}" line within ${seconds} s; it printed: ${child.lines.slice(-5).join(" | ")}`)
      : Effect.succeed(found.slice(prefix.length)))

/** The events the submitter printed (`event <json>`). */
export const eventsOf = (submitter: Child): Array<Protocol.TaskEvent> =>
  submitter.lines.flatMap((l) => l.startsWith("event ") ? [JSON.parse(l.slice("event ".length)) as Protocol.TaskEvent] : [])

/** Waits until `until` holds, looking every 50 ms, for at most `seconds`. */
export const eventually = (until: () => boolean, what: string | (() => string), seconds: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + seconds * 1000
    while (!until()) {
      if (Date.now() > deadline) return yield* Effect.dieMessage(`waited ${seconds} s for ${typeof what === "string" ? what : what()}`)
      yield* Effect.sleep("50 millis")
    }
  })

/**
 * The outcome both job-queue tests assert: `tasks` tasks ended, each completed on w2, or (held by w1 when it was
 * killed: `held` of them) with the outcome unknown, read from the claim w1 left; each task's call had its side effect
 * (a line `<worker> <task>/<call>` of `effects`) once, on w1 or w2.
 */
export const assertQueueOutcome = (
  { effects, ends, held, tasks }: {
    readonly ends: ReadonlyArray<Protocol.TaskEvent>
    readonly effects: ReadonlyArray<string>
    readonly held: number
    readonly tasks: number
  }
): void => {
  assert.strictEqual(ends.length, tasks)
  const outputs = ends.map((end) =>
    end._tag === "TaskCompleted" ? end.output : end._tag === "TaskFailed" ? `failed: ${end.reason}` : end._tag
  )
  const unknown = "c1!charge: the earlier attempt did not finish; its outcome is unknown"
  for (const output of outputs) assert.match(output, /^c1="charged O-\d+ by w2"$|^c1!charge: the earlier attempt/)
  assert.strictEqual(outputs.filter((o) => o === unknown).length, held)
  const byCall = new Map<string, Array<string>>()
  for (const effect of effects) {
    const [worker, key] = effect.split(" ")
    assert.oneOf(worker, ["w1", "w2"])
    byCall.set(key!, [...(byCall.get(key!) ?? []), worker!])
  }
  assert.strictEqual(byCall.size, tasks)
  for (const [key, workers] of byCall) assert.strictEqual(workers.length, 1, `${key}: ${workers.join(", ")}`)
}

/**
 * A worker of agent-1 as an operator runs one: `agent-tools serve --tools test/fixtures/queueTools.ts` (its `charge`
 * appends `<name> <task>/<call>` to `effectFile`, then takes `holdMillis`), on `urls` (the first first), its claims
 * in the shared `claims` file; for the test's scope.
 */
export const cliWorker = (
  { claims, effectFile, holdMillis, name, urls }: {
    readonly name: string
    readonly urls: ReadonlyArray<string>
    readonly holdMillis: number
    readonly claims: string
    readonly effectFile: string
  }
) =>
  start("src/main.ts", {
    PLATFORM_URL: urls.join(","),
    PLATFORM_TOKEN: "tok-1",
    AGENT_ID: "agent-1",
    IDEMPOTENCY_DB: claims,
    EFFECT_FILE: effectFile,
    WORKER: name,
    HOLD_MS: String(holdMillis)
  }, ["serve", "--tools", "test/fixtures/queueTools.ts"], { stderr: true })

/** The process id a `cliWorker` registered as, once the platform has its tool; fails the test after `seconds`. */
export const registeredAs = (worker: Child, seconds: number) =>
  Effect.map(
    eventually(
      () => worker.lines.some((l) => /registered 1 tool\(s\) \(charge\) as (\S+);/.test(l)),
      // What it printed instead, should it never register: the failure says why.
      () => `the worker registered; it printed: ${worker.lines.slice(-8).join(" | ") || "nothing"}`,
      seconds
    ),
    () => /registered 1 tool\(s\) \(charge\) as (\S+);/.exec(worker.lines.find((l) => l.includes("registered 1 tool(s)"))!)![1]!
  )
