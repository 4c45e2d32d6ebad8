/**
 * An agent's guardrails in its run (`Guardrail.ts`): its input guardrails on the prompt, before the first model turn
 * or beside it; its output guardrails on the final answer. Each check is a `guardrail <name>` span when tracing.
 */
import { Effect } from "effect"
import { type Guardrail, GuardrailTripped, type Verdict, verdictOf } from "../../Guardrail.js"
import type * as LanguageModel from "../../LanguageModel.js"
import type { Run } from "./run.js"

/** The verdicts of `guardrails` on `text`, all at once, in their order. */
const verdicts = (run: Run, guardrails: ReadonlyArray<Guardrail>, text: string, stage: "input" | "output") =>
  Effect.forEach(guardrails, (guardrail) => {
    const verdict = verdictOf(guardrail, text)
    if (!run.tracing) return Effect.map(verdict, (v) => [guardrail, v] as const)
    return Effect.withSpan(
      Effect.tap(verdict, (v) => Effect.annotateCurrentSpan({ "agent_tools.guardrail.tripped": v._tag === "Trip" })),
      `guardrail ${guardrail.name}`,
      {
        attributes: { "agent_tools.guardrail.name": guardrail.name, "agent_tools.guardrail.stage": stage },
        captureStackTrace: false
      }
    ).pipe(Effect.map((v) => [guardrail, v] as const))
  }, { concurrency: "unbounded" })

/** The first trip among `results`, if any. */
const tripped = (results: ReadonlyArray<readonly [Guardrail, Verdict]>) =>
  results.find((result): result is readonly [Guardrail, Verdict & { _tag: "Trip" }] => result[1]._tag === "Trip")

/** Fails with the first trip of `guardrails` on `text`. */
const check = (run: Run, guardrails: ReadonlyArray<Guardrail>, text: string, stage: "input" | "output") =>
  Effect.flatMap(verdicts(run, guardrails, text, stage), (results) => {
    const trip = tripped(results)
    return trip === undefined
      ? Effect.void
      : Effect.fail(new GuardrailTripped({ guardrail: trip[0].name, stage, reason: trip[1].reason }))
  })

/**
 * Checks the prompt with the input guardrails that run before the first turn (failing on a trip), and gives the
 * check of those that run beside it, to run with it.
 */
export const input = (run: Run, prompt: string): Effect.Effect<Effect.Effect<void, GuardrailTripped> | undefined, GuardrailTripped> => {
  const all = run.agent.guardrails?.input ?? []
  const before = all.filter((g) => g.mode === "before")
  const beside = all.filter((g) => g.mode === "concurrent")
  const later = beside.length === 0 ? undefined : check(run, beside, prompt, "input")
  return before.length === 0 ? Effect.succeed(later) : Effect.as(check(run, before, prompt, "input"), later)
}

/**
 * Checks the final answer with the output guardrails of the agent that holds the run: true when all pass. A trip
 * of one made with `onTrip: "retry"` gives the model the answer's reason (after its answer, `said`): false; any
 * other trip fails.
 */
export const output = (
  run: Run,
  said: LanguageModel.Message | undefined,
  text: string
): Effect.Effect<boolean, GuardrailTripped> =>
  Effect.flatMap(verdicts(run, run.agent.guardrails?.output ?? [], text, "output"), (results) => {
    const trip = tripped(results)
    if (trip === undefined) return Effect.succeed(true)
    const [guardrail, { reason }] = trip
    if (guardrail.onTrip === "fail") return Effect.fail(new GuardrailTripped({ guardrail: guardrail.name, stage: "output", reason }))
    const retry: LanguageModel.Message = {
      _tag: "UserMessage",
      text: `Your answer was refused by the guardrail ${guardrail.name}: ${reason}. Answer again.`
    }
    run.messages = said === undefined ? [...run.messages, retry] : [...run.messages, said, retry]
    return Effect.succeed(false)
  })
