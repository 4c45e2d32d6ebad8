/** The demo's tools of the other shapes (design: Handler shapes): an async body, and a CPU-bound one on worker threads. */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import * as Backend from "../../src/demo/Backend.js"
import * as DemoTools from "../../src/demo/tools.js"
import { Invocation, ToolContext } from "../../src/index.js"

const chained = (text: string, rounds: number) => {
  let hash = text
  for (let i = 0; i < rounds; i++) hash = createHash("sha256").update(hash).digest("hex")
  return hash
}

describe("demo tools of other shapes", () => {
  it.effect("estimate_delivery: an async body, through the pipeline and called directly", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(DemoTools.estimateDelivery, "{\"postcode\":\"75011\"}")
      assert.deepStrictEqual(result.value, { postcode: "75011", business_days: 1 })
      const bad = yield* Invocation.run(DemoTools.estimateDelivery, "{\"postcode\":\"Lyon\"}")
      assert.include(bad.error, "estimate_delivery: invalid input: postcode")
      const direct = yield* Effect.promise(() =>
        DemoTools.estimateDelivery.handler({ postcode: "69002" }, ToolContext.makeCall())
      )
      assert.deepStrictEqual(direct, { postcode: "69002", business_days: 2 })
    }))

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
