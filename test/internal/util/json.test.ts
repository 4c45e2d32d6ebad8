import { assert, describe, it } from "@effect/vitest"
import * as Json from "../../../src/internal/util/json.js"

class Order {
  readonly id = "ord-1"
}
class Refund {
  readonly id = "re-1"
}

describe("json: what is not JSON", () => {
  it("names a class instance with its article: an Order, a Refund, a Map", () => {
    assert.strictEqual(Json.problemIn(new Order()), "an Order is not JSON")
    assert.strictEqual(Json.problemIn({ refund: new Refund() }), "a Refund at refund is not JSON")
    assert.strictEqual(Json.problemIn(new Map()), "a Map is not JSON")
  })
})
