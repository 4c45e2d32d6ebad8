/** The demo's async tool (design: Handler shapes); its worker-thread tool is in worker.test.ts (slow project). */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as DemoTools from "../../src/demo/tools.js"
import { Invocation, ToolContext } from "../../src/index.js"

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
})
