/**
 * `agent-tools run "<prompt>"`: an agent run in this process with the demo tools. Imports Effect module
 * by module, as main.ts does (start-up time); the rest when the command runs.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import { runCommand } from "./command.js"
import { load, loadDemo, loadModel } from "./load.js"
import { chooseModel, modelOption } from "./options.js"
import { plural } from "./report.js"

/**
 * The `run` command as one Layer: an agent run with the demo tools, given the model (`--model`, or the one the
 * settings choose), the demo's backend and the approval hook (a person at the terminal, when stdin is one).
 */
export const runLayer = (options: { readonly model: Option.Option<string>; readonly prompt: string }) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const chosen = yield* chooseModel(options.model)
    const [[Agent, Hooks, UserPrompt], { DemoTools, backendLayer }, modelLayer] = yield* Effect.all([
      load(() => import("../../Agent.js"), () => import("../../Hooks.js"), () => import("../../UserPrompt.js")),
      loadDemo,
      loadModel(chosen.model)
    ], { concurrency: "unbounded" })
    yield* Console.log(`model: ${chosen.model}${chosen.note === "" ? "" : ` (${chosen.note})`}`)
    // A call that needs approval (issue_refund) asks on the terminal; with no terminal to ask, it is refused.
    const interactive = process.stdin.isTTY === true
    if (!interactive) yield* Console.log("stdin is not a terminal: no one can approve a refund here, so one is refused")
    const approval = Layer.merge(
      Hooks.layer({ tool: [Hooks.approval] }),
      interactive ? UserPrompt.layerTerminal : Layer.empty
    )
    const agent = Agent.make({ name: "demo", tools: DemoTools.all })
    const asked = Effect.gen(function*() {
      const result = yield* Agent.run(agent, options.prompt)
      for (const call of result.toolCalls) {
        yield* Console.log(
          `${call.result.success ? "✓" : "✗"} ${call.name} ${JSON.stringify(call.input)}${call.cached ? " (reused)" : ""}`
        )
      }
      yield* Console.log(`\nanswer: ${result.output}\n(${plural(result.steps, "model turn")}, ${plural(result.toolCalls.length, "tool call")})`)
    })
    return Layer.effectDiscard(asked).pipe(Layer.provide(Layer.mergeAll(modelLayer, backendLayer, approval)))
  }))

/** The `run` command. */
export const run = Command.make("run", {
  prompt: Args.text({ name: "prompt" }).pipe(Args.withDescription("what to ask the agent")),
  model: modelOption
}, (options) => runCommand(runLayer(options))).pipe(Command.withDescription("Run an agent in this process with the demo tools"))
