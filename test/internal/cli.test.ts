import { assert, describe, it } from "@effect/vitest"
import * as Cli from "../../src/internal/cli.js"

describe("cli: colour", () => {
  it("only for a terminal, and never with NO_COLOR set (not empty)", () => {
    const saved = process.env.NO_COLOR
    try {
      delete process.env.NO_COLOR
      assert.deepStrictEqual([Cli.colour({ isTTY: true }), Cli.colour({ isTTY: false }), Cli.colour({})], [true, false, false])
      process.env.NO_COLOR = "1"
      assert.isFalse(Cli.colour({ isTTY: true }))
      process.env.NO_COLOR = ""
      assert.isTrue(Cli.colour({ isTTY: true }))
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR
      else process.env.NO_COLOR = saved
    }
  })

  it("plain text keeps the words and drops the escapes", () => {
    assert.strictEqual(Cli.plain("\x1b[0;1m\x1b[0;37;1magent-tools\x1b[0;1m\x1b[0m 0.1.0"), "agent-tools 0.1.0")
  })
})
