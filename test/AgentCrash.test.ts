/**
 * Durable agent runs proven by killing the process (design: Durable runs). A journaled run of 6
 * model turns, each with concurrent calls of an idempotent tool (`lookup`, its keys repeated within
 * and across turns) and of one that is not (`append`), runs in a child process
 * (test/support/agentRunChild.ts) that is killed with SIGKILL at a random point; a new process with
 * the same store resumes it, and may be killed too (0-2 times), until one runs it to its end.
 * Between two processes the test reads the journal as the next one will find it.
 *
 * Per round: the run ends with the same output and calls as an uncrashed run. A process asks the
 * model only for turns the journal does not hold, and never runs a call whose outcome is journaled:
 * a turn is asked twice only when the process that asked it first was killed between the reply and
 * its journal write (that reply is lost; counted as asked again). An idempotent input has at most
 * one side effect, by the run's first call with it, and exactly one unless that call was journaled
 * as started without an outcome, in which case every call with that input reads "outcome unknown";
 * only such calls read it. A non-idempotent call runs again only after it was left unfinished.
 * The same on SQLite and on PostgreSQL (a server started for the test).
 */
import { assert, describe, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Schedule, Schema } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, Journal } from "../src/index.js"
import { bundleChild, type Child, startBundled } from "./support/childProcess.js"
import { record, scale } from "./support/figures.js"
import { pgClient, postgres } from "./support/postgres.js"

const fromEnv = (name: string): number | undefined => {
  const value = process.env[name]
  return value === undefined || value === "" ? undefined : Number(value)
}
const rounds = fromEnv("ROUNDS") ?? scale(20, 100)
const pgRounds = fromEnv("PG_ROUNDS") ?? fromEnv("ROUNDS") ?? scale(20, 100)

type RunRecord = Agent.RunResult["toolCalls"][number]
const decodeResult = Schema.decodeUnknownSync(Schema.parseJson(Agent.RunResult))

/** What the test reads of the journal between two processes. */
interface Snapshot {
  /** The run's start was journaled. */
  readonly journaled: boolean
  readonly ended: boolean
  readonly turns: number
  /** Calls journaled as started without an outcome. */
  readonly unfinished: ReadonlySet<string>
  /** Calls with a journaled outcome. */
  readonly answered: ReadonlySet<string>
}

const snapshot = (journal: Journal.Journal["Type"], runId: string): Effect.Effect<Snapshot> =>
  Effect.map(Effect.orDie(journal.run(runId)), (run): Snapshot => {
    if (run === undefined) return { journaled: false, ended: false, turns: 0, unfinished: new Set(), answered: new Set() }
    if (!Journal.isOpen(run)) return { journaled: true, ended: true, turns: Infinity, unfinished: new Set(), answered: new Set() }
    const unfinished = new Set<string>()
    const answered = new Set<string>()
    for (const [id, call] of run.calls) (call.result === undefined ? unfinished : answered).add(id)
    return { journaled: true, ended: false, turns: run.turns.length, unfinished, answered }
  })

/** `<words...> <pid>` lines of a log, by pid. */
const readLog = (file: string): Array<{ readonly words: ReadonlyArray<string>; readonly pid: number }> =>
  readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((line) => {
    const words = line.split(" ")
    return { words: words.slice(0, -1), pid: Number(words[words.length - 1]) }
  })

const isUnknown = (call: RunRecord) => call.result.error?.includes("outcome is unknown") === true
const resultText = (call: RunRecord) => call.result.error ?? JSON.stringify(call.result.value)
const keyOf = (call: RunRecord) => (call.input as { readonly key: string }).key

/** The figures of a store's rounds, summed. */
class Counts {
  rounds = 0
  processes = 0
  kills = 0
  killedBeforeJournaled = 0
  killedWithCallsInFlight = 0
  killedBetweenCalls = 0
  finishedBeforeKill = 0
  turnsAsked = 0
  distinctTurns = 0
  idempotentCalls = 0
  idempotentUnique = 0
  idempotentEffects = 0
  unknownInputs = 0
  unknownRecords = 0
  nonIdempotentCalls = 0
  nonIdempotentEffects = 0
  millis = 0
}

/** Runs `rounds` crash rounds against one store; `env` names it to the child, `journal` reads it. */
const crashRounds = (options: {
  readonly store: string
  readonly rounds: number
  readonly env: Record<string, string>
  readonly journal: Journal.Journal["Type"]
  /** Waits until the store is done with what the killed process `pid` sent it. */
  readonly settle: (pid: number) => Effect.Effect<void>
  readonly dir: string
  readonly bundle: string
}) =>
  Effect.gen(function*() {
    const { dir, journal, store } = options
    const start = (runId: string, mode: "run" | "resume", files: { asks: string; effects: string }) =>
      startBundled(options.bundle, {
        ...options.env,
        RUN_ID: runId,
        MODE: mode,
        ASKS_FILE: files.asks,
        EFFECTS_FILE: files.effects
      })
    const resultOf = (child: Child) => {
      const line = child.lines.find((l) => l.startsWith("{"))
      return line === undefined ? undefined : decodeResult(line)
    }
    const logs = (name: string) => {
      const files = { asks: join(dir, `${name}.asks`), effects: join(dir, `${name}.effects`) }
      writeFileSync(files.asks, "")
      writeFileSync(files.effects, "")
      return files
    }

    // The uncrashed run: what every round must end with, and how long a run takes once ready.
    const referenceFiles = logs(`${store}-reference`)
    const reference = start(`${store}-reference`, "run", referenceFiles)
    yield* Effect.promise(() => reference.waitFor("ready", 60_000))
    const readyAt = performance.now()
    yield* Effect.promise(() => reference.waitFor("{", 60_000))
    const span = performance.now() - readyAt
    assert.strictEqual(yield* Effect.promise(() => reference.exited), 0, "the uncrashed run exits 0")
    const expected = resultOf(reference)
    assert.isDefined(expected, "the uncrashed run printed its result")
    assert.strictEqual(readLog(referenceFiles.asks).length, expected!.steps, "the uncrashed run asks each turn once")
    const signature = (result: Agent.RunResult) => result.toolCalls.map((c) => `${c.id}:${c.name}`).join(",")

    const counts = new Counts()
    const startedAt = performance.now()
    for (let round = 1; round <= options.rounds; round++) {
      const runId = `${store}-round-${round}`
      const files = logs(runId)
      const kills = 1 + Math.floor(Math.random() * 3)
      // The journal as each process found it at its start, by pid.
      const before = new Map<number, Snapshot>()
      const snapshots: Array<Snapshot> = []
      let found = yield* snapshot(journal, runId)
      let final: Agent.RunResult | undefined
      for (let p = 0; p <= kills; p++) {
        const child = start(runId, p === 0 ? "run" : "resume", files)
        before.set(child.process.pid!, found)
        counts.processes++
        const ready = yield* Effect.promise(() => child.waitFor("ready", 60_000))
        assert.isDefined(ready, `${runId}, process ${p + 1}: it opened the journal`)
        if (p < kills) {
          // Over what is left of the run's span and a little past it: before, during and after
          // calls, and after the end (a resumed run replays its journaled turns in no time).
          const left = Math.max(1, expected!.steps - found.turns) / expected!.steps
          yield* Effect.sleep(Math.floor(Math.random() * span * left * 1.2))
          child.process.kill("SIGKILL")
          yield* Effect.promise(() => child.exited)
          yield* options.settle(child.process.pid!)
          found = yield* snapshot(journal, runId)
          snapshots.push(found)
          counts.kills++
          if (resultOf(child) !== undefined) counts.finishedBeforeKill++
          else if (!found.journaled) counts.killedBeforeJournaled++
          else if (found.unfinished.size > 0) counts.killedWithCallsInFlight++
          else counts.killedBetweenCalls++
        } else {
          yield* Effect.promise(() => child.waitFor("{", 60_000))
          const code = yield* Effect.promise(() => child.exited)
          final = resultOf(child)
          assert.isDefined(final, `${runId}: the last process ran the run to its end (exit ${code}; its stderr is above; its last lines: ${child.lines.slice(-8).join(" | ")})`)
          assert.strictEqual(code, 0, `${runId}: the last process exits 0`)
        }
      }
      const result = final!
      const where = `${runId} (${kills} kills)`
      assert.strictEqual(result.output, expected!.output, `${where}: the output of an uncrashed run`)
      assert.strictEqual(result.steps, expected!.steps, `${where}: the steps of an uncrashed run`)
      assert.strictEqual(signature(result), signature(expected!), `${where}: the calls of an uncrashed run`)
      // Calls journaled as started without an outcome when a process died: the next one found them so.
      const unfinished = new Set(snapshots.flatMap((s) => [...s.unfinished]))

      // Turns: a process asks only for turns its journal did not hold, each once.
      const asks = readLog(files.asks)
      for (const { pid, words } of asks) {
        const step = Number(words[0])
        assert.isAbove(step, before.get(pid)!.turns, `${where}: turn ${step} asked again though journaled`)
      }
      for (const pid of before.keys()) {
        const mine = asks.filter((a) => a.pid === pid).map((a) => a.words[0])
        assert.strictEqual(new Set(mine).size, mine.length, `${where}: a process asked a turn twice`)
      }
      const distinct = new Set(asks.map((a) => a.words[0])).size
      assert.strictEqual(distinct, result.steps, `${where}: every turn was asked by some process`)

      // No process runs a call whose outcome it found journaled.
      const effects = readLog(files.effects).map(({ pid, words }) => ({ pid, tool: words[0]!, key: words[1]!, id: words[2]! }))
      for (const effect of effects) {
        assert.isFalse(
          before.get(effect.pid)!.answered.has(effect.id) || before.get(effect.pid)!.ended,
          `${where}: ${effect.id} ran again though its outcome was journaled`
        )
      }

      // Idempotent: per input, one outcome for every call; at most one effect, by the first call.
      const lookups = result.toolCalls.filter((c) => c.name === "lookup")
      const byKey = new Map<string, Array<RunRecord>>()
      for (const call of lookups) byKey.set(keyOf(call), [...(byKey.get(keyOf(call)) ?? []), call])
      for (const [key, calls] of byKey) {
        const first = calls[0]!
        for (const call of calls) {
          assert.strictEqual(resultText(call), resultText(first), `${where}: ${call.id} reads what ${first.id} read`)
        }
        const done = effects.filter((e) => e.tool === "lookup" && e.key === key)
        assert.isAtMost(done.length, 1, `${where}: lookup ${key} had ${done.length} side effects`)
        for (const effect of done) assert.strictEqual(effect.id, first.id, `${where}: lookup ${key}'s effect is its first call's`)
        if (isUnknown(first)) {
          assert.isTrue(unfinished.has(first.id), `${where}: ${first.id} reads "outcome unknown" but was not left unfinished`)
          counts.unknownInputs++
        } else {
          assert.isFalse(unfinished.has(first.id), `${where}: ${first.id} was left unfinished but does not read "outcome unknown"`)
          assert.strictEqual(done.length, 1, `${where}: lookup ${key} has an outcome, so its effect happened once`)
        }
        counts.idempotentEffects += done.length
      }
      // Only the idempotent tool reads "outcome unknown"; a non-idempotent call ran again only if left unfinished.
      for (const call of result.toolCalls) {
        if (call.name !== "lookup") assert.isTrue(call.result.success, `${where}: ${call.id} succeeded: ${resultText(call)}`)
      }
      const appends = result.toolCalls.filter((c) => c.name === "append")
      for (const call of appends) {
        const runs = effects.filter((e) => e.tool === "append" && e.id === call.id).length
        const leftUnfinished = snapshots.filter((s) => s.unfinished.has(call.id)).length
        assert.isAtLeast(runs, 1, `${where}: ${call.id} ran`)
        assert.isAtMost(runs, 1 + leftUnfinished, `${where}: ${call.id} ran ${runs} times, left unfinished ${leftUnfinished}`)
      }

      counts.rounds++
      counts.turnsAsked += asks.length
      counts.distinctTurns += distinct
      counts.idempotentCalls += lookups.length
      counts.idempotentUnique += byKey.size
      counts.unknownRecords += lookups.filter(isUnknown).length
      counts.nonIdempotentCalls += appends.length
      counts.nonIdempotentEffects += effects.filter((e) => e.tool === "append").length
    }
    counts.millis = performance.now() - startedAt
    report(store, counts, span)
  })

const report = (store: string, c: Counts, span: number) => {
  const rerun = c.nonIdempotentEffects - c.nonIdempotentCalls
  console.log(
    `agent crash test on ${store}, ${c.rounds} rounds in ${(c.millis / 1000).toFixed(1)} s ` +
      `(an uncrashed run: ${span.toFixed(0)} ms once ready): ${c.processes} processes, ${c.kills} killed ` +
      `(${c.killedBeforeJournaled} before the run was journaled, ${c.killedWithCallsInFlight} with calls in flight, ` +
      `${c.killedBetweenCalls} between calls, ${c.finishedBeforeKill} after the run ended); ` +
      `model turns asked ${c.turnsAsked}, distinct turns ${c.distinctTurns} ` +
      `(asked again, the reply lost with its process before the journal held it: ${c.turnsAsked - c.distinctTurns}); ` +
      `idempotent calls ${c.idempotentCalls}, unique ${c.idempotentUnique}, side effects ${c.idempotentEffects}, ` +
      `inputs reading "outcome unknown" ${c.unknownInputs} (${c.unknownRecords} calls); ` +
      `non-idempotent calls ${c.nonIdempotentCalls}, side effects ${c.nonIdempotentEffects} (${rerun} re-runs)`
  )
  const suite = `agent crash (SIGKILL, ${store})`
  const figure = (measure: string, value: string | number, expected?: string) => record({ suite, measure, value, expected })
  figure("rounds / processes / killed", `${c.rounds} / ${c.processes} / ${c.kills}`)
  figure(
    "kills: before journaled / calls in flight / between calls / after the end",
    `${c.killedBeforeJournaled} / ${c.killedWithCallsInFlight} / ${c.killedBetweenCalls} / ${c.finishedBeforeKill}`
  )
  figure("runs completed", c.rounds, `${c.rounds}`)
  figure(
    "model turns asked / distinct turns (asked again)",
    `${c.turnsAsked} / ${c.distinctTurns} (${c.turnsAsked - c.distinctTurns})`,
    "asked again only if not journaled"
  )
  figure("idempotent unique calls / side effects", `${c.idempotentUnique} / ${c.idempotentEffects}`, "unique - unknown <= effects <= unique")
  figure("idempotent inputs (calls) reading outcome unknown", `${c.unknownInputs} (${c.unknownRecords})`, "only if left unfinished")
  figure("non-idempotent calls / side effects (re-runs)", `${c.nonIdempotentCalls} / ${c.nonIdempotentEffects} (${rerun})`)
}

/** A temp folder and the child bundled into it, for the scope. */
const setup = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "agent-tools-agent-crash-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const bundle = yield* Effect.promise(() => bundleChild("test/support/agentRunChild.ts", dir))
  return { dir, bundle }
})

describe("durable agent runs under SIGKILL", () => {
  it.live(`SQLite: ${rounds} rounds of kills and resumes`, () =>
    Effect.gen(function*() {
      const { bundle, dir } = yield* setup
      const filename = join(dir, "journal.sqlite")
      const journal = Context.get(yield* Layer.build(Journal.layerSql({ filename })), Journal.Journal)
      // A write of SQLite's is over when the writing process is gone.
      const settle = () => Effect.void
      yield* crashRounds({ store: "SQLite", rounds, env: { JOURNAL_DB: filename }, journal, settle, dir, bundle })
    }).pipe(Effect.scoped), scale(300_000, 1_800_000))

  it.live(`PostgreSQL: ${pgRounds} rounds of kills and resumes`, () =>
    Effect.gen(function*() {
      const { bundle, dir } = yield* setup
      const server = yield* postgres()
      const context = yield* Layer.build(Layer.provideMerge(Journal.layerSqlClient, pgClient(server.url)))
      const journal = Context.get(context, Journal.Journal)
      const sql = Context.get(context, SqlClient.SqlClient)
      // The server may still run a statement a killed process sent (and commit it) after the
      // process is gone: its connections' backends end once that is done.
      const settle = (pid: number) => {
        const open = sql<{ readonly n: number }>`
          SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE application_name = ${`agent-run-child-${pid}`}`
        return open.pipe(
          Effect.orDie,
          Effect.repeat({ until: (rows) => rows[0]?.n === 0, schedule: Schedule.spaced("5 millis") }),
          Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`the server kept process ${pid}'s connections`) }),
          Effect.orDie,
          Effect.asVoid
        )
      }
      yield* crashRounds({
        store: "PostgreSQL",
        rounds: pgRounds,
        env: { JOURNAL_URL: server.url },
        journal,
        settle,
        dir,
        bundle
      })
    }).pipe(Effect.scoped), scale(300_000, 1_800_000))
})
