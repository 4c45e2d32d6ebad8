/** JSON at the wire boundary: safe parsing of untrusted text and checks that a value is plain JSON. */

const forbiddenKeys = new Set(["__proto__", "constructor"])

/** The reason a JSON key is refused, or undefined. Such keys are how prototype pollution starts. */
const refuseKey = (key: string): string | undefined =>
  forbiddenKeys.has(key) ? `the key ${JSON.stringify(key)} is not allowed` : undefined

class RefusedKey {
  constructor(readonly reason: string) {}
}

/**
 * Parses untrusted JSON text, refusing `__proto__` and `constructor` keys at any depth
 * (also when spelled with \u escapes). Returns the value, or the reason it was refused.
 */
import { clip } from "./text.js"
export const parse = (text: string): { readonly value: unknown } | { readonly problem: string } => {
  try {
    // Fast path: none of the refused keys can be present, escaped or not.
    if (text.indexOf("__proto__") === -1 && text.indexOf("constructor") === -1 && text.indexOf("\\u") === -1) {
      return { value: JSON.parse(text) }
    }
    return {
      value: JSON.parse(text, function(key, value) {
        const reason = refuseKey(key)
        // The reviver also sees array indices and the root's "" key; only object keys matter.
        if (reason !== undefined && !Array.isArray(this)) throw new RefusedKey(reason)
        return value
      })
    }
  } catch (error) {
    if (error instanceof RefusedKey) return { problem: error.reason }
    return { problem: `not valid JSON (${error instanceof Error ? error.message : String(error)})` }
  }
}

/** The first refused key found in an already-parsed value, as a reason, or undefined. */
export const refusedKeyIn = (value: unknown): string | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  if (Array.isArray(value)) {
    for (const item of value) {
      const reason = refusedKeyIn(item)
      if (reason !== undefined) return reason
    }
    return undefined
  }
  for (const key of Object.keys(value)) {
    const reason = refuseKey(key) ?? refusedKeyIn((value as Record<string, unknown>)[key])
    if (reason !== undefined) return reason
  }
  return undefined
}

/** How deep and how large a value may be (design: Hostile clients): past either, it is refused, never walked further. */
export interface Limits {
  /** Nesting of arrays and objects; the value itself is depth 0. */
  readonly maxDepth: number
  /** UTF-8 bytes of its JSON text. */
  readonly maxBytes: number
}

/** The default `Limits`: 128 levels, 1 MiB (Invocation's argument limit). */
export const defaultLimits: Limits = { maxDepth: 128, maxBytes: 1024 * 1024 }

/**
 * Why `value` is not plain JSON within `limits` (naming where), or undefined when it is. Plain JSON:
 * null, booleans, finite numbers, strings, arrays and plain objects of those, without cycles. An
 * `undefined` property is allowed (JSON leaves it out); an `undefined` array item is not. The walk
 * never goes deeper than `limits.maxDepth`, so no value can exhaust the stack.
 */
export const problemIn = (value: unknown, limits: Limits = defaultLimits): string | undefined => {
  const walk: Walk = { limits, upperBytes: 0, lowerBytes: 0 }
  const problem = check(value, "", undefined, 0, walk)
  if (problem !== undefined) return problem
  // The walk's count is an upper bound (every character escaped); only a large value pays for the exact text.
  if (walk.upperBytes > limits.maxBytes && Buffer.byteLength(JSON.stringify(value) ?? "", "utf8") > limits.maxBytes) {
    return exceeds(walk)
  }
  return undefined
}

/**
 * True when JSON text nests arrays or objects deeper than `maxDepth` (`"[]"` is one level), decided
 * in one pass over its characters, before anything is built of it (design: Hostile clients): a
 * parser given a value nested a million deep holds the event loop for a second building it. Text
 * that is not JSON is scanned as if it were; a text of `2 * maxDepth` characters or fewer cannot be
 * deeper and is not scanned.
 */
export const textDeeperThan = (text: string, maxDepth: number): boolean => {
  if (text.length <= 2 * maxDepth) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // a backslash: the next character is escaped
      else if (c === 34) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 || c === 123) {
      if (++depth > maxDepth) return true
    } else if (c === 93 || c === 125) {
      depth--
    }
  }
  return false
}

/**
 * True when the UTF-8 `bytes` of a JSON text nest deeper than `maxDepth` (strings skipped), in one
 * pass: `textDeeperThan` (the same scan, kept beside it) before the bytes are decoded. Every byte of a multi-byte character is
 * over 0x7f, so none is taken for a bracket, a quote or a backslash.
 */
export const bytesDeeperThan = (bytes: Uint8Array, maxDepth: number): boolean => {
  if (bytes.length <= 2 * maxDepth) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!
    if (inString) {
      if (c === 92) i++
      else if (c === 34) inString = false
    } else if (c === 34) {
      inString = true
    } else if (c === 91 || c === 123) {
      if (++depth > maxDepth) return true
    } else if (c === 93 || c === 125) {
      depth--
    }
  }
  return false
}

/** True when `value` nests arrays or objects deeper than `maxDepth`; never walks past it. */
export const deeperThan = (value: unknown, maxDepth: number): boolean => {
  if (typeof value !== "object" || value === null) return false
  if (maxDepth <= 0) return true
  for (const item of Array.isArray(value) ? value : Object.values(value)) {
    if (deeperThan(item, maxDepth - 1)) return true
  }
  return false
}

/**
 * `value` as short text for an error message: JSON cut to `maxLength` characters, with nesting past
 * a few levels elided, so a hostile value can make neither a deep recursion nor a long text.
 */
export const preview = (value: unknown, maxLength = 100): string => {
  let text: string
  try {
    text = deeperThan(value, 8) ? `${Array.isArray(value) ? "an array" : "an object"} nested deeper than 8 levels`
      : JSON.stringify(value) ?? String(value)
  } catch {
    text = typeof value
  }
  return clip(text, maxLength)
}

const where = (path: string): string => path === "" ? "" : ` at ${path}`

interface Walk {
  readonly limits: Limits
  /** An upper bound of the JSON text's bytes so far. */
  upperBytes: number
  /** A lower bound of them: past the limit, the walk stops there (a huge value is not walked whole). */
  lowerBytes: number
}

const exceeds = (walk: Walk): string => `the value exceeds ${walk.limits.maxBytes} bytes of JSON`

const check = (value: unknown, path: string, ancestors: Set<object> | undefined, depth: number, walk: Walk): string | undefined => {
  switch (typeof value) {
    case "string":
      // A UTF-16 unit is at most 3 UTF-8 bytes, an escaped one 6 (\u0000).
      walk.upperBytes += value.length * 6 + 2
      walk.lowerBytes += value.length + 2
      return walk.lowerBytes > walk.limits.maxBytes ? exceeds(walk) : undefined
    case "boolean":
      walk.upperBytes += 5
      return undefined
    case "number":
      walk.upperBytes += 24
      return Number.isFinite(value) ? undefined : `the number ${value}${where(path)} is not JSON`
    case "bigint":
      return `a bigint${where(path)} is not JSON`
    case "function":
      return `a function${where(path)} is not JSON`
    case "symbol":
      return `a symbol${where(path)} is not JSON`
    case "undefined":
      return `undefined${where(path)} is not JSON`
  }
  if (value === null) {
    walk.upperBytes += 4
    return undefined
  }
  const object = value as object
  if (depth >= walk.limits.maxDepth) return `the value is nested deeper than ${walk.limits.maxDepth} levels${where(path)}`
  const seen = ancestors ?? new Set<object>()
  if (seen.has(object)) return `a cycle${where(path)} is not JSON`
  if (Array.isArray(object)) {
    seen.add(object)
    walk.upperBytes += 2 + object.length
    for (let i = 0; i < object.length; i++) {
      const problem = check(object[i], `${path}[${i}]`, seen, depth + 1, walk)
      if (problem !== undefined) return problem
    }
    seen.delete(object)
    return undefined
  }
  const proto = Object.getPrototypeOf(object)
  if (proto !== Object.prototype && proto !== null) {
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name
    return `${typeof name === "string" && name !== "" ? `${/^[aeiou]/i.test(name) ? "an" : "a"} ${name}` : "a class instance"}${
      where(path)
    } is not JSON`
  }
  seen.add(object)
  walk.upperBytes += 2
  for (const key of Object.keys(object)) {
    const item = (object as Record<string, unknown>)[key]
    if (item === undefined) continue
    walk.upperBytes += key.length * 6 + 4
    walk.lowerBytes += key.length + 4
    const problem = check(item, path === "" ? key : `${path}.${key}`, seen, depth + 1, walk)
    if (problem !== undefined) return problem
  }
  seen.delete(object)
  return undefined
}

/** JSON text with object keys sorted at every depth: one text for equal values. */
export const canonical = (value: unknown): string => JSON.stringify(sortKeys(value)) ?? "null"

const sortKeys = (value: unknown): unknown => {
  if (typeof value !== "object" || value === null) return value
  if (Array.isArray(value)) return value.map(sortKeys)
  const out: Record<string, unknown> = {}
  for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Record<string, unknown>)[key])
  return out
}
