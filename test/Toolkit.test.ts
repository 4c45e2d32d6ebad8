import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Schema } from "effect"
import { Agent, Invocation, LanguageModel, Tool, ToolContext, Toolkit } from "../src/index.js"
import { samples } from "./fixtures/sampleTools.js"

const tool = (name: string, overrides: Partial<Tool.Options<any, unknown>> = {}) =>
  Tool.make(name, { description: "A tool.", input: {}, timeout: "1 second", ...overrides }, () => Effect.void)

/** The violations of `Toolkit.make(...tools)`, as `tool/rule` pairs; fails the test if it succeeded. */
const violationsOf = (...tools: ReadonlyArray<Tool.Any>) =>
  Effect.gen(function*() {
    const exit = yield* Effect.exit(Toolkit.make(...tools))
    if (Exit.isSuccess(exit)) return assert.fail("expected a ManifestError")
    const error = yield* Effect.flip(exit)
    assert.strictEqual(error._tag, "ManifestError")
    return error.violations.map((v) => `${v.tool ?? "*"}/${v.rule}`)
  })

describe("Toolkit.make", () => {
  it.effect("accepts valid tools and builds definitions and a manifest", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(...samples)
      assert.deepStrictEqual(toolkit.definitions.map((d) => d.name), ["lookup_order", "issue_refund", "ship_parcel"])
      assert.strictEqual(toolkit.byName.get("issue_refund"), samples[1])
      const refund = toolkit.manifest[1]!
      assert.strictEqual(refund.timeoutMillis, 30_000)
      assert.strictEqual(refund.retries, 2)
      assert.strictEqual(refund.idempotent, true)
      assert.strictEqual(refund.parameters, Tool.jsonSchema(samples[1]).parameters)
    }))

  it.effect("at most 64 tools", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* violationsOf(...Array.from({ length: 65 }, (_, i) => tool(`t${i}`))),
        ["*/max-tools"]
      )
      yield* Toolkit.make(...Array.from({ length: 64 }, (_, i) => tool(`t${i}`)))
    }))

  it.effect("names match ^[a-zA-Z0-9_-]+$", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* violationsOf(tool("has space")), ["has space/name-pattern"])
      assert.deepStrictEqual(yield* violationsOf(tool("")), ["/name-pattern"])
      assert.deepStrictEqual(yield* violationsOf(tool("dot.ted")), ["dot.ted/name-pattern"])
    }))

  it.effect("names have at most 64 characters", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* violationsOf(tool("a".repeat(65))), [`${"a".repeat(65)}/name-length`])
      yield* Toolkit.make(tool("a".repeat(64)))
    }))

  it.effect("names are unique", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* violationsOf(tool("same"), tool("other"), tool("same")), ["same/name-unique"])
    }))

  it.effect("reserved names are refused", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* violationsOf(...["exec_agent", "finish", "list_agents", "list_context_history", "recall_context"].map(
          (name) => tool(name)
        )),
        [
          "exec_agent/name-reserved",
          "finish/name-reserved",
          "list_agents/name-reserved",
          "list_context_history/name-reserved",
          "recall_context/name-reserved"
        ]
      )
    }))

  it.effect("descriptions have 1 to 1024 characters", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* violationsOf(tool("empty", { description: "" })), ["empty/description-length"])
      assert.deepStrictEqual(
        yield* violationsOf(tool("long", { description: "x".repeat(1025) })),
        ["long/description-length"]
      )
      yield* Toolkit.make(tool("max", { description: "x".repeat(1024) }))
    }))

  it.effect("timeouts are > 0 and <= 3600 s", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* violationsOf(tool("zero", { timeout: 0 })), ["zero/timeout-range"])
      assert.deepStrictEqual(yield* violationsOf(tool("long", { timeout: "3601 seconds" })), ["long/timeout-range"])
      assert.deepStrictEqual(
        yield* violationsOf(tool("garbled", { timeout: "soon" as any })),
        ["garbled/timeout-range"]
      )
      yield* Toolkit.make(tool("hour", { timeout: "1 hour" }))
    }))

  it.effect("retries are a whole number >= 0", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* violationsOf(tool("neg", { retries: -1 })), ["neg/retries-whole"])
      assert.deepStrictEqual(yield* violationsOf(tool("frac", { retries: 1.5 })), ["frac/retries-whole"])
    }))

  it.effect("permanent is an array of non-empty strings, retryable a function, each naming tool and field", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Toolkit.make(
        tool("one_tag", { permanent: "NotFound" as any }),
        tool("empty_tag", { permanent: ["NotFound", ""] }),
        tool("number_tag", { permanent: [404] as any }),
        tool("null_tags", { permanent: null as any }),
        tool("flag", { retryable: true as any }),
        tool("list", { retryable: ["Busy"] as any })
      ))
      // Not Effect.flip alone: a toolkit in the failure report takes vitest minutes to print.
      if (Exit.isSuccess(exit)) return assert.fail("expected a ManifestError")
      const error = yield* Effect.flip(exit)
      const tags = (name: string, got: string) =>
        `${name}/permanent-tags: "${name}": permanent must be an array of non-empty strings ` +
        `(the _tags never retried), got ${got}`
      const predicate = (name: string, got: string) =>
        `${name}/retryable-function: "${name}": retryable must be a function (error) => boolean, got ${got}`
      assert.deepStrictEqual(error.violations.map((v) => `${v.tool}/${v.rule}: ${v.message}`), [
        tags("one_tag", "\"NotFound\""),
        tags("empty_tag", "[1] = \"\""),
        tags("number_tag", "[0] = 404"),
        tags("null_tags", "null"),
        predicate("flag", "true"),
        predicate("list", "an array")
      ])
      const toolkit = yield* Toolkit.make(tool("rules", { permanent: ["NotFound"], retryable: () => true, retries: 2 }))
      // The rules run in the serving process: the manifest the platform receives carries neither.
      assert.deepStrictEqual(Object.keys(toolkit.manifest[0]!).sort(), [
        "description",
        "idempotent",
        "name",
        "needsApproval",
        "output",
        "parameters",
        "retries",
        "timeoutMillis"
      ])
    }))

  it.effect("input and output Schemas must be JSON-representable, naming the field", () =>
    Effect.gen(function*() {
      const mapInput = Tool.make("map_input", {
        description: "Takes a Map.",
        input: { options: Schema.Struct({ table: Schema.MapFromSelf({ key: Schema.String, value: Schema.Number }) }) },
        timeout: "1 second"
      }, () => Effect.void)
      class Gate {
        constructor(readonly id: string) {}
      }
      const instanceOutput = Tool.make("instance_output", {
        description: "Returns a class instance.",
        input: {},
        output: Schema.Struct({ gate: Schema.instanceOf(Gate) }),
        timeout: "1 second"
      }, () => Effect.succeed({ gate: new Gate("g1") }))
      const notObject = Tool.make("not_object", {
        description: "Input is a string.",
        input: Schema.String,
        timeout: "1 second"
      }, () => Effect.void)
      const error = yield* Effect.flip(Toolkit.make(mapInput, instanceOutput, notObject))
      assert.deepStrictEqual(error.violations.map((v) => `${v.tool}/${v.rule}`), [
        "map_input/input-json",
        "instance_output/output-json",
        "not_object/input-object"
      ])
      assert.match(error.violations[0]!.message, /^"map_input": input field options\.table \(Map<string, number>\)/)
      assert.match(error.violations[1]!.message, /^"instance_output": output field gate/)
    }))

  it.effect("reports five broken rules at once, each naming its tool", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Toolkit.make(
        tool("bad name"),
        tool("finish"),
        tool("quiet", { description: "" }),
        tool("slow", { timeout: "2 hours" }),
        tool("twice", { retries: -2 })
      ))
      assert.deepStrictEqual(error.violations.map((v) => `${v.tool}/${v.rule}`), [
        "bad name/name-pattern",
        "finish/name-reserved",
        "quiet/description-length",
        "slow/timeout-range",
        "twice/retries-whole"
      ])
      for (const violation of error.violations) assert.include(violation.message, JSON.stringify(violation.tool))
      assert.strictEqual(error.message.split("; ").length, 5)
    }))
})

class Orders extends Context.Tag("test/Orders")<Orders, { readonly status: (id: string) => Effect.Effect<string> }>() {}

/** Reads `Orders` and the call's `ToolContext`: `<status> (<call id>)`. */
const lookupOrder = Tool.make("lookup_order", {
  description: "Looks an order up.",
  input: { order_id: Schema.String },
  output: Schema.String,
  timeout: "5 seconds",
  idempotent: true
}, ({ order_id }) =>
  Effect.gen(function*() {
    const status = yield* (yield* Orders).status(order_id)
    const call = yield* ToolContext.ToolContext
    return `${status} (${call.toolCallId})`
  }))

const today = Tool.make("today", { description: "Today's date.", input: {}, timeout: "1 second" }, async () => "2026-01-02")

const orders = (status: string) => Context.make(Orders, { status: (id) => Effect.succeed(`${id} ${status}`) })

describe("Toolkit.provide, Toolkit.closed", () => {
  it.effect("provide: each copy keeps its tool's fields but the handler, which gets the services and the call's own", () =>
    Effect.gen(function*() {
      const toolkit = yield* Toolkit.make(lookupOrder, today)
      const provided = Toolkit.provide(toolkit, orders("shipped"))
      assert.deepStrictEqual(provided.tools.map((t) => t.name), ["lookup_order", "today"])
      assert.strictEqual(provided.definitions, toolkit.definitions)
      assert.strictEqual(provided.manifest, toolkit.manifest)
      provided.tools.forEach((copy: Tool.Any, i) => {
        const own: Tool.Any = toolkit.tools[i]!
        assert.notStrictEqual(copy.handler, own.handler)
        for (const key of Reflect.ownKeys(own).filter((key) => key !== "handler")) {
          assert.strictEqual(Reflect.get(copy, key), Reflect.get(own, key), String(key))
        }
        assert.strictEqual(provided.byName.get(copy.name), copy)
      })
      // No Orders here: the toolkit has it. The call's ToolContext reaches the handler.
      const dispatcher = Invocation.dispatcher(provided)
      const found = yield* dispatcher.run("lookup_order", { order_id: "o1" }, { toolCallId: "c7" })
      assert.strictEqual(found.value, "o1 shipped (c7)")
      assert.strictEqual((yield* dispatcher.run("today", {})).value, "2026-01-02")
    }))

  it.effect("a context captured inside a call keeps none of its call services: the handler sees its own call", () =>
    Effect.gen(function*() {
      const provided = yield* Toolkit.closed(Toolkit.make(lookupOrder)).pipe(
        Effect.provide(orders("packed")),
        Effect.provideService(ToolContext.ToolContext, ToolContext.makeCall())
      )
      const found = yield* Invocation.dispatcher(provided).run("lookup_order", { order_id: "o2" }, { toolCallId: "c9" })
      assert.strictEqual(found.value, "o2 packed (c9)")
    }))

  it.effect("a tool the platform owns stays its own, provided", () =>
    Effect.gen(function*() {
      const owned = Toolkit.ownedByPlatform(Tool.make("list_agents", { description: "Lists.", input: {}, timeout: "1 second" }, () => Effect.void))
      const provided = Toolkit.provide(yield* Toolkit.make(owned), orders("shipped"))
      assert.deepStrictEqual(Toolkit.validate(provided.tools), [])
      assert.notStrictEqual(provided.tools[0], owned)
    }))

  it.effect("closed in a layer: built once, given to Agent.make as a toolkit, a run reads the layer's service", () => {
    let built = 0
    class SupportTools extends Effect.Service<SupportTools>()("test/SupportTools", {
      effect: Toolkit.closed(Toolkit.make(lookupOrder))
    }) {}
    const ordersLayer = Layer.effect(Orders, Effect.sync(() => (built++, Context.get(orders("delivered"), Orders))))
    const turn = LanguageModel.layerScripted([
      { toolCalls: [{ id: "c1", name: "lookup_order", arguments: JSON.stringify({ order_id: "o3" }) }] },
      { text: "done" }
    ], { repeat: true })
    return Effect.gen(function*() {
      const agent = Agent.make({ toolkit: yield* SupportTools, instructions: "Support." })
      const first = yield* Agent.run(agent, "where is o3?")
      const second = yield* Agent.run(agent, "and now?")
      assert.strictEqual(first.output, "done")
      assert.deepStrictEqual([first, second].map((run) => run.toolCalls[0]!.result.value), ["o3 delivered (c1)", "o3 delivered (c1)"])
      // The layer was built once: the toolkit took its Orders then, not at each run.
      assert.strictEqual(built, 1)
    }).pipe(Effect.provide(Layer.merge(SupportTools.Default.pipe(Layer.provide(ordersLayer)), turn)))
  })
})
