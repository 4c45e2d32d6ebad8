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

/**
 * Why `value` is not plain JSON (naming where), or undefined when it is. Plain JSON: null, booleans,
 * finite numbers, strings, arrays and plain objects of those, without cycles. An `undefined`
 * property is allowed (JSON leaves it out); an `undefined` array item is not.
 */
export const problemIn = (value: unknown): string | undefined => check(value, "", undefined)

const where = (path: string): string => path === "" ? "" : ` at ${path}`

const check = (value: unknown, path: string, ancestors: Set<object> | undefined): string | undefined => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined
    case "number":
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
  if (value === null) return undefined
  const object = value as object
  const seen = ancestors ?? new Set<object>()
  if (seen.has(object)) return `a cycle${where(path)} is not JSON`
  if (Array.isArray(object)) {
    seen.add(object)
    for (let i = 0; i < object.length; i++) {
      const problem = check(object[i], `${path}[${i}]`, seen)
      if (problem !== undefined) return problem
    }
    seen.delete(object)
    return undefined
  }
  const proto = Object.getPrototypeOf(object)
  if (proto !== Object.prototype && proto !== null) {
    const name = (proto as { constructor?: { name?: unknown } }).constructor?.name
    return `${typeof name === "string" && name !== "" ? `a ${name}` : "a class instance"}${where(path)} is not JSON`
  }
  seen.add(object)
  for (const key of Object.keys(object)) {
    const item = (object as Record<string, unknown>)[key]
    if (item === undefined) continue
    const problem = check(item, path === "" ? key : `${path}.${key}`, seen)
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
