/**
 * A typed final output asked of a provider with no structured-output mode of its own (Anthropic, the
 * providers through `@effect/ai`): a tool the model calls, alone, with the answer as its input.
 */
import type * as LanguageModel from "../LanguageModel.js"

/** The tool the model gives a typed final output with: its input schema, wrapped in `{ value }` unless an object. */
export const outputTool = (output: LanguageModel.OutputFormat) => {
  const schema = output.schema as { readonly type?: unknown } | undefined
  const wrapped = schema?.type !== "object"
  return {
    wrapped,
    name: output.name,
    description: "Give your final answer: call this tool, alone, once you are done, with the answer as its input.",
    parameters: wrapped
      ? { type: "object", properties: { value: output.schema }, required: ["value"], additionalProperties: false }
      : output.schema
  }
}

/** The final output a call of the output tool carries, as JSON text. */
export const outputText = (output: LanguageModel.OutputFormat, argumentsText: string): string => {
  if (!outputTool(output).wrapped) return argumentsText
  try {
    const value = (JSON.parse(argumentsText) as { value?: unknown }).value
    return JSON.stringify(value === undefined ? null : value)
  } catch {
    return argumentsText
  }
}
