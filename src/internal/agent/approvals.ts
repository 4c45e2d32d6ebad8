/**
 * Approvals of a journaled run's calls (design: Durable runs): a decision counts only for the call id, the input
 * and the definition of the tool it was given for, before its expiry; with none, a person at hand
 * decides now, or the call waits and the run suspends after its turn.
 */
import { Duration, Effect, Either, Option } from "effect"
import { createHash } from "node:crypto"
import type * as LanguageModel from "../../LanguageModel.js"
import type * as Tool from "../../Tool.js"
import { Denied, ToolResult } from "../../ToolResult.js"
import { UserPrompt } from "../../UserPrompt.js"
import * as Door from "../call/door.js"
import { askApproval } from "../hooks/shipped.js"
import * as Json from "../util/json.js"
import { journalOutcome, runJournaled } from "./journaledCall.js"
import { awaitingApproval, type Run } from "./run.js"

/**
 * The approval of a call (design: Durable runs). A decision counts only if it was given for this
 * call id, this input and this definition of the tool, before its expiry: approved, the call runs;
 * denied, the model reads the denial. With no decision, a person at hand (`UserPrompt`) decides now;
 * else the call waits and the run suspends after its turn.
 */
export const approve = (
  run: Run,
  admitted: Door.Admitted,
  call: LanguageModel.ToolCall,
  now: number,
  deadlineAt: number
): Door.Started => {
  const { input, inputKey, tool } = admitted
  const fingerprint = fingerprintOf(tool)
  const asked = run.journaled!.approvals.get(call.id)
  const bound = asked !== undefined && asked.toolName === tool.name && asked.inputKey === inputKey &&
    asked.fingerprint === fingerprint
  const deny = (reason: string) =>
    journalOutcome(run, call, ToolResult.failure(new Denied({ toolName: tool.name, reason })), undefined)
  if (bound && asked.decision !== "pending") {
    if (now >= asked.expiresAt) return deny("its approval expired before the run went on; it did not run")
    if (asked.decision === "denied") {
      return deny(`the user denied this call${asked.reason === undefined ? "" : `: ${asked.reason}`}; it did not run`)
    }
    return runJournaled(run, admitted, call, deadlineAt, true, true)
  }
  if (bound && now >= asked.expiresAt) {
    return deny("no one decided on this call before its approval expired; it did not run")
  }
  const wait = Effect.sync(() => {
    run.pending.push({
      toolCallId: call.id,
      toolName: tool.name,
      input: Json.canonical(input),
      inputKey,
      fingerprint,
      expiresAt: bound ? asked.expiresAt : now + Duration.toMillis(run.agent.approvalExpiry)
    })
    return awaitingApproval
  })
  return Effect.flatMap(Effect.serviceOption(UserPrompt), (prompt) => {
    if (Option.isNone(prompt)) return wait
    return askApproval(prompt.value, tool.name, input).pipe(
      Effect.flatMap((yes) =>
        yes
          ? Door.awaitStarted(runJournaled(run, admitted, call, deadlineAt, true, true))
          : deny("the user did not approve this call; it did not run")
      ),
      // Nobody answered there: the decision can still come through the journal.
      Effect.catchAll(() => wait)
    )
  })
}

const fingerprints = new WeakMap<Tool.Any, string>()

/** A digest of what a tool is to the model and to its caller: name, description, schemas (design: Durable runs). */
const fingerprintOf = (tool: Tool.Any): string => {
  let known = fingerprints.get(tool)
  if (known === undefined) {
    const schemas = Either.getOrUndefined(tool.schemas)
    const definition = { name: tool.name, description: tool.description, schemas: schemas ?? null }
    known = createHash("sha256").update(Json.canonical(definition)).digest("hex")
    fingerprints.set(tool, known)
  }
  return known
}
