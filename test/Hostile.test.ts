/**
 * Hostile input against every demo tool, through Invocation, through MCP (the official client) and
 * through the platform (a model emitting the arguments): valid inputs from Schema's Arbitrary, and
 * mutations of them. Invalid input never reaches a handler; nothing escapes as a defect.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, ConfigProvider, Effect, Exit, FastCheck as fc, Layer, Schema, Stream } from "effect"
import * as Backend from "../src/demo/Backend.js"
import { mcpClient } from "./support/mcpHttp.js"
import * as DemoTools from "../src/demo/tools.js"
import {
  Hooks,
  Invocation,
  LanguageModel,
  PlatformClient,
  PlatformServer,
  Serve,
  type Tool,
  Toolkit,
  UserPrompt
} from "../src/index.js"

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

const tools = DemoTools.tools as ReadonlyArray<Tool.Any>

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

/** Counts the calls that get past decoding (hooks run after it): none may for invalid input. */
const counter = () => {
  const reached = { count: 0 }
  const layer = Hooks.layer({ tool: [(_, proceed) => Effect.suspend(() => (reached.count++, proceed))] })
  return { reached, layer }
}

const backend = Layer.merge(Backend.layer, UserPrompt.layerTest([]))

describe("hostile input (short run; the long one is a later soak)", () => {
  it.live("through Invocation: invalid input never reaches a handler, valid input always decodes, no defect", () =>
    Effect.gen(function*() {
      const { layer, reached } = counter()
      let cases = 0
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(hostile, async ({ args, tool }) => {
            cases++
            const exit = await Effect.runPromiseExit(
              Invocation.run(tool, args).pipe(Effect.provide(Layer.merge(layer, backend))) as Effect.Effect<Invocation.ToolResult>
            )
            if (!Exit.isSuccess(exit)) return false
            return exit.value.error !== undefined && exit.value.error.startsWith(`${tool.name}: invalid input`)
          }),
          { numRuns: 120 }
        )
      )
      assert.strictEqual(reached.count, 0, `handlers reached by ${cases} hostile payloads`)
      // And every valid input passes the decoder.
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.constantFrom(...tools).chain((tool) => validArguments(tool).map((text) => ({ tool, text }))), async ({ text, tool }) => {
            const exit = await Effect.runPromiseExit(
              Invocation.run(tool, text).pipe(Effect.provide(backend)) as Effect.Effect<Invocation.ToolResult>
            )
            return Exit.isSuccess(exit) && !(exit.value.error ?? "").includes("invalid input")
          }),
          { numRuns: 100 }
        )
      )
    }), 60_000)

  it.live("through MCP: an isError result with the S5 text, the handler never reached, the server still answers", () =>
    Effect.gen(function*() {
      const { layer, reached } = counter()
      const toolkit = yield* Toolkit.make(...DemoTools.tools)
      const { client } = yield* mcpClient(toolkit, Layer.merge(layer, backend))
      // MCP carries arguments as an object: the object-shaped mutations apply.
      const objects = hostile.filter(({ args }) => typeof args === "object" && args !== null && !Array.isArray(args))
      yield* Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(objects, async ({ args, tool }) => {
            const result = await client.callTool({ name: tool.name, arguments: args as Record<string, unknown> })
            const text = (result.content as Array<{ text?: string }>)[0]?.text ?? ""
            return result.isError === true && text.startsWith(`${tool.name}: invalid input`) && !text.includes("    at ")
          }),
          { numRuns: 40 }
        )
      )
      yield* Effect.promise(() => client.ping())
      assert.strictEqual(reached.count, 0)
    }).pipe(Effect.scoped), 120_000)

  it.live("through the platform: a model's hostile arguments come back as error results; the task completes", () =>
    Effect.gen(function*() {
      const { layer, reached } = counter()
      const cases = fc.sample(hostile.filter(({ args }) => typeof args !== "string" || args.length < 100_000), 40)
      const script: Array<LanguageModel.ScriptedTurn> = [
        { toolCalls: cases.map(({ args, tool }, i) => ({ id: `h${i}`, name: tool.name, arguments: typeof args === "string" ? args : JSON.stringify(args) })) },
        (request) => ({
          text: String(request.messages.filter((m) => m._tag === "ToolResultMessage" && m.isError).length)
        })
      ]
      const settings = Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok"]])))
      const output = yield* Effect.gen(function*() {
        const served = yield* Serve.make(yield* Toolkit.make(...DemoTools.tools))
        const events = yield* Stream.runCollect(served.submitTask("hostile"))
        const last = [...events].pop()
        return last?._tag === "TaskCompleted" ? last.output : `ended with ${last?._tag}`
      }).pipe(
        Effect.scoped,
        // The platform runs its tasks in its own context: the counting hook sees the serving side only.
        Effect.provide(Layer.mergeAll(
          layer,
          backend,
          PlatformClient.layerTest.pipe(
            Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "agent-1"]]), maxSteps: 3 })),
            Layer.provide(LanguageModel.layerScripted(script))
          )
        ).pipe(Layer.provideMerge(settings)))
      )
      assert.strictEqual(output, String(cases.length), "every hostile call came back as an error result")
      assert.strictEqual(reached.count, 0)
    }))
})
