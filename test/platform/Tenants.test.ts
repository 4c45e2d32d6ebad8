/**
 * One agent cannot take the platform from the others (design: Hostile clients): a client with a
 * VALID token attacks, each attack at a scale that fits CI, and meanwhile another agent's
 * round trips stay fast, the platform's memory stays bounded (a second identical attack adds nothing
 * to it), each limit refuses with an error that names its option, and what the agent held is let go.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { WebSocket } from "ws"
import { type LanguageModel, Toolkit } from "../../src/index.js"
import { PlatformClient } from "../../src/exports/serve.js"
import { record, scale } from "../support/figures.js"
import { memoryAfterGc } from "../support/mcpMemory.js"
import { forgedAnswerSuite } from "../support/forgedAnswers.js"
import { embedded } from "../support/hostileWireSuite.js"
import { clientLayer, resultsText } from "../support/platform.js"
import {
  assertStaysFast,
  attackWith,
  bystander,
  latencies,
  openWith,
  policy,
  pollUntil,
  roundTrip,
  rssMb,
  staysFast,
  takeInMillis,
  tenantPlatform
} from "../support/tenants.js"

const suite = "hostile tenant"
const agent = { agentId: "agent-1", processId: "p1" }
const call = (id: string, name: string): LanguageModel.ToolCall => ({ id, name, arguments: "{}" })
/** A task's model: one call of `hold`, then the results it read as its output. */
const holdThenAnswer: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [call("a", "hold")] },
  (request) => ({ text: resultsText(request) })
]

/** A tool that holds its task until it is answered, or for `timeoutMillis`; `padding` bytes in its schema. */
const entry = (name: string, timeoutMillis = 30_000, padding = 0) =>
  new Toolkit.ManifestEntry({
    name,
    description: "Holds.",
    parameters: { type: "object", properties: { x: { type: "string", description: "y".repeat(padding) } } },
    output: {},
    timeoutMillis,
    retries: 0,
    idempotent: false
  })

const mib = 1024 * 1024

describe("one agent cannot take the platform from the others (design: Hostile clients)", () => {
  it.live("item 1: 8 connections sending 2 MB frames nested 1,000,000 deep: refused in one pass, another agent's round trip stays fast", () =>
    Effect.gen(function*() {
      const { url } = yield* tenantPlatform([])
      // Another agent's round trips with no attack, in this run: the reference the attack's are held to.
      const baseline = yield* attackWith(url, { MODE: "idle", SECONDS: "2" })
      const seconds = scale(3, 30)
      const attack = yield* attackWith(url, { MODE: "deep", CONNECTIONS: "8", SECONDS: String(seconds) })
      const frames = attack.lines.find((line) => line.startsWith("frames:"))?.slice(7)
      record({
        suite,
        measure: `item 1: ${seconds} s of 8 connections sending 2 MB frames nested 1,000,000 deep (${frames} refused): another agent's p50 / p99`,
        value: `${latencies(attack)}; baseline ${latencies(baseline)}`,
        expected: staysFast
      })
      assert.isAbove(Number(frames), 8)
      assertStaysFast(attack, baseline)
    }).pipe(Effect.scoped), scale(60_000, 120_000))

  it.live("item 2: one agent's tasks are held to maxTasksPerAgent and maxPromptBytesPerAgent, released as they end; another agent serves on", () =>
    Effect.gen(function*() {
      // Lowered limits: 8 prompts of 1 MiB (and 1 KiB more), 20 tasks.
      const { state, url } = yield* tenantPlatform(holdThenAnswer, { maxTasksPerAgent: 20, maxPromptBytesPerAgent: 8 * mib + 1024 })
      // 12 tasks of 1 MiB prompts, then 20 small ones; each task's call waits 5 s for an answer that never comes, then it ends.
      const env = { MODE: "tasks", BIG: "12", SMALL: "20", PROMPT_BYTES: String(mib), HOLD_MILLIS: "5000" }
      // Another agent's round trips with no attack, in this run: the reference the attack's are held to.
      const baseline = yield* attackWith(url, { MODE: "idle", SECONDS: "2" })
      const before = rssMb()
      const first = yield* attackWith(url, env)
      // The client is gone; its tasks run on to their end.
      const held = yield* state.agentUsage("agent-1")
      const expected = [
        ...Array(8).fill("TaskStarted"),
        ...Array(4).fill("AgentLimitExceeded:maxPromptBytesPerAgent"),
        ...Array(12).fill("TaskStarted"),
        ...Array(8).fill("AgentLimitExceeded:maxTasksPerAgent")
      ]
      assert.deepStrictEqual(first.outcomes, expected)
      assert.deepStrictEqual([held.tasks, held.promptBytes], [20, 8 * mib + 12 * 2])
      const released = yield* pollUntil(state.agentUsage("agent-1"), (usage) => usage.tasks === 0, 15_000)
      assert.deepStrictEqual([released.tasks, released.promptBytes], [0, 0])
      // What the first attack left is collected before the second: a leak outlives a collection, and
      // the second attack's peak then counts only what it keeps beside it.
      yield* memoryAfterGc
      const afterFirst = rssMb()
      const second = yield* attackWith(url, env)
      assert.deepStrictEqual(second.outcomes, expected)
      const releasedAgain = yield* pollUntil(state.agentUsage("agent-1"), (usage) => usage.tasks === 0, 15_000)
      assert.strictEqual(releasedAgain.tasks, 0)
      // The error's text, as a client reads it (a platform of its own, its limit lowered further).
      const small = yield* tenantPlatform(holdThenAnswer, { maxPromptBytesPerAgent: 1_000 })
      const refused = yield* Effect.gen(function*() {
        const platform = yield* PlatformClient.PlatformClient
        const limited = yield* platform.submitTask({ ...agent, prompt: "x".repeat(2_000), events: "calls" })
        return yield* Effect.flip(limited.take)
      }).pipe(Effect.provide(clientLayer({ url: small.url }, policy)))
      assert.strictEqual(
        refused.message,
        "agent agent-1 holds 0 bytes of prompts in its tasks not ended yet, and this prompt is 2000: " +
          "the platform's maxPromptBytesPerAgent is 1000; the call goes through once some of its tasks have ended"
      )
      const growth = Math.max(first.peakMb, second.peakMb) - before
      const added = Math.max(0, second.peakMb - first.peakMb)
      record({
        suite,
        measure: "item 2: 12 tasks of 1 MiB prompts, then 20 small ones, from one token (limits lowered to 8 MiB, 20 tasks): " +
          "accepted; refused; another agent's p50 / p99",
        value: `8 + 12; 4 (maxPromptBytesPerAgent) + 8 (maxTasksPerAgent); ${latencies(first)}; baseline ${latencies(baseline)}`,
        expected: staysFast
      })
      record({
        suite,
        measure: "item 2: RSS growth over two identical attacks; added by the second; the agent's counters once its tasks ended",
        value: `${growth.toFixed(1)} MB; ${added.toFixed(1)} MB (after the first ${(afterFirst - before).toFixed(1)} MB); ` +
          `${released.tasks} tasks, ${released.promptBytes} bytes`,
        expected: "< 200 MB; < 64 MB; 0, 0"
      })
      assertStaysFast(first, baseline)
      assert.isBelow(growth, 200)
      assert.isBelow(added, 64)
    }).pipe(Effect.scoped), 90_000)

  it.live("item 3: an agent past maxConnectionsPerAgent gets 503 naming it; another agent connects; a closed connection makes room", () =>
    Effect.gen(function*() {
      const { url } = yield* tenantPlatform([], {}, { maxConnections: 20, maxConnectionsPerAgent: 8 })
      const opened = yield* Effect.promise(() => Promise.all(Array.from({ length: 12 }, () => openWith(url, "tok-1"))))
      const sockets = opened.filter((o): o is WebSocket => o instanceof WebSocket)
      const refused = opened.filter((o): o is { status: number; body: string } => !(o instanceof WebSocket))
      assert.strictEqual(sockets.length, 8)
      assert.deepStrictEqual(refused.map((r) => r.status), [503, 503, 503, 503])
      assert.strictEqual(
        refused[0]!.body,
        "agent agent-1 holds 8 connections already, the most one agent may (the platform's maxConnectionsPerAgent)\n"
      )
      // Another agent still gets in, and is served.
      const another = yield* Effect.promise(() => openWith(url, "tok-2"))
      assert.instanceOf(another, WebSocket)
      ;(another as WebSocket).close()
      assert.deepStrictEqual(yield* roundTrip.pipe(Effect.provide(yield* bystander(url))), undefined)
      sockets[0]!.close()
      yield* Effect.sleep("100 millis")
      const again = yield* Effect.promise(() => openWith(url, "tok-1"))
      assert.instanceOf(again, WebSocket)
      for (const socket of [...sockets, again as WebSocket]) socket.close()
    }).pipe(Effect.scoped))

  it.live("an agent's own limits.maxConnections (its settings) caps its connections instead of maxConnectionsPerAgent", () =>
    Effect.gen(function*() {
      const { url } = yield* tenantPlatform([], { agents: { "agent-2": { limits: { maxConnections: 2 } } } }, { maxConnectionsPerAgent: 4 })
      const opened = yield* Effect.promise(() => Promise.all(Array.from({ length: 3 }, () => openWith(url, "tok-2"))))
      const refused = opened.filter((o): o is { status: number; body: string } => !(o instanceof WebSocket))
      assert.deepStrictEqual(refused, [{
        status: 503,
        body: "agent agent-2 holds 2 connections already, the most it may (its own limits.maxConnections)\n"
      }])
      // agent-1 has no settings of its own: the platform's 4.
      const others = yield* Effect.promise(() => Promise.all(Array.from({ length: 4 }, () => openWith(url, "tok-1"))))
      assert.isTrue(others.every((o) => o instanceof WebSocket))
      for (const socket of [...opened, ...others]) if (socket instanceof WebSocket) socket.close()
    }).pipe(Effect.scoped))

  it.live("item 3: 32 connections holding an unfinished 2 MiB first fragment and answering pings are closed (1008) at frameTimeout; memory is let go", () =>
    Effect.gen(function*() {
      const { url } = yield* tenantPlatform([], {}, { frameTimeout: "1 second", pingInterval: "1 second" })
      const env = { MODE: "fragments", CONNECTIONS: "32", SECONDS: "8" }
      // Another agent's round trips with no attack, in this run: the reference the attack's are held to.
      const baseline = yield* attackWith(url, { MODE: "idle", SECONDS: "2" })
      const before = rssMb()
      const first = yield* attackWith(url, env)
      // What the first attack left is collected before the second: a leak outlives a collection, and
      // the second attack's peak then counts only what it keeps beside it.
      yield* memoryAfterGc
      const afterFirst = rssMb()
      const second = yield* attackWith(url, env)
      for (const attack of [first, second]) {
        assert.deepStrictEqual(attack.lines.filter((line) => line.startsWith("closed:")), Array(32).fill("closed:1008"))
        assert.isBelow(attack.seconds, 5)
      }
      const held = first.held!
      // What the 64 MiB the attack sends at once costs this process to take in, whoever takes it (after
      // the attacks: its buffers are not the platform's memory).
      const takeIn = takeInMillis(32, 2 * mib - 1024)
      const growth = Math.max(first.peakMb, second.peakMb) - before
      const added = Math.max(0, second.peakMb - first.peakMb)
      record({
        suite,
        measure: "item 3: 32 connections each holding an unfinished 2 MiB first fragment, answering pings every 1 s " +
          "(frameTimeout 1 s): closed with 1008 after; another agent's p50 / p99 while the platform holds them; " +
          "its slowest round trip while the 64 MiB arrive, beside what taking them in costs this process",
        value: `${first.seconds.toFixed(1)} s; ${latencies(held)}; ` +
          `${first.rounds.at(-1)?.toFixed(1)} ms (p50 ${first.p50.toFixed(2)} ms over the whole attack), ` +
          `taking in: ${takeIn.toFixed(1)} ms; baseline ${latencies(baseline)}`,
        expected: `${staysFast}; no stall (< 1 s)`
      })
      record({
        suite,
        measure: "item 3: RSS growth over two identical attacks; added by the second",
        value: `${growth.toFixed(1)} MB; ${added.toFixed(1)} MB (RSS after the first ${(afterFirst - before).toFixed(1)} MB)`,
        expected: "< 200 MB; < 64 MB"
      })
      assert.isAbove(held.rounds.length, 10)
      assertStaysFast(held, baseline)
      // The bytes arriving together cost a round trip about what taking them in costs (185 ms measured on
      // a 2-core machine in new memory): one round trip may wait behind them, none stalls.
      assert.isBelow(first.p50, Math.max(20, 3 * baseline.p50))
      assert.isBelow(first.rounds.at(-1)!, 1_000)
      assert.isBelow(growth, 200)
      assert.isBelow(added, 64)
    }).pipe(Effect.scoped), 60_000)

  it.live("item 4: 35 manifests of 1.86 MB are refused (maxManifestBytes), the agent's manifests held to maxManifestBytesPerAgent; let go at deregistration", () =>
    Effect.gen(function*() {
      const { state, url } = yield* tenantPlatform([], { lifecycleBudget: 1_000, maxManifestBytesPerAgent: mib })
      // 1.86 MB: 900 tools of ~2 KB (past the 64 tools too, a rule checked only once the size is within bounds);
      // ~200 KiB: 64 tools of ~3.2 KB.
      const env = {
        MODE: "manifests",
        HUGE: "35",
        HUGE_TOOLS: "900",
        HUGE_PADDING: "1900",
        LARGE: "8",
        LARGE_TOOLS: "64",
        LARGE_PADDING: "3000"
      }
      const expected = [...Array(35).fill("manifest-bytes"), ...Array(5).fill("accepted"), ...Array(3).fill("manifest-bytes-per-agent")]
      // Another agent's round trips with no attack, in this run: the reference the attack's are held to.
      const baseline = yield* attackWith(url, { MODE: "idle", SECONDS: "2" })

      const large = Array.from({ length: 64 }, (_, i) => entry(`t${i}`, 30_000, 3_000))
      const largeBytes = Buffer.byteLength(JSON.stringify(large))
      const client = yield* Layer.build(clientLayer({ url }, policy))
      /** The large manifests deregistered: what the agent held is let go. */
      const deregister = Effect.gen(function*() {
        const platform = yield* PlatformClient.PlatformClient
        for (let i = 0; i < 8; i++) yield* platform.deregister({ agentId: "agent-1", processId: `large-${i}` })
        return (yield* state.agentUsage("agent-1")).manifestBytes
      }).pipe(Effect.provide(client))
      const before = rssMb()
      const first = yield* attackWith(url, env)
      const held = (yield* state.agentUsage("agent-1")).manifestBytes
      const released = yield* deregister
      // What the first attack left is collected before the second: a leak outlives a collection, and
      // the second attack's peak then counts only what it keeps beside it.
      yield* memoryAfterGc
      const afterFirst = rssMb()
      const second = yield* attackWith(url, env)
      yield* deregister
      assert.deepStrictEqual(first.outcomes, expected)
      assert.deepStrictEqual(second.outcomes, expected)
      assert.strictEqual(held, 5 * largeBytes)
      assert.strictEqual(released, 0)
      // The error's text, as a client reads it.
      const rejected = yield* Effect.flip(Effect.flatMap(PlatformClient.PlatformClient, (c) =>
        c.register({ ...agent, manifest: Array.from({ length: 90 }, (_, i) => entry(`t${i}`, 30_000, 3_000)), manifestHash: "x" })
      ).pipe(Effect.provide(client)))
      assert.match(rejected.message, /the manifest is \d+ bytes of JSON, over the platform's maxManifestBytes \(262144\)$/)
      // A Register frame whose id and call do not come first is refused too, once it is parsed.
      const socket = (yield* Effect.promise(() => openWith(url, "tok-1"))) as WebSocket
      const reordered = JSON.stringify({
        payload: { ...agent, manifest: Array.from({ length: 200 }, (_, i) => entry(`t${i}`, 30_000, 3_000)), manifestHash: "r" },
        call: "Register",
        id: 7
      })
      const reply = yield* Effect.promise(() =>
        new Promise<string>((resolve) => {
          socket.once("message", (data) => resolve(String(data)))
          socket.send(reordered)
        })
      )
      socket.close()
      assert.deepStrictEqual(JSON.parse(reply), {
        id: 7,
        error: {
          _tag: "ManifestRejected",
          violations: [{
            rule: "manifest-bytes",
            message: `the Register frame is at least ${reordered.length} bytes of JSON, over the platform's maxManifestBytes (262144)`
          }]
        }
      })
      record({
        suite,
        measure: "item 4: 35 registrations of 1.86 MB manifests, then 8 of " +
          `${(largeBytes / 1024).toFixed(0)} KiB (maxManifestBytesPerAgent lowered to 1 MiB): accepted; another agent's p50 / p99`,
        value: `0 + 5 (held ${(held / 1024).toFixed(0)} KiB, 0 after deregistration); ${latencies(first)}; baseline ${latencies(baseline)}`,
        expected: staysFast
      })
      const growth = Math.max(first.peakMb, second.peakMb) - before
      const added = Math.max(0, second.peakMb - first.peakMb)
      record({
        suite,
        measure: "item 4: RSS growth over two identical attacks; added by the second",
        value: `${growth.toFixed(1)} MB; ${added.toFixed(1)} MB (RSS after the first ${(afterFirst - before).toFixed(1)} MB)`,
        expected: "< 200 MB; < 64 MB"
      })
      assertStaysFast(first, baseline)
      assert.isBelow(growth, 200)
      assert.isBelow(added, 64)
    }).pipe(Effect.scoped), 120_000)

  it.live("item 7: 300 exec_agent calls in one turn, its model answering at once: another agent's p50 stays within 2x its baseline", () =>
    Effect.gen(function*() {
      const calls = 300
      const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
        (request) =>
          request.messages[0]?._tag === "UserMessage" && request.messages[0].text === "burst"
            ? {
              toolCalls: Array.from({ length: calls }, (_, i) => ({
                id: `x${i}`,
                name: "exec_agent",
                arguments: JSON.stringify({ agent: "agent-1", prompt: "answer at once" })
              }))
            }
            : { text: "done at once" },
        { text: "the burst is over" }
      ]
      const { url } = yield* tenantPlatform(script, { agentCalls: { "agent-1": ["agent-1"] }, maxTasksPerAgent: calls + 10 })
      const baseline = yield* attackWith(url, { MODE: "idle", SECONDS: "2" })
      const attack = yield* attackWith(url, { MODE: "burst" })
      const during = attack.held!
      record({
        suite,
        measure: `item 7: ${calls} exec_agent calls in one turn (${attack.seconds.toFixed(1)} s): another agent's p50 / p99, and its baseline`,
        value: `${latencies(during)}; baseline ${latencies(baseline)}`,
        // At least 4 ms: over the ~20 round trips the burst lasts, a p50 near 1 ms moves by a millisecond from
        // one run to the next on a quiet machine; the burst holding the loop would cost tens.
        expected: "p50 < 2x the baseline's (at least 4 ms); p99 < 200 ms"
      })
      assert.deepStrictEqual(attack.outcomes, ["TaskCompleted"], attack.lines.join("\n"))
      assert.isAbove(during.rounds.length, 0)
      assert.isBelow(during.p50, Math.max(2 * baseline.p50, 4), `${latencies(during)}; baseline ${latencies(baseline)}`)
      assert.isBelow(during.p99, 200, `${latencies(during)}; baseline ${latencies(baseline)}`)
    }).pipe(Effect.scoped), 120_000)
})

// Item 5, the same suite as a cluster's runner runs (test/platform/HostileCluster.test.ts).
forgedAnswerSuite("embedded", embedded)
