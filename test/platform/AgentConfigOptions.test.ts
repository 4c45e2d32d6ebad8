/**
 * The platform's own options in its configuration file (docs: configuration, "The platform's agents"): limits,
 * expiries and intervals at the file's top level, decoded with the rest (a bad one refused, naming its path), given
 * to the platform as `Options`; a reload that changes one says it takes effect at the next start. Each field of the
 * file is documented.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as AgentConfig from "../../src/platform/AgentConfig.js"
import { limitsOf } from "../../src/platform/Options.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "agent-tools-agentconfig-options-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const write = (dir: string, content: unknown) => {
  const file = join(dir, "platform.json")
  writeFileSync(file, JSON.stringify(content))
  return file
}

const everyOption = {
  limits: { maxTasksPerAgent: 12, maxPromptBytesPerAgent: 1000, maxManifestBytes: 2000, maxManifestBytesPerAgent: 4000 },
  heartbeatInterval: "20 seconds",
  lifecycleBudget: 40,
  lifecycleWindow: "2 minutes",
  approvalExpiry: "2 hours",
  keepEndedTasks: "30 minutes",
  evictSilentAfter: 5,
  agentCallTimeout: "90 seconds",
  workerGrace: "500 millis",
  operatorHosts: ["agents.example.com"],
  agents: { billing: { limits: { maxTasksPerAgent: 3 } } }
}

describe("the platform's options in its configuration file", () => {
  it.scoped("every option at the top level reaches the platform's limits; an agent's own limits stay its own", () =>
    Effect.gen(function*() {
      const config = yield* AgentConfig.read(write(yield* tempDir, everyOption))
      const options = AgentConfig.platformOptionsOf(config)
      const limits = limitsOf({ ...options, tokens: new Map(), agents: { billing: { limits: { maxTasksPerAgent: 3 } } } })
      assert.strictEqual(limits.heartbeatMillis, 20_000)
      assert.strictEqual(limits.lifecycleBudget, 40)
      assert.strictEqual(limits.lifecycleWindowMillis, 120_000)
      assert.strictEqual(limits.keepEndedTasksMillis, 30 * 60_000)
      assert.strictEqual(limits.evictAfterMillis, 5 * 20_000)
      assert.strictEqual(limits.workerGraceMillis, 500)
      assert.strictEqual(limits.maxTasksPerAgent, 12)
      assert.strictEqual(limits.maxPromptBytesPerAgent, 1000)
      assert.strictEqual(limits.maxManifestBytes, 2000)
      assert.strictEqual(limits.maxManifestBytesPerAgent, 4000)
      assert.strictEqual(limits.forAgent("billing").maxTasksPerAgent, 3)
      assert.strictEqual(options.approvalExpiry, "2 hours")
      assert.strictEqual(options.agentCallTimeout, "90 seconds")
      assert.deepStrictEqual(options.operatorHosts, ["agents.example.com"])
    }))

  it.effect.each([
    [{ agents: {}, keepEndedTasks: "ten minutes" }, "keepEndedTasks: \"ten minutes\" is not a duration; write one such as"],
    [{ agents: {}, workerGrace: "0 seconds" }, "workerGrace: \"0 seconds\" is not a duration"],
    [{ agents: {}, heartbeatInterval: 60 }, "heartbeatInterval: Expected string, actual 60"],
    [{ agents: {}, limits: { maxTasksPerAgent: 0 } }, "limits.maxTasksPerAgent: expected a positive integer"],
    [{ agents: {}, evictSilentAfter: 1.5 }, "evictSilentAfter: expected a positive integer"],
    [{ agents: {}, keepEnded: "1 hour" }, "keepEnded: is not a field of the file"]
  ] as const)("a bad option is refused, naming its path: %s", ([content, message]) =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(AgentConfig.read(write(yield* tempDir, content)))
      assert.include(error.message, message)
    }).pipe(Effect.scoped))

  it.scoped("a reload that changes an option says it takes effect at the next start; the running options stay", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = write(dir, { agents: {}, keepEndedTasks: "30 minutes" })
      const running = yield* AgentConfig.live(file, () => Effect.die("no model"))
      write(dir, { agents: {}, keepEndedTasks: "1 hour" })
      const logs: Array<string> = []
      const logger = Logger.make(({ message }) => logs.push(String(message)))
      assert.isTrue(yield* running.reload.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger))))
      assert.strictEqual(running.options.keepEndedTasks, "30 minutes")
      assert.isTrue(
        logs.some((line) => line.includes("keepEndedTasks changed; the platform's own options take effect at the next start")),
        logs.join("\n")
      )
    }))

  it("every field of the file is documented on the configuration page", () => {
    const page = readFileSync(new URL("../../docs/configuration.md", import.meta.url), "utf8")
    const fields = [
      ...Object.keys(AgentConfig.ConfigFile.fields),
      ...Object.keys(AgentConfig.AgentEntry.fields),
      ...Object.keys(AgentConfig.LimitsFields.fields)
    ]
    const missing = fields.filter((field) => !page.includes(`\`${field}\``))
    assert.deepStrictEqual(missing, [])
  })
})
