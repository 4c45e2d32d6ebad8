import { assert, describe, it } from "@effect/vitest"
import * as Index from "../src/index.js"

describe("the public API", () => {
  it("Invocation offers running a call (alone, typed, or by name through a dispatcher over a toolkit), its configuration and observer, and checkResult; not the pipeline's plumbing", () => {
    const keys = Object.keys(Index.Invocation)
    const plumbing = ["Caller", "CallingFiber", "Started", "lift", "start", "decode", "decodeInput", "startDecoded"]
    for (const name of [...plumbing, "traceReuse", "inputKey", "caller"]) {
      assert.notInclude(keys, name)
    }
    assert.sameMembers(keys, [
      "call",
      "checkResult",
      "defaultConfig",
      "dispatcher",
      "InvocationConfig",
      "InvocationObserver",
      "layer",
      "layerConfig",
      "run"
    ])
  })

  it("the per-run cache is the agent loop's own: Idempotency offers only delivery dedupe", () => {
    assert.notInclude(Object.keys(Index.Idempotency), "RunCache")
  })

  it("Hooks offers the hooks, their layer, the per-run state and a hook's approval; the machinery that runs them stays inside", () => {
    assert.sameMembers(Object.keys(Index.Hooks), ["approval", "approved", "callBudget", "layer", "logging", "RunState"])
  })

  it("no module exports a Caller value: the one Caller is PlatformClient's type", () => {
    for (const [name, module] of Object.entries(Index)) {
      assert.notInclude(Object.keys(module), "Caller", name)
    }
  })
})
