/**
 * A call's arguments checked and decoded (design: Input), stage `admit`'s part: JSON text (perhaps parsed
 * already: `ParsedArguments`) or a value, held to the size, refused-key and depth limits, an object at
 * its root, then decoded strictly by the tool's input Schema.
 */
import { Either } from "effect"
import { formatIssues } from "../util/issues.js"
import * as Json from "../util/json.js"
import type * as Tool from "../../Tool.js"
import { type Compiled, onlyKeysIn } from "./compiled.js"
import type { Config } from "./config.js"
import { errorMessage, tooDeep } from "./result.js"

/**
 * A call's arguments as JSON text, with the value `Json.parse` made of it (refused keys checked), for a
 * caller that parsed them already (`Agent`'s records show them): the pipeline checks the text's size
 * and decodes the value, without parsing the text again.
 */
export class ParsedArguments {
  constructor(readonly text: string, readonly value: unknown) {}
}

/** The decoded input, or why it is refused (`InvalidInput`'s reason). */
export const decodeArgs = (
  tool: Tool.Any,
  compiled: Compiled,
  args: unknown,
  config: Config
): { readonly value: unknown } | string => {
  let value: unknown
  // The JSON text's length: a text of n characters nests at most n / 2 levels deep.
  let length = 0
  // JSON text (perhaps parsed already): only enumerable string keys, sized by its text.
  const fromText = typeof args === "string" || args instanceof ParsedArguments
  if (fromText) {
    const text = typeof args === "string" ? args : args.text
    length = text.length
    // A character is at least one UTF-8 byte and at most three (surrogate pairs: four per two).
    if (text.length > config.maxPayloadBytes ||
      (text.length * 3 > config.maxPayloadBytes && Buffer.byteLength(text, "utf8") > config.maxPayloadBytes)) {
      return `the arguments exceed ${config.maxPayloadBytes} bytes`
    }
    if (typeof args === "string") {
      const parsed = Json.parse(args)
      if ("problem" in parsed) return parsed.problem
      value = parsed.value
    } else {
      value = args.value
    }
  } else {
    let text: string | undefined
    try {
      text = JSON.stringify(args)
    } catch (error) {
      // A value nested past the stack (100,000 deep) says so, as an output does, not the engine's words.
      return tooDeep(args, config) ?? `the arguments are not JSON (${errorMessage(error)})`
    }
    // A character is at most three UTF-8 bytes: only a long text is measured.
    if (text !== undefined && text.length * 3 > config.maxPayloadBytes && Buffer.byteLength(text, "utf8") > config.maxPayloadBytes) {
      return `the arguments exceed ${config.maxPayloadBytes} bytes`
    }
    length = text?.length ?? 0
    const refused = Json.refusedKeyIn(args)
    if (refused !== undefined) return refused
    value = args
  }
  // Arguments are a JSON object (design: What the model sees; the parameters' type is object), whatever the input Schema says.
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return `(root): Expected an object, actual ${Array.isArray(value) ? "an array" : JSON.stringify(value)}`
  }
  // Nothing past here walks a value deeper than the limit (a Schema of `unknown` would take it; keying it,
  // hooks and journals would exhaust the stack): refused whatever the input Schema says.
  if (length > 2 * config.maxDepth) {
    const deep = tooDeep(value, config)
    if (deep !== undefined) return deep
  }
  if (compiled.emptyInput) {
    const keys = Object.keys(value)
    if (keys.length > 0) return keys.map((key) => `${key}: is unexpected`).join("; ")
  }
  try {
    // A flat input's keys are checked here, far cheaper than by Effect; with none unexpected, the same decode.
    const flat = compiled.flat
    const decoded = flat !== undefined && onlyKeysIn(value, flat.keys, fromText)
      ? flat.decode(value)
      : compiled.decode(value)
    if (Either.isRight(decoded)) return { value: decoded.right }
    return formatIssues(decoded.left)
  } catch (error) {
    // A recursive Schema or the issue formatter on a deeply nested value can exhaust the stack.
    return tooDeep(value, config) ?? `the arguments could not be checked (${errorMessage(error)})`
  }
}
