/**
 * Opening a run (design: Durable runs): a new one, journaled from its start when there is a journal; one the
 * journal holds, to go on with; an ended one, which is its stored result.
 */
import { Effect, Schema } from "effect"
import { Ids } from "../../Ids.js"
import * as Journal from "../../Journal.js"
import type * as LanguageModel from "../../LanguageModel.js"
import { type Agent, type HostOptions, RunIdInUse, RunResult, type Start, UnknownRun } from "./types.js"

/** A journaled run's journal, what it held when the run (re)started, and how to treat it. */
export interface Journaled {
  readonly journal: Journal.Journal["Type"]
  readonly turns: ReadonlyArray<LanguageModel.ModelTurn>
  readonly calls: ReadonlyMap<string, Journal.JournaledCall>
  readonly approvals: ReadonlyMap<string, Journal.Approval>
  readonly rerunUnfinished: boolean
  /** The host ends the run in the journal (with its own final record), not the loop. */
  readonly hostEnds: boolean
}

/** A run ready to go: its id and prompt, its journal if it has one, and whether it goes on from there. */
export interface Opened {
  readonly runId: string
  readonly prompt: string
  readonly journaled: Journaled | undefined
  readonly resumed: boolean
}

export const RunResultJson = Schema.parseJson(RunResult)

/** Opens the run `start` names (design: Durable runs): a new one, or one the journal holds; an ended one is its result. */
export const open: (
  agent: Agent<any, any>,
  start: Start,
  journal: Journal.Journal["Type"]
) => Effect.Effect<Opened | { readonly ended: RunResult }, UnknownRun | RunIdInUse> = Effect.fnUntraced(function*(
  agent: Agent<any, any>,
  start: Start,
  journal: Journal.Journal["Type"]
) {
  const from = (known: Journal.OpenRun, host: HostOptions | undefined): Opened => ({
    runId: known.runId,
    prompt: known.prompt,
    journaled: {
      journal,
      turns: known.turns,
      calls: known.calls,
      approvals: known.approvals,
      rerunUnfinished: host?.rerunUnfinished ?? false,
      hostEnds: host !== undefined
    },
    resumed: known.turns.length > 0 || known.status === "suspended"
  })
  if ("resume" in start) {
    const known = yield* Effect.orDie(journal.run(start.resume))
    if (known === undefined) return yield* new UnknownRun({ runId: start.resume })
    if (!Journal.isOpen(known)) {
      if (known.result === undefined) return yield* new UnknownRun({ runId: start.resume })
      return { ended: yield* Effect.orDie(Schema.decode(RunResultJson)(known.result)) }
    }
    if (known.status === "suspended") yield* journal.resumed(known.runId)
    return from(known, undefined)
  }
  if (start.host !== undefined) {
    // The host wrote the run first (a platform task), and may be taking it back after a restart.
    const known = start.host.known ?? (yield* Effect.orDie(journal.run(start.host.runId)))
    if (known === undefined || !Journal.isOpen(known)) {
      return yield* Effect.dieMessage(`the journal has no open run ${start.host.runId} for its host`)
    }
    return from(known, start.host)
  }
  const runId = start.runId ?? (yield* Ids).make("run")
  if (start.runId !== undefined && (yield* Effect.orDie(journal.run(runId))) !== undefined) {
    return yield* new RunIdInUse({ runId })
  }
  yield* journal.started({ runId, kind: "run", agentId: agent.name, processId: "", prompt: start.prompt, tools: [] })
  return {
    runId,
    prompt: start.prompt,
    journaled: {
      journal,
      turns: [],
      calls: new Map(),
      approvals: new Map(),
      rerunUnfinished: false,
      hostEnds: false
    },
    resumed: false
  }
})
