import { assert, describe, it } from "@effect/vitest"
import { clip } from "../../../src/internal/util/text.js"

describe("a text cut to a bound", () => {
  it("at a word's end when one is near, never mid-word, never inside a surrogate pair, the cut marked", () => {
    const text = "openrouter: Encoded side transformation failure at the output"
    assert.strictEqual(clip(text, 35), "openrouter: Encoded side…")
    assert.strictEqual(clip(text, 40), "openrouter: Encoded side transformation…")
    assert.strictEqual(clip("short", 40), "short")
    // No space near the end: cut at the bound.
    assert.strictEqual(clip("a".repeat(50), 10), `${"a".repeat(9)}…`)
    // A surrogate pair at the bound is kept whole or left out, never split.
    const emoji = `${"a".repeat(8)}😀b`
    assert.strictEqual(clip(emoji, 10), `${"a".repeat(8)}…`)
    assert.isAtMost(clip(text, 40).length, 40)
  })
})
