/** A URL in a log line shows no secret (design: Observability): each URL of a list, a query's password too. */
import { assert, describe, it } from "@effect/vitest"
import { redactUrl } from "../../../src/internal/util/settings.js"

describe("redactUrl", () => {
  it("redacts every URL of a comma-separated list, user names, passwords and query values", () => {
    assert.strictEqual(
      redactUrl("ws://127.0.0.1:8787/rpc,ws://agent:PW@10.0.0.2:8787/rpc"),
      "ws://127.0.0.1:8787/rpc,ws://***:***@10.0.0.2:8787/rpc"
    )
    assert.strictEqual(redactUrl("postgres://u@h/db?password=PW&sslmode=require"), "postgres://***@h/db?password=***&sslmode=***")
    assert.notInclude(redactUrl("postgres://u:PW@h/db"), "PW")
    assert.strictEqual(redactUrl(""), "(unset)")
    assert.strictEqual(redactUrl("not a url"), "(not a URL)")
  })
})
