/**
 * Guardrails (design: Hooks): checks that pass or trip. An agent's input guardrails check its prompt before its
 * first model turn (or beside it, `concurrent`: the turn's answer and calls wait for them); its output guardrails
 * check its final answer before the run returns it. A trip ends the run with `GuardrailTripped`, naming the
 * guardrail and its reason; an output guardrail made with `onTrip: "retry"` gives the model the reason and lets it
 * answer again (within `maxSteps`). A tool's guardrails are a tool hook (`Guardrail.tool`): a tripped argument
 * check keeps the handler from running, a tripped result check keeps the model from reading the result; the model
 * reads the reason as the call's error. A check that fails or dies trips (fail closed).
 */
import { Cause, Effect, Schema } from "effect"
import type { ToolCall, ToolHook } from "./internal/hooks/tool.js"
import { Denied, ToolResult } from "./ToolResult.js"

/** What a check says: pass, or trip with a reason. */
export type Verdict = { readonly _tag: "Pass" } | { readonly _tag: "Trip"; readonly reason: string }

/** The verdict of a check that passes. */
export const pass: Verdict = { _tag: "Pass" }

/** The verdict of a check that trips, saying why. */
export const trip = (reason: string): Verdict => ({ _tag: "Trip", reason })

/** A guardrail of an agent: its name (in errors and spans), its check of a text (the prompt, or the final answer). */
export interface Guardrail {
  readonly name: string
  readonly check: (text: string) => Effect.Effect<Verdict, unknown>
  /** An input guardrail's: `"before"` (default) the first model turn, or `"concurrent"` with it. */
  readonly mode: "before" | "concurrent"
  /** An output guardrail's: `"fail"` (default) ends the run; `"retry"` gives the model the reason to answer again. */
  readonly onTrip: "fail" | "retry"
}

/** Makes a guardrail named `name` that checks a text with `check`. */
export const make = (
  name: string,
  check: (text: string) => Effect.Effect<Verdict, unknown>,
  options?: { readonly mode?: "before" | "concurrent" | undefined; readonly onTrip?: "fail" | "retry" | undefined }
): Guardrail => ({ name, check, mode: options?.mode ?? "before", onTrip: options?.onTrip ?? "fail" })

/** An agent's guardrails: of its prompt (`input`) and of its final answer (`output`). */
export interface Guardrails {
  readonly input?: ReadonlyArray<Guardrail> | undefined
  readonly output?: ReadonlyArray<Guardrail> | undefined
}

/** A guardrail tripped: the run ended (design: Hooks). `stage` says what it checked. */
export class GuardrailTripped extends Schema.TaggedError<GuardrailTripped>("agent-tools/GuardrailTripped")(
  "GuardrailTripped",
  {
    guardrail: Schema.String,
    stage: Schema.Literal("input", "output"),
    reason: Schema.String
  }
) {
  override get message(): string {
    return `the ${this.stage} guardrail ${this.guardrail} tripped: ${this.reason}`
  }
}

/** The verdict of `guardrail` on `text`: a check that fails or dies trips, saying so (fail closed). */
export const verdictOf = (guardrail: Guardrail, text: string): Effect.Effect<Verdict> =>
  Effect.catchAllCause(
    Effect.suspend(() => guardrail.check(text)),
    (cause) => Effect.succeed(failed(cause))
  )

/** The trip of a check that failed or died, in its error's words. */
const failed = (cause: Cause.Cause<unknown>): Verdict => {
  const error = Cause.squash(cause)
  return trip(`the check failed: ${error instanceof Error ? error.message : String(error)}`)
}

/** Checks of a tool's calls: of the decoded arguments before the handler runs, of the result before the model reads it. */
export interface ToolGuardrail {
  readonly name: string
  /** The tools it checks, by name. Default: every tool. */
  readonly tools?: ReadonlyArray<string> | undefined
  readonly input?: ((call: ToolCall) => Effect.Effect<Verdict, unknown>) | undefined
  readonly output?: ((call: ToolCall, result: ToolResult) => Effect.Effect<Verdict, unknown>) | undefined
}

/**
 * A tool guardrail as a tool hook (`Hooks.layer({ tool: [Guardrail.tool(...)] })`): a trip is a `Denied` result
 * the model reads (`<guardrail> tripped: <reason>`), and the handler does not run after a tripped argument check.
 */
export const tool = (guardrail: ToolGuardrail): ToolHook => {
  const names = guardrail.tools === undefined ? undefined : new Set(guardrail.tools)
  const denied = (call: ToolCall, verdict: Verdict) =>
    verdict._tag === "Pass"
      ? undefined
      : ToolResult.failure(new Denied({ toolName: call.tool.name, reason: `guardrail ${guardrail.name} tripped: ${verdict.reason}` }))
  const checked = (check: Effect.Effect<Verdict, unknown>) =>
    Effect.catchAllCause(check, (cause) => Effect.succeed(failed(cause)))
  return (call, proceed) => {
    if (names !== undefined && !names.has(call.tool.name)) return proceed
    const after = guardrail.output === undefined
      ? proceed
      : Effect.flatMap(proceed, (result) =>
        Effect.map(checked(Effect.suspend(() => guardrail.output!(call, result))), (verdict) => denied(call, verdict) ?? result))
    if (guardrail.input === undefined) return after
    return Effect.flatMap(checked(Effect.suspend(() => guardrail.input!(call))), (verdict) => {
      const refused = denied(call, verdict)
      return refused === undefined ? after : Effect.succeed(refused)
    })
  }
}
