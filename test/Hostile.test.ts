/**
 * Hostile input against every demo tool, through Invocation, through MCP (the official client) and
 * through the platform (a model emitting the arguments): valid inputs from Schema's Arbitrary, and
 * mutations of them. Invalid input never reaches a handler; nothing escapes as a defect. The
 * number of cases is 10x under `npm run soak`; each path records its figures.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, ConfigProvider, Effect, Exit, FastCheck as fc, Layer, Schedule, Schema, Stream } from "effect"
import * as Backend from "../src/demo/Backend.js"
import * as DemoTools from "../src/demo/tools.js"
import { record, scale } from "./support/figures.js"
import { mcpClient } from "./support/mcpHttp.js"
import * as Json from "../src/internal/util/json.js"
import {
  Hooks,
  Invocation,
  LanguageModel,
  Timing,
  type Tool,
  type ToolContext,
  Toolkit,
  UserPrompt
} from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { PlatformServer } from "../src/exports/platform.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { ToolResult } from "../src/ToolResult.js"

/** Ways to spoil a valid argument object. */
const mutations: ReadonlyArray<readonly [string, (valid: Record<string, unknown>, text: string) => unknown]> = [
  ["not JSON", (_, text) => text.slice(0, Math.max(1, text.length - 1)) + "{"],
  ["an array", () => "[1,2,3]"],
  ["a number", () => "42"],
  ["an unexpected key", (valid) => ({ ...valid, surprise: true })],
  ["an unexpected nested key", (valid) => ({ ...valid, nested: { deeper: { surprise: 1 } } })],
  ["a field of the wrong type", (valid) => Object.keys(valid).length === 0 ? { x: 1 } : { ...valid, [Object.keys(valid)[0]!]: { not: "this" } }],
  ["a missing field", (valid) => Object.keys(valid).length === 0 ? { extra: 1 } : Object.fromEntries(Object.entries(valid).slice(1))],
  ["a __proto__ key", (_, text) => text.replace(/^\{/, "{\"__proto__\":{\"admin\":true}" + (text === "{}" ? "" : ","))],
  ["a constructor key", (valid) => JSON.stringify({ ...valid, constructor: { prototype: {} } })],
  ["a lone surrogate", (valid) => ({ ...valid, note: "\uD800" })],
  ["deep nesting", (valid) => ({ ...valid, deep: JSON.parse("[".repeat(2000) + "]".repeat(2000)) })],
  ["a huge string", (valid) => ({ ...valid, huge: "x".repeat(1024 * 1024 + 1) })]
]

/**
 * The demo tools with each handler wrapped to count its runs: the count is of handlers actually
 * entered, not of calls that got past some earlier stage.
 */
const counted = () => {
  const runs = { count: 0 }
  const wrap = <T extends Tool.Any>(tool: T): T => ({
    ...tool,
    handler: (input: unknown, call: ToolContext.Call) => Effect.suspend(() => (runs.count++, tool.handler(input, call)))
  })
  const tools = DemoTools.tools.map(wrap)
  return { runs, tools }
}

const tools = DemoTools.tools as ReadonlyArray<Tool.Any>

/** The figures of one path: payloads tried, handler runs on them, defects that escaped. */
const recordPath = (path: string, tried: number, handlerRuns: number, defects: number) => {
  record({ suite: "hostile input", measure: `${path}: hostile payloads tried`, value: tried })
  record({ suite: "hostile input", measure: `${path}: handler runs on invalid input`, value: handlerRuns, expected: "0" })
  record({ suite: "hostile input", measure: `${path}: escaped defects`, value: defects, expected: "0" })
}

/**
 * Valid wire arguments (JSON text) for a tool, from its input Schema. Values JSON cannot carry
 * (Schema.Number allows Infinity and NaN) are left out: no wire can send them.
 */
const validArguments = (tool: Tool.Any): fc.Arbitrary<string> =>
  Arbitrary.make(tool.input as Schema.Schema<any, any>)
    .map((value) => Schema.encodeSync(tool.input as Schema.Schema<any, any>)(value) as unknown)
    // JSON.stringify writes Infinity and NaN as null: such a value never reaches a tool as itself.
    .filter((encoded) => !/\bnull\b/.test(JSON.stringify(encoded)))
    .map((encoded) => JSON.stringify(encoded))

/** A hostile case: a tool, which mutation, and the arguments as JSON text or a value. */
const hostile = fc.constantFrom(...tools).chain((tool) =>
  fc.tuple(fc.constant(tool), validArguments(tool), fc.integer({ min: 0, max: mutations.length - 1 })).map(
    ([tool, text, m]) => {
      const [name, mutate] = mutations[m]!
      return { tool, name, args: mutate(JSON.parse(text), text) }
    }
  )
)

// Retries without the real backoff: valid refunds fail transiently or with NotFound and are retried. A refund
// needs approval: a person who says yes to each, so that a valid one runs its handler.
const backend = Layer.mergeAll(
  Backend.layer,
  Hooks.layer({ tool: [Hooks.approval] }),
  Layer.succeed(UserPrompt.UserPrompt, UserPrompt.UserPrompt.of({ ask: () => Effect.succeed("yes") })),
  Timing.layer({ toolRetry: Schedule.spaced("1 millis") })
)

/** The counted twin of a demo tool. */
const twin = (counted: ReadonlyArray<Tool.Any>, tool: Tool.Any): Tool.Any => counted.find((t) => t.name === tool.name)!

describe("hostile input (10x under npm run soak)", () => {
  it.live("through Invocation: invalid input never reaches a handler, valid input always decodes, no defect", () =>
    Effect.gen(function*() {
      const { runs, tools: countedTools } = counted()
      const figures = { tried: 0, defects: 0 }
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(hostile, async ({ args, tool }) => {
            figures.tried++
            const exit = await Effect.runPromiseExit(
              Invocation.run(twin(countedTools, tool), args).pipe(Effect.provide(backend)) as Effect.Effect<ToolResult>
            )
            if (!Exit.isSuccess(exit)) {
              figures.defects++
              return false
            }
            return exit.value.error !== undefined && exit.value.error.startsWith(`${tool.name}: invalid input`)
          }),
          { numRuns: scale(120, 1200) }
        )
      )
      recordPath("Invocation", figures.tried, runs.count, figures.defects)
      assert.strictEqual(runs.count, 0, `handlers run on ${figures.tried} hostile payloads`)
      assert.strictEqual(figures.defects, 0)
      // And every valid input passes the decoder and runs its handler (retries may run it again): the counter counts.
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.constantFrom(...tools).chain((tool) => validArguments(tool).map((text) => ({ tool, text }))), async ({ text, tool }) => {
            const before = runs.count
            const exit = await Effect.runPromiseExit(
              Invocation.run(twin(countedTools, tool), text).pipe(Effect.provide(backend)) as Effect.Effect<ToolResult>
            )
            return Exit.isSuccess(exit) && !(exit.value.error ?? "").includes("invalid input") && runs.count > before
          }),
          { numRuns: scale(100, 1000) }
        )
      )
    }), scale(60_000, 600_000))

  it.live("through MCP: an isError result with the error text, the handler never reached, the server still answers", () =>
    Effect.gen(function*() {
      const { runs, tools: countedTools } = counted()
      const figures = { tried: 0, defects: 0 }
      const toolkit = yield* Toolkit.make(...countedTools)
      const { client } = yield* mcpClient(toolkit, backend)
      // MCP carries arguments as an object: the object-shaped mutations apply.
      const objects = hostile.filter(({ args }) => typeof args === "object" && args !== null && !Array.isArray(args))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(objects, async ({ args, tool }) => {
            figures.tried++
            // A protocol error or a dropped connection is what a defect looks like from the client, but for
            // a body nested past the HTTP face's limit: refused from its text with a parse error that says so.
            let refusal = ""
            const result = await client.callTool({ name: tool.name, arguments: args as Record<string, unknown> }).catch(
              (error: unknown) => void (refusal = String(error))
            )
            if (result === undefined) {
              if (Json.textDeeperThan(JSON.stringify(args), Mcp.httpDefaults.maxBodyDepth)) {
                return refusal.includes(`nested deeper than ${Mcp.httpDefaults.maxBodyDepth} levels`)
              }
              figures.defects++
              return false
            }
            const text = (result.content as Array<{ text?: string }>)[0]?.text ?? ""
            return result.isError === true && text.startsWith(`${tool.name}: invalid input`) && !text.includes("    at ")
          }),
          { numRuns: scale(40, 400) }
        )
      )
      yield* Effect.promise(() => client.ping())
      recordPath("MCP", figures.tried, runs.count, figures.defects)
      assert.strictEqual(runs.count, 0)
      assert.strictEqual(figures.defects, 0)
      // The server still runs a valid call.
      const ok = yield* Effect.promise(() => client.callTool({ name: "lookup_order", arguments: { order_id: "ord-4821" } }))
      assert.deepStrictEqual([ok.isError ?? false, runs.count], [false, 1])
    }).pipe(Effect.scoped), scale(120_000, 600_000))

  it.live("through the platform: a model's hostile arguments come back as error results; the task completes", () =>
    Effect.gen(function*() {
      const { runs, tools: countedTools } = counted()
      const cases = fc.sample(hostile.filter(({ args }) => typeof args !== "string" || args.length < 100_000), scale(40, 400))
      const script: Array<LanguageModel.ScriptedTurn> = [
        { toolCalls: cases.map(({ args, tool }, i) => ({ id: `h${i}`, name: tool.name, arguments: typeof args === "string" ? args : JSON.stringify(args) })) },
        (request) => ({
          text: String(request.messages.filter((m) => m._tag === "ToolResultMessage" && m.isError).length)
        })
      ]
      const settings = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok"]])))
      const last = yield* Effect.gen(function*() {
        const served = yield* Serve.makeConfig(yield* Toolkit.make(...countedTools))
        const events = yield* Stream.runCollect(served.submitTask("hostile"))
        return [...events].pop()
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.mergeAll(
          backend,
          PlatformClient.layerTest.pipe(
            Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "agent-1"]]), maxSteps: 3 })),
            Layer.provide(LanguageModel.layerScripted(script))
          )
        ).pipe(Layer.provideMerge(settings)))
      )
      const output = last?._tag === "TaskCompleted" ? last.output : `ended with ${last?._tag}`
      recordPath("platform", cases.length, runs.count, last?._tag === "TaskCompleted" ? 0 : 1)
      assert.strictEqual(output, String(cases.length), "every hostile call came back as an error result")
      assert.strictEqual(runs.count, 0)
    }), scale(5_000, 120_000))
})
