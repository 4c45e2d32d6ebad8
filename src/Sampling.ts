/**
 * Asking the client's model (design: MCP): a tool served over MCP to a client that declared the
 * `sampling` capability can have that client's model answer a prompt (`sampling/createMessage`).
 * Optional, like `UserPrompt`: read it with `Effect.serviceOption(Sampling)`; elsewhere there is none.
 */
import { Context, Schema } from "effect"
import type { Effect } from "effect"

/** The client's model gave no answer (declined, failed, or the client went away). */
export class SamplingError extends Schema.TaggedError<SamplingError>("agent-tools/SamplingError")("SamplingError", {
  message: Schema.String
}) {}

/** The client's model: one prompt in, its text out. */
export class Sampling extends Context.Tag("agent-tools/Sampling")<Sampling, {
  readonly ask: (prompt: string, options?: { readonly maxTokens?: number | undefined }) => Effect.Effect<string, SamplingError>
}>() {}
