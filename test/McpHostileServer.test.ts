/**
 * `Mcp.toolkit` against a hostile server (design: Remote MCP tools, Hostile clients): a child that
 * floods log lines and list changes, lists a schema nested 200,000 deep, one of 10 MB, 10,000
 * tools, a `$ref` cycle. Each case prints its figures: the event loop's worst lateness, the
 * process's memory after the attack, after a second one and after the connection closed.
 * Real processes and real time: the slow project.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { Invocation, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { bundleChild } from "./support/childProcess.js"
import { record, scale } from "./support/figures.js"
import { timerDelays } from "./support/loopDelays.js"

const server = bundleChild("test/support/hostileMcpServer.ts", mkdtempSync(join(tmpdir(), "mcp-hostile-")))

const mib = (bytes: number) => Math.round(bytes / 1024 / 1024)
// A full collection before each measure: what is still held, not what is not collected yet.
setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

/** Resident memory after a full collection. */
const rss = () => {
  gc()
  return process.memoryUsage().rss
}

/**
 * What JavaScript still holds after a full collection (the heap and the buffers outside it). The
 * process's RSS also keeps memory the allocator was given back and did not return to the system:
 * printed, but not what decides whether anything is held.
 */
const held = () => {
  gc()
  const { external, heapUsed } = process.memoryUsage()
  return heapUsed + external
}

/** The log lines written while a test runs, counted (not printed). */
const counted = () => {
  const lines: Array<string> = []
  const logger = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => void lines.push(String(message))))
  return { lines, logger }
}

const connect = (mode: string) =>
  Effect.flatMap(Effect.promise(() => server), (bundle) => Mcp.toolkit({ command: process.execPath, args: [bundle, mode] }))

const call = (remote: Mcp.RemoteToolkit, name: string, args: unknown) =>
  Effect.flatMap(remote.tools, (tools) => Invocation.run(tools.find((t) => t.name === name)!, args))

const stats = (remote: Mcp.RemoteToolkit) =>
  Effect.map(call(remote, "stats", {}), (result) =>
    JSON.parse(String(result.value)) as { lists: number; calls: Record<string, number> })

const worst = (delays: ReadonlyArray<number>) => Math.round(Math.max(0, ...delays))

describe("Mcp.toolkit against a hostile server", () => {
  it.live("a flood of 10 KB log lines during a call: at most 100 a second kept, the rest counted; memory not held", () => {
    const { lines, logger } = counted()
    const count = scale(20_000, 1_000_000)
    // The peak while the call runs, and what is held once its connection closed.
    const attack = Effect.gen(function*() {
      const remote = yield* connect("deep")
      const started = performance.now()
      let peak = 0
      const sampler = setInterval(() => void (peak = Math.max(peak, process.memoryUsage().rss)), 20)
      const { delays, value } = yield* timerDelays(call(remote, "flood", { count, size: 10_000 })).pipe(
        Effect.ensuring(Effect.sync(() => clearInterval(sampler)))
      )
      assert.strictEqual(value.value, "flooded")
      return { worst: worst(delays), peak, seconds: (performance.now() - started) / 1000 }
    }).pipe(Effect.scoped, Effect.map((measured) => ({ ...measured, held: held(), rss: rss() })))
    return Effect.gen(function*() {
      const before = { held: held(), rss: rss() }
      const first = yield* attack
      const second = yield* attack
      const kept = lines.filter((line) => line.includes("Mcp.toolkit: the MCP server") && !line.includes("dropped")).length
      const dropped = lines.filter((line) => line.includes("dropped")).length
      const text = `${count} log lines of 10 KB, twice: ${kept} logged, ${dropped} warnings of dropped lines; ` +
        `loop's worst lateness ${first.worst}/${second.worst} ms; held (heap and buffers) ${mib(before.held)} MiB before, ` +
        `${mib(first.held)}/${mib(second.held)} MiB after each; RSS ${mib(before.rss)} MiB before, peaks ` +
        `${mib(first.peak)}/${mib(second.peak)} MiB, ${mib(first.rss)}/${mib(second.rss)} MiB after each`
      console.log(text)
      record({
        suite: "hostile MCP server",
        measure: "log flood: memory held after it (MiB), and after a second one; RSS peak",
        value: `+${mib(first.held - before.held)}, +${mib(second.held - first.held)}; ${mib(first.peak)}`,
        expected: "< 64, < 16; RSS peak < 400 over before"
      })
      // At most 100 lines in each second a flood spans (a second begun counts whole).
      const allowed = 100 * (Math.ceil(first.seconds) + 1 + Math.ceil(second.seconds) + 1)
      assert.isAtMost(kept, allowed, `${text}; the floods took ${first.seconds.toFixed(1)} and ${second.seconds.toFixed(1)} s`)
      assert.isAbove(dropped, 0, text)
      assert.isBelow(first.peak - before.rss, 400 * 1024 * 1024, text)
      assert.isBelow(first.held - before.held, 64 * 1024 * 1024, text)
      assert.isBelow(second.held - first.held, 16 * 1024 * 1024, text)
    }).pipe(Effect.provide(logger))
  }, 300_000)

  it.live("5,000 list changes: one listing in flight and one pending, not one each", () =>
    Effect.gen(function*() {
      const remote = yield* connect("deep")
      yield* call(remote, "changes", { count: 5_000 })
      // The listings the changes set off end within a moment; then the count holds still.
      const settled = yield* Effect.zipRight(Effect.sleep("500 millis"), stats(remote))
      const again = yield* Effect.zipRight(Effect.sleep("500 millis"), stats(remote))
      const text = `5000 list changes: ${settled.lists} listings (the first one included), ${again.lists} half a second later`
      console.log(text)
      record({ suite: "hostile MCP server", measure: "tools/list requests after 5,000 list changes", value: again.lists, expected: "<= 10" })
      assert.isAtMost(again.lists, 10, text)
    }).pipe(Effect.scoped), 60_000)

  it.live("a schema nested 200,000 deep refuses that tool only, its neighbours are called", () =>
    Effect.gen(function*() {
      const { delays, value: remote } = yield* timerDelays(connect("deep"))
      const tools = yield* remote.tools
      const refused = yield* Effect.flip(Toolkit.make(...tools))
      const text = `a schema 200,000 deep: connected and listed, loop's worst lateness ${worst(delays)} ms; ` +
        `violations ${refused.violations.map((v) => `${v.tool}:${v.rule}`).join(", ")}`
      console.log(text)
      record({ suite: "hostile MCP server", measure: "schema 200,000 deep: loop's worst lateness (ms)", value: worst(delays), expected: "< 1,000" })
      assert.deepStrictEqual(refused.violations.map((v) => [v.tool, v.rule]), [["deep", "input-json"]])
      assert.match((yield* call(remote, "deep", {})).error!, /the tool cannot be called/)
      assert.strictEqual((yield* call(remote, "ok", {})).value, "ran")
      assert.deepStrictEqual((yield* stats(remote)).calls, { ok: 1, stats: 1 })
      assert.isBelow(worst(delays), 1_000, text)
    }).pipe(Effect.scoped), 60_000)

  it.live("a 9 MB schema, listed again after 10 list changes: refused for that tool, never compiled", () =>
    Effect.gen(function*() {
      const before = rss()
      const { delays, value: remote } = yield* timerDelays(Effect.gen(function*() {
        const remote = yield* connect("huge")
        yield* call(remote, "changes", { count: 10 })
        yield* Effect.sleep("500 millis")
        return remote
      }))
      const tools = yield* remote.tools
      const refused = yield* Effect.flip(Toolkit.make(...tools))
      const grown = rss() - before
      const text = `a 9 MB schema and 10 list changes: loop's worst lateness ${worst(delays)} ms, RSS +${mib(grown)} MiB; ` +
        `${refused.violations.map((v) => `${v.tool}:${v.rule}: ${v.message.slice(0, 120)}`).join("; ")}`
      console.log(text)
      record({ suite: "hostile MCP server", measure: "9 MB schema, 10 list changes: loop's worst lateness (ms)", value: worst(delays), expected: "< 1,000" })
      assert.deepStrictEqual(refused.violations.map((v) => [v.tool, v.rule]), [["huge", "input-json"]])
      assert.match((yield* call(remote, "huge", {})).error!, /the tool cannot be called/)
      assert.isBelow(worst(delays), 1_000, text)
      assert.isBelow(grown, 200 * 1024 * 1024, text)
    }).pipe(Effect.scoped), 60_000)

  it.live("a message over 10 MiB: the connection is refused with a reason that says so", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.scoped(connect("over")))
      console.log(`a 12 MB listing: ${error.reason}`)
      assert.include(error.reason, "it sent a message over 10 MiB")
    }), 60_000)

  it.live("10,000 tools in one page: refused by the tool limit before any schema is compiled", () =>
    Effect.gen(function*() {
      const { delays, value: remote } = yield* timerDelays(connect("many"))
      const tools = yield* remote.tools
      const refused = yield* Effect.flip(Toolkit.make(...tools))
      const text = `10,000 tools: listed with the loop's worst lateness ${worst(delays)} ms; ${refused.violations.length} violations, ` +
        `the first ${refused.violations[0]!.rule}`
      console.log(text)
      record({ suite: "hostile MCP server", measure: "10,000 tools listed: loop's worst lateness (ms)", value: worst(delays), expected: "< 200" })
      assert.strictEqual(refused.violations[0]!.rule, "max-tools")
      assert.match((yield* call(remote, "t0", {})).error!, /the tool cannot be called/)
      assert.isBelow(worst(delays), 200, text)
    }).pipe(Effect.scoped), 60_000)

  it.live("a $ref cycle: the tool cannot be called, and the server never sees its input", () =>
    Effect.gen(function*() {
      const remote = yield* connect("cycle")
      const result = yield* call(remote, "cycle", { a: "x" })
      console.log(`a $ref cycle: ${result.error}`)
      assert.match(result.error!, /^cycle: invalid input/)
      assert.deepStrictEqual((yield* stats(remote)).calls, { stats: 1 })
    }).pipe(Effect.scoped), 60_000)
})
