/**
 * The task events a stream carries are encoded (by the platform) and decoded (by a serving process) without
 * Effect's parser when they are plain, and the two that are not (`ToolCallCompleted`, `TaskCompleted`) by the
 * codecs written for them (protocol/plainEvents.ts): checked on generated events, valid and not, against Effect's
 * own encode and decode, which a value the codecs do not take falls to.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Either, FastCheck as fc, Schema, SchemaAST } from "effect"
import { type PlainCodec, plainStruct, plainTagged } from "../src/internal/util/plain.js"
import { decodeAnswers, decoders, encoders } from "../src/protocol/plainEvents.js"
import { PlatformRpcs, TaskEvent } from "../src/protocol/Protocol.js"
import { InvalidOutput, ToolResult } from "../src/ToolResult.js"
import { generatedCases } from "./support/generated.js"

const plain = plainTagged(TaskEvent.ast)
const encode = Schema.encodeUnknownEither(TaskEvent)
const decode = Schema.decodeUnknownEither(TaskEvent)
/** Every event but those whose Schema Effect cannot generate (a call's result: `ToolResult` is a class of ours). */
const events = fc.oneof(...TaskEvent.members.flatMap((member) => {
  try {
    return [Arbitrary.make(member as Schema.Schema<TaskEvent>)]
  } catch {
    return []
  }
}))
const tags = TaskEvent.members.map((member) => {
  const tag = (SchemaAST.typeAST(member.ast) as SchemaAST.TypeLiteral).propertySignatures.find((ps) => ps.name === "_tag")!.type
  return (tag as SchemaAST.Literal).literal as string
})

/** Whatever `codec` (`plain` unless given) gives for `value` is what Effect's `parse` gives, the same keys in the same order, at every depth. */
const sameAsEffect = (value: unknown, parse: (u: unknown) => Either.Either<unknown, unknown>, codec: PlainCodec = plain): boolean => {
  const given = codec(value)
  if (given === undefined) return false
  const parsed = parse(value)
  assert.isTrue(Either.isRight(parsed), `plain took a value Effect refuses: ${JSON.stringify(value)}`)
  assert.deepStrictEqual(given, Either.getOrThrow(parsed))
  assert.deepStrictEqual(Object.keys(given), Object.keys(Either.getOrThrow(parsed) as object))
  // And the keys of what is nested in it (an answer's fields), in the same order.
  assert.strictEqual(JSON.stringify(given), JSON.stringify(Either.getOrThrow(parsed)))
  return true
}

describe("plain task events: as Effect's Schema encodes and decodes them", () => {
  it("valid events, encoded and decoded; most are plain", () => {
    let taken = 0
    fc.assert(
      fc.property(events, (event) => {
        if (sameAsEffect(event, encode)) taken++
        const json = JSON.parse(JSON.stringify(Schema.encodeSync(TaskEvent)(event)))
        sameAsEffect(json, decode)
      }),
      { numRuns: 1_000 }
    )
    // TaskStarted, TurnStarted, ToolCallRequested and the like; not those with a result or a default.
    assert.isAbove(taken, 500)
  })

  it("values of a known tag with fields of any type, missing or extra: taken only as Effect takes them", () => {
    const value = fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined), fc.object())
    const fields = fc.dictionary(
      fc.constantFrom("taskId", "step", "text", "toolCallId", "name", "arguments", "deadlineAt", "approved", "offset", "extra"),
      value
    )
    fc.assert(
      fc.property(fc.constantFrom(...tags), fields, fc.constantFrom(encode, decode), (tag, rest, parse) => {
        const given = { _tag: tag, ...rest }
        if (!sameAsEffect(given, parse)) assert.strictEqual(plain(given), undefined)
      }),
      { numRuns: 2_000 }
    )
  })

  it("a tag two members have, one of them not plain (a default), is left to Effect, which tries both", () => {
    const A = Schema.TaggedStruct("A", { n: Schema.Number })
    const B = Schema.TaggedStruct("A", { n: Schema.optionalWith(Schema.Number, { default: () => 0 }), m: Schema.String })
    const C = Schema.TaggedStruct("C", { n: Schema.Number })
    for (const union of [Schema.Union(A, B, C), Schema.Union(B, A, C)]) {
      const codec = plainTagged(union.ast)
      assert.strictEqual(codec({ _tag: "A", n: 1, m: "x" }), undefined)
      assert.deepStrictEqual(codec({ _tag: "C", n: 1, m: "x" }), { _tag: "C", n: 1 })
    }
  })

  it("an unknown tag, a tag-less value or no object at all is left to Effect", () => {
    for (const value of [{ _tag: "Newer", taskId: "t" }, { taskId: "t" }, null, "TaskStarted", [{ _tag: "TaskStarted" }]]) {
      assert.strictEqual(plain(value), undefined)
    }
  })
}, generatedCases)

describe("the two events that are not plain: by their own codecs, as Effect's Schema encodes and decodes them", () => {
  const encodeByHand = plainTagged(TaskEvent.ast, encoders)
  const decodeByHand = plainTagged(TaskEvent.ast, decoders)
  const offset = fc.option(fc.integer(), { nil: undefined })
  const result = fc.oneof(
    fc.jsonValue().map((value) => ToolResult.success(value)),
    fc.constant(ToolResult.success(undefined)),
    fc.string().map((reason) => ToolResult.failure(new InvalidOutput({ toolName: "t", reason }))),
    fc.string().map((text) => ToolResult.failure(text))
  )
  const completed = fc.record({
    _tag: fc.constant("ToolCallCompleted" as const),
    taskId: fc.string(),
    toolCallId: fc.string(),
    name: fc.string(),
    result,
    cached: fc.boolean(),
    offset
  }, { requiredKeys: ["_tag", "taskId", "toolCallId", "name", "result", "cached"] })
  const usage = fc.record({
    inputTokens: fc.nat(),
    outputTokens: fc.nat(),
    cacheReadTokens: fc.option(fc.nat(), { nil: undefined }),
    cacheWriteTokens: fc.option(fc.nat(), { nil: undefined })
  }, { requiredKeys: ["inputTokens", "outputTokens"] })
  const taskCompleted = fc.record({
    _tag: fc.constant("TaskCompleted" as const),
    taskId: fc.string(),
    output: fc.string(),
    steps: fc.nat(),
    usage,
    value: fc.jsonValue(),
    offset
  }, { requiredKeys: ["_tag", "taskId", "output", "steps", "usage"] })

  it("valid events, encoded and decoded; every successful one by hand", () => {
    let taken = 0
    let succeeded = 0
    fc.assert(
      fc.property(fc.oneof(completed, taskCompleted), (event) => {
        const failed = event._tag === "ToolCallCompleted" && event.result.error !== undefined
        if (!failed) succeeded++
        if (sameAsEffect(event, encode, encodeByHand)) taken++
        else assert.isTrue(failed, `a valid event left to Effect's encode: ${JSON.stringify(event)}`)
        const json = JSON.parse(JSON.stringify(Schema.encodeSync(TaskEvent)(event as TaskEvent)))
        // And without the fields whose default the decoder fills in (as a peer that leaves them out sends it).
        const { cached: _cached, steps: _steps, usage: _usage, ...defaulted } = json
        for (const sent of [json, defaulted]) {
          if (!sameAsEffect(sent, decode, decodeByHand)) assert.isTrue(failed, `left to Effect's decode: ${JSON.stringify(sent)}`)
        }
      }),
      { numRuns: 1_000 }
    )
    assert.strictEqual(taken, succeeded)
  })

  it("values of these tags with fields of any type, missing or extra: taken only as Effect takes them", () => {
    const value = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.constant(undefined),
      fc.object(),
      fc.record({ value: fc.jsonValue() }),
      fc.record({ value: fc.jsonValue(), error: fc.string() }),
      fc.record({ inputTokens: fc.nat(), outputTokens: fc.nat(), cacheReadTokens: fc.oneof(fc.nat(), fc.string()) }),
      fc.jsonValue().map((v) => ToolResult.success(v))
    )
    const fields = fc.dictionary(
      fc.constantFrom("taskId", "toolCallId", "name", "result", "cached", "output", "steps", "usage", "value", "offset", "extra"),
      value
    )
    fc.assert(
      fc.property(
        fc.constantFrom("ToolCallCompleted", "TaskCompleted"),
        fields,
        fc.constantFrom([encode, encodeByHand] as const, [decode, decodeByHand] as const),
        (tag, rest, [parse, codec]) => {
          const given = { _tag: tag, ...rest }
          if (!sameAsEffect(given, parse, codec)) assert.strictEqual(codec(given), undefined)
        }
      ),
      { numRuns: 4_000 }
    )
  })
}, generatedCases)

describe("the payloads the platform's wire decodes itself: as Effect's Schema decodes them", () => {
  const submitSchema = PlatformRpcs.requests.get("SubmitTask")!.payloadSchema as unknown as Schema.Schema<unknown>
  const answersSchema = PlatformRpcs.requests.get("CompleteToolCall")!.payloadSchema as unknown as Schema.Schema<unknown>
  const submit = plainStruct(submitSchema.ast)
  const decodeSubmit = Schema.decodeUnknownEither(submitSchema)
  const decodeAnswersByEffect = Schema.decodeUnknownEither(answersSchema)
  /** Anything, now and then of a field's type. */
  const value = fc.oneof(
    fc.string(),
    fc.stringMatching(/^[A-Za-z0-9_-]{8,20}$/),
    fc.constantFrom("all", "calls", "deltas"),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.object(),
    fc.record({ schema: fc.jsonValue() })
  )

  it("a submit: a valid one without a typed output by the plain struct (its key's pattern checked as Effect checks it)", () => {
    assert.isDefined(submit)
    const valid = fc.record({
      agentId: fc.string(),
      processId: fc.string(),
      prompt: fc.string(),
      events: fc.option(fc.constantFrom("all", "calls", "deltas"), { nil: undefined }),
      submitKey: fc.option(fc.oneof(fc.stringMatching(/^[A-Za-z0-9_-]{8,128}$/), fc.string()), { nil: undefined }),
      resubmit: fc.option(fc.boolean(), { nil: undefined }),
      output: fc.record({ schema: fc.jsonValue() })
    }, { requiredKeys: ["agentId", "processId", "prompt"] })
    let taken = 0
    fc.assert(
      fc.property(valid, (payload) => {
        if (sameAsEffect(payload, decodeSubmit, submit)) taken++
        else {
          // Left to Effect: a typed output (not plain), or a key its pattern refuses.
          const refused = payload.submitKey !== undefined && !/^[A-Za-z0-9_-]{8,128}$/.test(payload.submitKey)
          assert.isTrue("output" in payload || refused, `a plain submit left to Effect: ${JSON.stringify(payload)}`)
        }
      }),
      { numRuns: 1_000 }
    )
    assert.isAbove(taken, 50)
    const keys = fc.constantFrom("agentId", "processId", "prompt", "events", "output", "submitKey", "resubmit", "extra")
    fc.assert(
      fc.property(fc.dictionary(keys, value), (payload) => {
        if (!sameAsEffect(payload, decodeSubmit, submit)) assert.strictEqual(submit!(payload), undefined)
      }),
      { numRuns: 2_000 }
    )
  })

  it("the answers of delivered calls: every successful one by hand; a failed one, or another value, left to Effect", () => {
    const answer = fc.record({
      taskId: fc.string(),
      toolCallId: fc.string(),
      result: fc.oneof(
        fc.record({ value: fc.jsonValue() }),
        fc.constant({}),
        fc.record({ error: fc.string() }),
        fc.record({ error: fc.string(), failure: fc.record({ _tag: fc.constant("InvalidOutput"), reason: fc.string() }) })
      )
    })
    const payload = fc.record({ agentId: fc.string(), processId: fc.string(), results: fc.array(answer, { maxLength: 4 }) })
    let taken = 0
    fc.assert(
      fc.property(payload, (sent) => {
        const failed = sent.results.some((a) => "error" in a.result)
        if (sameAsEffect(sent, decodeAnswersByEffect, decodeAnswers)) taken++
        else assert.isTrue(failed, `a successful answer left to Effect: ${JSON.stringify(sent)}`)
      }),
      { numRuns: 1_000 }
    )
    assert.isAbove(taken, 100)
    const keys = fc.constantFrom("agentId", "processId", "results", "extra")
    const results = fc.oneof(value, fc.array(fc.oneof(value, answer), { maxLength: 3 }))
    fc.assert(
      fc.property(fc.dictionary(keys, fc.oneof(value, results)), (sent) => {
        if (!sameAsEffect(sent, decodeAnswersByEffect, decodeAnswers)) assert.strictEqual(decodeAnswers(sent), undefined)
      }),
      { numRuns: 2_000 }
    )
  })
}, generatedCases)
