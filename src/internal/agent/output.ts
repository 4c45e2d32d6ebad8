/**
 * A typed final output (design: The model side): the format asked of the model (the Schema's JSON
 * Schema) and the decoder of its answer, whose issues read as the pipeline's invalid-input texts.
 */
import { Effect, Either, Schema } from "effect"
import * as Tool from "../../Tool.js"
import { formatIssues } from "../util/issues.js"
import * as Json from "../util/json.js"
import type { OutputSpec } from "./types.js"

/** The name of the typed output as the model is asked for it (a response format's name, or a tool's). */
export const outputName = "final_answer"

/** What the model is told when its answer did not decode: the issues, and what to do. */
export const retryText = (errors: string): string =>
  `Your final answer does not match the required output: ${errors}. ` +
  `Give the whole answer again, corrected (through ${outputName} if it is offered as a tool).`

/**
 * The spec of an output Schema. Its JSON Schema is made as a tool's output's is (one place turns a
 * Schema into what a model reads): a Schema that JSON Schema cannot express throws, naming the rule.
 */
export const outputSpec = (schema: Schema.Schema<any, any, never>, retries: number): OutputSpec => {
  const carrier = Tool.make(outputName, {
    description: "The agent's typed final output.",
    input: {},
    output: schema,
    timeout: "1 second"
  }, () => Effect.void)
  const decode = Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })
  return {
    format: { name: outputName, schema: Tool.outputJsonSchema(carrier) },
    retries,
    decode: (text) => {
      const parsed = Json.parse(text.trim())
      if (!("value" in parsed)) return Either.left(`the answer is not JSON (${parsed.problem})`)
      return Either.mapLeft(decode(parsed.value), (error) => formatIssues(error.issue))
    }
  }
}
