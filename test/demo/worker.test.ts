/**
 * The demo's CPU-bound tool on worker threads (design: Handler shapes). In the slow project: it
 * starts real threads, which a loaded machine starts slowly (the tool's own deadline is 20 s).
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import * as Backend from "../../src/demo/Backend.js"
import * as DemoTools from "../../src/demo/tools.js"
import { Invocation } from "../../src/index.js"

const chained = (text: string, rounds: number) => {
  let hash = text
  for (let i = 0; i < rounds; i++) hash = createHash("sha256").update(hash).digest("hex")
  return hash
}

describe("the demo's worker tool", () => {
  it.live("digest_report: a worker body, the digest computed off the event loop, started on first use", () =>
    Effect.gen(function*() {
      const reports = Context.get(yield* Layer.build(Backend.layerReports), Backend.Reports)
      assert.strictEqual(reports.spawned(), 0, "no thread before a report is digested")
      const result = yield* Invocation.run(DemoTools.digestReport, "{\"text\":\"Q3 refunds\",\"rounds\":2000}").pipe(
        Effect.provideService(Backend.Reports, reports)
      )
      assert.deepStrictEqual(result.value, { digest: chained("Q3 refunds", 2000), rounds: 2000 })
      assert.strictEqual(reports.spawned(), 2)
    }).pipe(Effect.scoped), 30_000)
})
