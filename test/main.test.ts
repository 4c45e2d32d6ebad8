import { assert, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

describe("main", () => {
  it("runs the example: one call succeeds, the others fail with the S5 text", () => {
    const root = fileURLToPath(new URL("..", import.meta.url))
    const out = execFileSync(process.execPath, ["--import", "tsx", "src/main.ts"], { cwd: root, encoding: "utf8" })
    assert.include(out, "-> value {\"id\":\"ord-4821\",\"status\":\"shipped\",\"total\":42}")
    assert.include(out, "-> error \"NotFound: no order with id=ord-0000\"")
    assert.include(out, "add_numbers: invalid input: c: is unexpected")
  }, 30_000)
})
