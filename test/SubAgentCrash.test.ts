/**
 * A tree of agent runs proven by killing the process (design: Agents that call agents, Durable runs): a root run
 * that calls a sub-agent twice at once, each of which calls another (3 levels, 5 runs), runs in a child process
 * (test/support/agentTreeChild.ts) killed with SIGKILL or SIGTERM at a random point, 1 to 3 times a round; a new process
 * with the same SQLite journal resumes the root, until one runs the tree to its end.
 *
 * Per round: the root ends with the output of an uncrashed tree, and every run of the tree ended in the journal.
 * A process asks the model only for turns the journal did not hold for that run when it started, at every
 * depth. An idempotent side effect (`charge`, per key) happens at most once; a non-idempotent one (`note`) at
 * least once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Journal } from "../src/index.js"
import { bundleChild, type Child, startBundled } from "./support/childProcess.js"
import { record, scale } from "./support/figures.js"

const rounds = Number(process.env.ROUNDS ?? "") || scale(20, 100)

/** The runs of the tree by what their model is asked as (`<agent>|<prompt>`), from the root's id. */
const runsOf = (root: string): ReadonlyMap<string, string> =>
  new Map([
    [`root|tree ${root}`, root],
    ["mid|part A", `${root}/m1`],
    ["mid|part B", `${root}/m2`],
    ["leaf|part A leaf", `${root}/m1/l1`],
    ["leaf|part B leaf", `${root}/m2/l1`]
  ])

/** What a charge left unfinished by a kill reads: its effect happened at most once. */
const unknown = "charge: the earlier attempt did not finish; its outcome is unknown"

/** An output with every charge's answer, an outcome or "unknown", made the same. */
const charged = (output: string) => output.replaceAll(unknown, "charge").replace(/\\*"charged-[^"\\]*\\*"/g, "charge")

/** `<words...> <pid>` lines of a log. */
const readLog = (file: string) =>
  readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((line) => {
    const words = line.split(" ")
    return { words: words.slice(0, -1), pid: Number(words[words.length - 1]) }
  })

/** The agent an ask's words name. */
const agentOf = (words: ReadonlyArray<string>) => words[0]!.split("|")[0]

/** How many turns each run of the tree had journaled (Infinity: it ended). */
const journaledTurns = (journal: Journal.Journal["Type"], runIds: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(runIds, (runId) => Effect.orDie(journal.run(runId))),
    (runs) =>
      new Map(runIds.map((runId, i) => {
        const run = runs[i]
        return [runId, run === undefined ? 0 : Journal.isOpen(run) ? run.turns.length : Infinity] as const
      }))
  )

/** What the last line `output <text>` of a process says. */
const outputOf = (child: Child) => child.lines.find((l) => l.startsWith("output "))?.slice("output ".length)

/**
 * A folder for the test, the child bundled into it, its SQLite journal (read here too), its logs by name, and how to
 * start a process of the child (TREE `tree` or `handoff`) on a run.
 */
const processesOf = (tree: "tree" | "handoff") =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "agent-tools-tree-crash-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const bundle = yield* Effect.promise(() => bundleChild("test/support/agentTreeChild.ts", dir))
    const filename = join(dir, "journal.sqlite")
    const journal = Context.get(yield* Layer.build(Journal.layerSql({ filename })), Journal.Journal)
    const start = (
      runId: string,
      mode: "run" | "resume",
      files: { asks: string; effects: string },
      extra: Record<string, string> = {}
    ) =>
      startBundled(bundle, {
        TREE: tree,
        JOURNAL_DB: filename,
        RUN_ID: runId,
        MODE: mode,
        ASKS_FILE: files.asks,
        EFFECTS_FILE: files.effects,
        ...extra
      })
    const logs = (name: string) => {
      const files = { asks: join(dir, `${name}.asks`), effects: join(dir, `${name}.effects`) }
      writeFileSync(files.asks, "")
      writeFileSync(files.effects, "")
      return files
    }
    return { journal, logs, start }
  })

describe("a tree of agent runs under SIGKILL", () => {
  it.live(`SQLite: ${rounds} rounds of kills and resumes of a 3-level tree`, () =>
    Effect.gen(function*() {
      const { journal, logs, start } = yield* processesOf("tree")

      // The uncrashed tree: its output (the root's id taken out), its asks, how long it takes once ready.
      const referenceFiles = logs("reference")
      const reference = start("reference", "run", referenceFiles)
      yield* Effect.promise(() => reference.waitFor("ready", 60_000))
      const readyAt = performance.now()
      yield* Effect.promise(() => reference.waitFor("output ", 60_000))
      const span = performance.now() - readyAt
      assert.strictEqual(yield* Effect.promise(() => reference.exited), 0)
      const expected = outputOf(reference)!
      const referenceAsks = readLog(referenceFiles.asks).length
      assert.strictEqual(referenceAsks, 2 + 2 * 2 + 2 * 3, "the uncrashed tree asks each turn of each run once")

      let processes = 0
      let kills = 0
      let asked = 0
      let distinct = 0
      let charges = 0
      let notes = 0
      let unknowns = 0
      let terms = 0
      const startedAt = performance.now()
      for (let round = 1; round <= rounds; round++) {
        const root = `round-${round}`
        const runs = runsOf(root)
        const runIds = [...runs.values()]
        const files = logs(root)
        const killsHere = 1 + Math.floor(Math.random() * 3)
        // What the journal held for each run as each process started, by pid.
        const before = new Map<number, ReadonlyMap<string, number>>()
        let found = yield* journaledTurns(journal, runIds)
        let output: string | undefined
        for (let p = 0; p <= killsHere; p++) {
          const child = start(root, p === 0 ? "run" : "resume", files)
          before.set(child.process.pid!, found)
          processes++
          assert.isDefined(yield* Effect.promise(() => child.waitFor("ready", 60_000)), `${root}: process ${p + 1} opened the journal`)
          if (p < killsHere) {
            yield* Effect.sleep(Math.floor(Math.random() * span * 1.2))
            // SIGKILL, or SIGTERM (the runtime interrupts the tree and exits): either way the next process resumes it.
            const signal = Math.random() < 0.5 ? "SIGKILL" : "SIGTERM"
            if (signal === "SIGTERM") terms++
            child.process.kill(signal)
            yield* Effect.promise(() => child.exited)
            found = yield* journaledTurns(journal, runIds)
            kills++
          } else {
            yield* Effect.promise(() => child.waitFor("output ", 60_000))
            const code = yield* Effect.promise(() => child.exited)
            output = outputOf(child)
            assert.isDefined(output, `${root}: the last process ran the tree to its end (exit ${code}; ${child.lines.slice(-8).join(" | ")})`)
          }
        }
        const where = `${root} (${killsHere} kills)`
        // The output of an uncrashed tree, but that a charge left unfinished by a kill reads "outcome unknown".
        assert.strictEqual(charged(output!), charged(expected.replaceAll("reference", root)), `${where}: the output of an uncrashed tree`)
        const ended = yield* journaledTurns(journal, runIds)
        for (const runId of runIds) assert.strictEqual(ended.get(runId), Infinity, `${where}: ${runId} ended in the journal`)

        // No journaled turn asked again, at any depth.
        const asks = readLog(files.asks)
        for (const { pid, words } of asks) {
          const runId = runs.get(words.slice(0, -1).join(" "))
          assert.isDefined(runId, `${where}: an ask of an unknown run: ${words.join(" ")}`)
          const step = Number(words.at(-1))
          assert.isAbove(step, before.get(pid)!.get(runId!)!, `${where}: ${runId} turn ${step} asked again though journaled`)
        }
        asked += asks.length
        distinct += new Set(asks.map((a) => a.words.join(" "))).size
        assert.strictEqual(new Set(asks.map((a) => a.words.join(" "))).size, referenceAsks, `${where}: every turn was asked`)

        // Side effects: an idempotent one at most once per key, a non-idempotent one at least once.
        const effects = readLog(files.effects).map(({ words }) => ({ tool: words[0]!, key: words.slice(1).join(" ") }))
        for (const key of ["part A leaf", "part B leaf"]) {
          const done = effects.filter((e) => e.tool === "charge" && e.key === key).length
          assert.isAtMost(done, 1, `${where}: charge ${key} had ${done} side effects`)
          // A charge with an outcome had its effect; one that reads "outcome unknown" was left unfinished by a kill.
          if (output!.includes(`leaf(${key}): c1=${unknown}`)) unknowns++
          else assert.strictEqual(done, 1, `${where}: charge ${key} has an outcome, so its effect happened once`)
          assert.isAtLeast(effects.filter((e) => e.tool === "note" && e.key === key).length, 1, `${where}: note ${key} ran`)
        }
        charges += effects.filter((e) => e.tool === "charge").length
        notes += effects.filter((e) => e.tool === "note").length
      }
      const millis = performance.now() - startedAt
      const summary = `${rounds} rounds in ${(millis / 1000).toFixed(1)} s (an uncrashed tree: ${span.toFixed(0)} ms once ready): ` +
        `${processes} processes, ${kills} killed (${terms} by SIGTERM, the rest SIGKILL); model turns asked ${asked}, distinct ${distinct} ` +
        `(asked again, the reply lost with its process before the journal held it: ${asked - distinct}); ` +
        `charge (idempotent) side effects ${charges} of ${2 * rounds} keys (${unknowns} read "outcome unknown"); note side effects ${notes} of ${2 * rounds} calls`
      console.log(`agent tree crash test: ${summary}`)
      record({
        suite: "agent crash (SIGKILL, a 3-level tree)",
        measure: "rounds of kills and resumes of a tree of 5 runs",
        value: summary,
        expected: "every tree completes; no journaled turn asked again; idempotent side effects at most once"
      })
    }).pipe(Effect.scoped), scale(300_000, 1_800_000))

  it.live("a handoff killed at each turn: the resume goes on as the agent that held the run, with its tools and the conversation so far", () =>
    Effect.gen(function*() {
      const { journal, logs, start } = yield* processesOf("handoff")
      const referenceFiles = logs("reference")
      const reference = start("reference", "run", referenceFiles)
      yield* Effect.promise(() => reference.waitFor("output ", 60_000))
      const expected = outputOf(reference)!
      // billing's answer reads front's note: the conversation went over with the run.
      assert.include(expected, `n1="noted-handoff reference"`)
      assert.deepStrictEqual(readLog(referenceFiles.asks).map((a) => a.words.join(" ")), [
        "front|handoff reference 1",
        "front|handoff reference 2",
        "billing|handoff reference 3",
        "billing|handoff reference 4"
      ])

      const figures: Array<string> = []
      // Killed once its k-th turn was asked: before the transfer, as front asks for it, once billing holds the run.
      for (const [k, signal] of [[1, "SIGKILL"], [2, "SIGKILL"], [3, "SIGKILL"], [3, "SIGTERM"]] as const) {
        const runId = `killed-at-${k}-${signal}`
        const files = logs(runId)
        const first = start(runId, "run", files)
        yield* Effect.sync(() => readLog(files.asks).length).pipe(
          Effect.repeat({ until: (asks) => asks >= k, schedule: Schedule.spaced("2 millis") }),
          Effect.timeout("60 seconds")
        )
        first.process.kill(signal)
        yield* Effect.promise(() => first.exited)
        const held = (yield* journaledTurns(journal, [runId])).get(runId)!
        const second = start(runId, "resume", files)
        yield* Effect.promise(() => second.waitFor("output ", 60_000))
        const output = outputOf(second)
        const where = `killed by ${signal} after ask ${k} (${held} turns journaled)`
        assert.isDefined(output, `${where}: the resume ran the run to its end (${second.lines.slice(-8).join(" | ")})`)
        assert.strictEqual(charged(output!), charged(expected.replaceAll("reference", runId)), `${where}: the output of an uncrashed run`)

        const asks = readLog(files.asks)
        const resumed = asks.filter((a) => a.pid === second.process.pid).map((a) => a.words)
        // No journaled turn asked again; each turn asked of the agent whose it is (front's only before the transfer).
        for (const words of resumed) {
          const step = Number(words.at(-1))
          assert.isAbove(step, held, `${where}: turn ${step} asked again though journaled`)
          assert.strictEqual(agentOf(words), step <= 2 ? "front" : "billing", `${where}: turn ${step}`)
        }
        assert.strictEqual(new Set(asks.map((a) => a.words.join(" "))).size, 4, `${where}: every turn was asked`)
        // Once billing was asked, the transfer was journaled: the new process is billing's from its first turn.
        if (k === 3) assert.isAtLeast(held, 2, `${where}: the transfer was journaled before billing was asked`)
        const effects = readLog(files.effects).map(({ words }) => words[0])
        assert.isAtMost(effects.filter((tool) => tool === "charge").length, 1, `${where}: charge (idempotent) at most once`)
        assert.isAtLeast(effects.filter((tool) => tool === "note").length, 1, `${where}: note ran`)
        figures.push(`${signal} after ask ${k}: ${held} turns journaled, the resume asked ${resumed.map((words) => `${agentOf(words)} ${words.at(-1)}`).join(", ") || "nothing"}`)
      }
      // Killed inside billing's charge: its effect happened, its outcome not journaled (the charge holds 5 s there).
      {
        const runId = "killed-in-charge"
        const files = logs(runId)
        const first = start(runId, "run", files, { HOLD_AFTER_CHARGE_MS: "5000" })
        yield* Effect.sync(() => readLog(files.effects).some(({ words }) => words[0] === "charge")).pipe(
          Effect.repeat({ until: (charged) => charged, schedule: Schedule.spaced("2 millis") }),
          Effect.timeout("60 seconds")
        )
        first.process.kill("SIGKILL")
        yield* Effect.promise(() => first.exited)
        const run = yield* Effect.orDie(journal.run(runId))
        const call = run !== undefined && Journal.isOpen(run) ? [...run.calls.values()].find((c) => c.name === "charge") : undefined
        assert.isDefined(call, "the charge was journaled as started")
        assert.isUndefined(call!.result, "the kill landed inside the charge: journaled as started, no outcome")
        const second = start(runId, "resume", files)
        yield* Effect.promise(() => second.waitFor("output ", 60_000))
        const output = outputOf(second)
        assert.isDefined(output, "the resume ran the run to its end")
        assert.strictEqual(charged(output!), charged(expected.replaceAll("reference", runId)), "the output of an uncrashed run")
        assert.include(output!, unknown, "the resume reads the charge's outcome as unknown: it did not run it again")
        const effects = readLog(files.effects).map(({ words }) => words[0])
        assert.strictEqual(effects.filter((tool) => tool === "charge").length, 1, "charge (idempotent) once")
        figures.push("SIGKILL inside the charge: its effect once, the resume read its outcome as unknown")
      }
      console.log(`handoff crash test: ${figures.join("; ")}`)
    }).pipe(Effect.scoped), 120_000)
})
