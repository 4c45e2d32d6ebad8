/**
 * Guardrails (`Guardrail.ts`): an agent's input guardrails check the prompt before the first model turn (or beside
 * it), its output guardrails the final answer; a trip ends the run with `GuardrailTripped`. A tool's guardrails are
 * a tool hook: a tripped argument check keeps the handler from running.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option, Schema, TestClock } from "effect"
import { Agent, Guardrail, Hooks, LanguageModel, Tool } from "../src/index.js"
import * as GuardrailsExample from "../examples/guardrails.js"
import { recordingTracer } from "./support/recordingTracer.js"

const requests = Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)

/** The error a run failed with. */
const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  if (Option.isNone(failure)) throw new Error(`the run should have failed: ${Exit.isSuccess(exit) ? "it completed" : Cause.pretty(exit.cause)}`)
  return failure.value
}

/** A refund tool whose handler counts its runs. */
const refundTool = (runs: Array<number>) =>
  Tool.make("refund", {
    description: "Refund an amount.",
    input: { amount: Schema.Number },
    output: Schema.String,
    timeout: "10 seconds"
  }, ({ amount }) => Effect.sync(() => (runs.push(amount), `refunded ${amount}`)))

const noSecrets = Guardrail.make("no_secrets", (text) =>
  Effect.succeed(text.includes("sk-") ? Guardrail.trip("the prompt holds an API key") : Guardrail.pass))

describe("Guardrails of an agent", () => {
  it.effect("an input guardrail trips before any model request: GuardrailTripped names it and its reason", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [], guardrails: { input: [noSecrets] } })
      const tripped = failureOf(yield* Effect.exit(Agent.run(agent, "my key is sk-123")))
      assert.instanceOf(tripped, Guardrail.GuardrailTripped)
      assert.deepStrictEqual([tripped.guardrail, tripped.stage, tripped.reason], ["no_secrets", "input", "the prompt holds an API key"])
      assert.strictEqual(tripped.message, "the input guardrail no_secrets tripped: the prompt holds an API key")
      assert.strictEqual((yield* requests).length, 0)
      // A prompt that passes runs as any other.
      assert.strictEqual((yield* Agent.run(agent, "hello")).output, "hi")
      assert.strictEqual((yield* requests).length, 1)
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: "hi" }]))))

  it.effect("an input guardrail beside the first turn: a trip ends the run, and the turn's calls never run", () =>
    Effect.gen(function*() {
      const runs: Array<number> = []
      const slow = Guardrail.make("slow_check", () => Effect.as(Effect.sleep("10 millis"), Guardrail.trip("refunds are closed")), {
        mode: "concurrent"
      })
      const agent = Agent.make({ tools: [refundTool(runs)], guardrails: { input: [slow] } })
      const fiber = yield* Effect.fork(Effect.exit(Agent.run(agent, "refund 5")))
      yield* Effect.yieldNow()
      yield* TestClock.adjust("10 millis")
      const tripped = failureOf(yield* Fiber.join(fiber))
      assert.deepStrictEqual([tripped._tag, (tripped as Guardrail.GuardrailTripped).reason], ["GuardrailTripped", "refunds are closed"])
      // The model was asked (beside the check), but its call did not run.
      assert.strictEqual((yield* requests).length, 1)
      assert.deepStrictEqual(runs, [])
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ toolCalls: [{ id: "c1", name: "refund", arguments: "{\"amount\":5}" }] }]))))

  it.effect("an output guardrail trips on the final answer: the run fails instead of returning it", () =>
    Effect.gen(function*() {
      const noPromises = Guardrail.make("no_promises", (text) =>
        Effect.succeed(/guarantee/i.test(text) ? Guardrail.trip("the answer promises an outcome") : Guardrail.pass))
      const agent = Agent.make({ tools: [], guardrails: { output: [noPromises] } })
      const tripped = failureOf(yield* Effect.exit(Agent.run(agent, "will it arrive?")))
      assert.instanceOf(tripped, Guardrail.GuardrailTripped)
      assert.deepStrictEqual([tripped.guardrail, tripped.stage, tripped.reason], ["no_promises", "output", "the answer promises an outcome"])
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: "I guarantee it arrives tomorrow." }]))))

  it.effect("an output guardrail with onTrip retry: the model reads the reason and answers again", () =>
    Effect.gen(function*() {
      const short = Guardrail.make("short", (text) => Effect.succeed(text.length > 20 ? Guardrail.trip("over 20 characters") : Guardrail.pass), {
        onTrip: "retry"
      })
      const agent = Agent.make({ tools: [], guardrails: { output: [short] } })
      const result = yield* Agent.run(agent, "status?")
      assert.strictEqual(result.output, "Shipped.")
      assert.strictEqual(result.steps, 2)
      const [, second] = yield* requests
      const last = second!.messages[second!.messages.length - 1]!
      assert.deepStrictEqual(last, {
        _tag: "UserMessage",
        text: "Your answer was refused by the guardrail short: over 20 characters. Answer again."
      })
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: "It shipped on Monday from the depot." }, { text: "Shipped." }]))))

  it.effect("each check is a span under the run's, saying what it checked and whether it tripped", () =>
    Effect.gen(function*() {
      const { spans, tracer } = recordingTracer()
      const polite = Guardrail.make("polite", () => Effect.succeed(Guardrail.pass))
      const agent = Agent.make({ name: "support", tools: [], guardrails: { input: [noSecrets], output: [polite] } })
      yield* Agent.run(agent, "hello").pipe(Effect.withTracer(tracer))
      const run = spans.find((span) => span.name === "invoke_agent support")!
      const checks = spans.filter((span) => span.name.startsWith("guardrail "))
      assert.deepStrictEqual(checks.map((span) => [
        span.name,
        span.attributes.get("agent_tools.guardrail.stage"),
        span.attributes.get("agent_tools.guardrail.tripped"),
        span.parentSpanId === run.spanId
      ]), [["guardrail no_secrets", "input", false, true], ["guardrail polite", "output", false, true]])
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: "hi" }]))))

  it.effect("a check that fails trips (fail closed), in its error's words", () =>
    Effect.gen(function*() {
      const broken = Guardrail.make("broken", () => Effect.fail("classifier unreachable"))
      const agent = Agent.make({ tools: [], guardrails: { input: [broken] } })
      const tripped = failureOf(yield* Effect.exit(Agent.run(agent, "hello")))
      assert.deepStrictEqual([tripped._tag, (tripped as Guardrail.GuardrailTripped).reason], ["GuardrailTripped", "the check failed: classifier unreachable"])
      assert.strictEqual((yield* requests).length, 0)
    }).pipe(Effect.provide(LanguageModel.layerScripted([{ text: "hi" }]))))
})

describe("Guardrails of a tool (a tool hook)", () => {
  it.effect("a tool argument guardrail keeps the handler from running; the model reads why", () =>
    Effect.gen(function*() {
      const runs: Array<number> = []
      const agent = Agent.make({ tools: [refundTool(runs)] })
      const result = yield* Agent.run(agent, "refund 500")
      assert.deepStrictEqual(runs, [])
      assert.strictEqual(result.toolCalls[0]?.result.error, "refund: guardrail refund_limit tripped: 500 is over the limit of 100")
      const [, second] = yield* requests
      assert.deepStrictEqual(second!.messages[2], {
        _tag: "ToolResultMessage",
        toolCallId: "c1",
        name: "refund",
        content: "refund: guardrail refund_limit tripped: 500 is over the limit of 100",
        isError: true
      })
    }).pipe(Effect.provide(Layer.merge(
      LanguageModel.layerScripted([{ toolCalls: [{ id: "c1", name: "refund", arguments: "{\"amount\":500}" }] }, { text: "refused" }]),
      Hooks.layer({
        tool: [Guardrail.tool({
          name: "refund_limit",
          tools: ["refund"],
          input: (call) => {
            const { amount } = call.input as { readonly amount: number }
            return Effect.succeed(amount > 100 ? Guardrail.trip(`${amount} is over the limit of 100`) : Guardrail.pass)
          }
        })]
      })
    ))))

  it.effect("a tool result guardrail: the handler ran, the model reads the trip instead of the result", () =>
    Effect.gen(function*() {
      const runs: Array<number> = []
      const agent = Agent.make({ tools: [refundTool(runs)] })
      const result = yield* Agent.run(agent, "refund 5")
      assert.deepStrictEqual(runs, [5])
      assert.strictEqual(result.toolCalls[0]?.result.error, "refund: guardrail no_amounts tripped: the result names an amount")
    }).pipe(Effect.provide(Layer.merge(
      LanguageModel.layerScripted([{ toolCalls: [{ id: "c1", name: "refund", arguments: "{\"amount\":5}" }] }, { text: "ok" }]),
      Hooks.layer({
        tool: [Guardrail.tool({
          name: "no_amounts",
          output: (_, result) => Effect.succeed(/\d/.test(String(result.value)) ? Guardrail.trip("the result names an amount") : Guardrail.pass)
        })]
      })
    ))))
})

describe("Guardrails: the documented example", () => {
  it.effect("the prompt with a key trips before any request; the promising answer is asked again", () =>
    Effect.gen(function*() {
      const { output, tripped } = yield* GuardrailsExample.main
      assert.strictEqual(tripped, "the input guardrail no_secrets tripped: the prompt holds an API key")
      assert.strictEqual(output, "It ships today.")
    }))
})
