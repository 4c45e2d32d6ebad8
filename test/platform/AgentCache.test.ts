/**
 * The platform's agents made for earlier tasks (TaskRunner.ts, `AgentCache`): a task whose tools say the same as
 * the last one's runs the same agent, whether its entries are the same objects (one platform's registrations) or
 * copies read from the journal (a cluster runner's tasks), and one whose tools differ gets a new agent.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { Agent, Toolkit } from "../../src/index.js"
import { AgentCache } from "../../src/platform/TaskRunner.js"

const entry = new Toolkit.ManifestEntry({
  name: "echo",
  description: "Echoes n.",
  parameters: { type: "object", properties: { n: { type: "number" } }, required: ["n"] },
  output: { type: "number" },
  timeoutMillis: 30_000,
  retries: 0,
  idempotent: false
})

/** The entry as a cluster runner has it: written to the journal and decoded again, a new object. */
const decoded = (from: Toolkit.ManifestEntry) => Schema.decodeUnknownSync(Toolkit.ManifestEntry)(JSON.parse(JSON.stringify(from)))

const key = (tools: ReadonlyArray<{ readonly entry: Toolkit.ManifestEntry; readonly own: boolean }>) => ({
  tools,
  journaled: true,
  approve: undefined,
  instructions: undefined,
  maxSteps: undefined,
  approvalExpiry: undefined
})

describe("the platform's agents made for earlier tasks", () => {
  it("a task whose tools are copies of the last one's runs its agent; other tools or another owner, a new one", () => {
    const cache = new AgentCache()
    let made = 0
    const make = () => {
      made++
      return Agent.make({ name: `agent-${made}`, tools: [] })
    }
    const first = cache.agentFor("agent-1", key([{ entry, own: true }]), make)
    const again = cache.agentFor("agent-1", key([{ entry: decoded(entry), own: true }]), make)
    assert.strictEqual(again, first)
    assert.strictEqual(made, 1)
    const other = new Toolkit.ManifestEntry({ ...entry, description: "Echoes n back." })
    const changed = cache.agentFor("agent-1", key([{ entry: other, own: true }]), make)
    assert.notStrictEqual(changed, first)
    const routed = cache.agentFor("agent-1", key([{ entry: decoded(other), own: false }]), make)
    assert.notStrictEqual(routed, changed)
    assert.strictEqual(made, 3)
  })
})
