/**
 * A tool's input of plain properties (strings, numbers, booleans, literals, unknown, undefined, unions of
 * them and filters of them) is decoded without Effect's parser: the handler gets what
 * `Schema.decodeUnknownEither` would give (the same keys, in the struct's order, an optional key absent still
 * absent), and what it refuses is refused with Effect's words. Checked on generated arguments against Effect's own decode.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import * as fc from "fast-check"
import { Invocation, Tool } from "../src/index.js"
import { plainStruct } from "../src/internal/util/plain.js"
import { generatedCases } from "./support/generated.js"

const fields = {
  n: Schema.Number,
  s: Schema.String,
  b: Schema.optional(Schema.Boolean),
  kind: Schema.Literal("x", "y", 3, null),
  id: Schema.Union(Schema.String, Schema.Number),
  any: Schema.Unknown,
  maybe: Schema.UndefinedOr(Schema.Number),
  // A filter, checked as Effect checks it.
  count: Schema.optional(Schema.Int.pipe(Schema.between(1, 9)))
}
const decode = Schema.decodeUnknownEither(Schema.Struct(fields), { onExcessProperty: "error", errors: "all" })

let received: unknown
const tool = Tool.make("plain", { description: "Keeps its input.", input: fields, timeout: "10 seconds" }, (input) =>
  Effect.sync(() => {
    received = input
    return "ok"
  }))

const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.constantFrom("x", "y", 3), fc.object())
const absent = Symbol("absent")
/** Mostly a value of the key's type; sometimes another, or none. */
const key = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof({ weight: 12, arbitrary: valid }, { weight: 1, arbitrary: value }, { weight: 1, arbitrary: fc.constant(absent) })
/** Arguments, each key of its type, of another or absent; now and then a key the input does not have. */
const args = fc.record({
  n: key(fc.double()),
  s: key(fc.string()),
  b: key(fc.boolean()),
  kind: key(fc.constantFrom("x", "y", 3, null)),
  id: key(fc.oneof(fc.string(), fc.integer())),
  any: key(value),
  maybe: key(fc.constantFrom(1, undefined)),
  count: key(fc.oneof(fc.integer({ min: -1, max: 11 }), fc.double())),
  extra: fc.oneof({ weight: 12, arbitrary: fc.constant(absent) }, { weight: 1, arbitrary: value })
}).map((record) => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== absent)))
/**
 * Whether a value has, at any depth, a key the pipeline refuses before any Schema sees it (`__proto__`,
 * `constructor`: how prototype pollution starts). fast-check's objects now and then have one.
 */
const hasRefusedKey = (value: unknown): boolean =>
  typeof value === "object" && value !== null &&
  Object.keys(value).some((key) =>
    key === "__proto__" || key === "constructor" || hasRefusedKey((value as Record<string, unknown>)[key])
  )
/** An own `__proto__` key inside `any`, as fast-check once generated it (JSON.parse makes it an own key). */
const withProto = { n: 0, s: "", b: false, kind: "x", id: "", any: JSON.parse("{\"__proto__\":{}}"), maybe: 1 }

describe("a plain input is decoded as Effect's Schema decodes it", () => {
  it.effect("the same value, keys in the same order, for arguments as a value and as text", () =>
    Effect.suspend(() => {
      // Plain, the filter too: what follows compares the codec, not Effect's parser, with Effect's decode.
      const codec = plainStruct(Schema.Struct(fields).ast)
      assert.deepStrictEqual(codec?.({ n: 1, s: "", kind: "x", id: 1, any: null, maybe: undefined, count: 3 }), {
        n: 1,
        s: "",
        kind: "x",
        id: 1,
        any: null,
        maybe: undefined,
        count: 3
      })
      assert.strictEqual(codec?.({ n: 1, s: "", kind: "x", id: 1, any: null, maybe: undefined, count: 3.5 }), undefined)
      return Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(args, fc.boolean(), async (input, asText) => {
            received = undefined
            const result = await Effect.runPromise(Invocation.run(tool, asText ? JSON.stringify(input) : input))
            if (hasRefusedKey(input)) {
              assert.strictEqual(received, undefined)
              assert.match(result.error!, /^plain: invalid input: the key "(__proto__|constructor)" is not allowed$/)
              return
            }
            const expected = decode(asText ? JSON.parse(JSON.stringify(input)) : input)
            if (Either.isRight(expected)) {
              assert.strictEqual(result.error, undefined)
              assert.deepStrictEqual(received, expected.right)
              assert.deepStrictEqual(Object.keys(received as object), Object.keys(expected.right))
            } else {
              assert.strictEqual(received, undefined)
              assert.include(result.error, "plain: invalid input: ")
            }
          }),
          { numRuns: 500, examples: [[withProto, false], [withProto, true]] }
        )
      )
    }))

  it.effect("a refused value is named in Effect's words, each property that fails", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(tool, { n: "1", s: "a", kind: "z", id: 1, any: 1, b: 1 })
      assert.strictEqual(
        result.error,
        "plain: invalid input: n: Expected number, actual \"1\"; b: Expected boolean, actual 1; " +
          "kind: Expected one of \"x\", \"y\", 3, null, actual \"z\""
      )
    }))
}, generatedCases)
