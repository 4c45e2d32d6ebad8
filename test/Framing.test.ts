/**
 * Client input nested too deep is refused from its text, before a value is built of it (design:
 * Hostile clients): one pass over the characters, whatever the depth.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Json from "../src/internal/util/json.js"
import * as Framing from "../src/protocol/Framing.js"

const nested = (depth: number, inner = "1") => "[".repeat(depth) + inner + "]".repeat(depth)

describe("Json.textDeeperThan", () => {
  it("counts arrays and objects, not brackets inside strings or escaped quotes", () => {
    assert.isFalse(Json.textDeeperThan(nested(3), 3))
    assert.isTrue(Json.textDeeperThan(nested(4), 3))
    assert.isFalse(Json.textDeeperThan(`{"a":"[[[[[[[[","b":[{"c":"\\"[[[[[[["}]}`, 3))
    assert.isTrue(Json.textDeeperThan(`{"a":"\\\\","b":[[{"c":1}]]}`, 3))
    // As deep as the value says, for the limits used on values.
    for (const depth of [1, 5, 40]) {
      const text = nested(depth, "{}")
      assert.strictEqual(Json.textDeeperThan(text, depth), Json.deeperThan(JSON.parse(text), depth))
      assert.strictEqual(Json.textDeeperThan(text, depth + 1), Json.deeperThan(JSON.parse(text), depth + 1))
    }
  })
})

describe("Framing.readClientFrame", () => {
  it("refuses a 2 MB frame nested a million deep from its text, with its id when the id comes first", () => {
    const text = `{"id":7,"call":"Heartbeat","payload":${nested(1_000_000)}}`
    const frame = Framing.readClientFrame(text, [])
    assert.deepStrictEqual(frame, {
      _tag: "Refused",
      answer: JSON.stringify({ id: 7, defect: `the frame is nested deeper than ${Framing.maxFrameDepth} levels` })
    })
    const noId = Framing.readClientFrame(nested(1_000_000), [])
    assert.deepStrictEqual(noId, { _tag: "Refused", answer: JSON.stringify({ defect: `the frame is nested deeper than ${Framing.maxFrameDepth} levels` }) })
  })

  it("a payload exactly at the limit is still read", () => {
    const text = `{"id":8,"call":"Heartbeat","payload":{"x":${nested(Framing.maxFrameDepth - 1)}}}`
    assert.notStrictEqual(Framing.readClientFrame(text, [])._tag, "Refused")
  })
})
