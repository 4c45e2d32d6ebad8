/**
 * What a task costs Effect's own runtime on the embedded platform and its serving process together, counted rather
 * than timed (docs/benchmarks.md, "The embedded platform's CPU a call, counted"): the fibers made and the Effect steps
 * run, as a `Supervisor` sees them, for tasks of two calls submitted and served over the platform's WebSocket in this
 * process, run for their output and followed event by event as a Stream.
 * The CPU a call moves with the machine and is the bench's to print; these counts do not, and much of that CPU is the
 * runtime running these steps (in a profile of the serving process, 45 % of its busy time is Effect's run loop with
 * no function of ours on the stack). A change that makes a task cost more fibers or steps fails here, on any machine.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger, LogLevel, RuntimeFlags, RuntimeFlagsPatch, Schema, Stream, Supervisor } from "effect"
import { LanguageModel, Tool, Toolkit } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient, Serve } from "../../src/exports/serve.js"
import { script } from "../support/benchTask.js"
import { clientLayer } from "../support/platform.js"

/** Counts the fibers started and the steps run under it. */
class Work extends Supervisor.AbstractSupervisor<{ readonly fibers: number; readonly steps: number }> {
  fibers = 0
  steps = 0
  value = Effect.sync(() => ({ fibers: this.fibers, steps: this.steps }))
  override onStart() {
    this.fibers++
  }
  override onEffect() {
    this.steps++
  }
}

const echo = Tool.make("echo", {
  description: "Echoes n.",
  input: { n: Schema.Number },
  output: Schema.Number,
  timeout: "30 seconds"
}, ({ n }) => Effect.succeed(n))

const platform = PlatformServer.layerWebSocket({ port: 0 }).pipe(
  Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok-1", "agent-1"]]) })),
  Layer.provide(LanguageModel.layerScripted(script, { perConversation: true, keepRequests: false }))
)

/** How the serving process submits a task: for its output alone, or following its every event as a Stream. */
const submitters = {
  output: (served: Serve.Serve["Type"]) => served.runTask("go"),
  events: (served: Serve.Serve["Type"]) => Stream.runDrain(served.submitTask("go"))
}

/** Tasks run one after another, after `warm` not counted: the fibers and steps a task, on average. */
const perTask = (
  work: Work,
  submit: (served: Serve.Serve["Type"]) => Effect.Effect<unknown, unknown>,
  warm: number,
  counted: number
) =>
  Effect.gen(function*() {
    const url = yield* Effect.provide(PlatformServer.url, yield* Layer.build(platform))
    const client = Context.get(yield* Layer.build(clientLayer({ url }, Layer.empty)), PlatformClient.PlatformClient)
    const served = yield* Serve.makeConfig(yield* Toolkit.make(echo)).pipe(
      Effect.provideService(PlatformClient.PlatformClient, client)
    )
    const tasks = (count: number) => Effect.repeatN(submit(served), count - 1)
    yield* tasks(warm)
    const before = yield* work.value
    yield* tasks(counted)
    const after = yield* work.value
    return { fibers: (after.fibers - before.fibers) / counted, steps: (after.steps - before.steps) / counted }
  }).pipe(
    Effect.scoped,
    // As the bench's platform runs: a line at each task's end is a fiber and its steps, not the platform's work.
    Logger.withMinimumLogLevel(LogLevel.Warning),
    Effect.supervised(work),
    Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
  )

describe("what a task costs the runtime, the embedded platform and its serving process together", () => {
  // When written, the same in every run: run for its output 8 fibers and 630 steps a task; its every event followed as
  // a Stream, 10 and 1,279 (Effect's own Stream runner draining a stream of three chunks is about 550 steps). One
  // fiber more a task, or a tenth more steps, fails.
  it.live("a task of two calls run for its output: at most 8.5 fibers and 690 Effect steps", () =>
    Effect.gen(function*() {
      const { fibers, steps } = yield* perTask(new Work(), submitters.output, 20, 40)
      assert.isAtMost(fibers, 8.5, `fibers a task: ${fibers}`)
      assert.isAtMost(steps, 690, `Effect steps a task: ${steps}`)
      // Counted at all: the supervisor saw the platform's fibers and the serving process's.
      assert.isAtLeast(fibers, 2, `fibers a task: ${fibers}`)
      assert.isAtLeast(steps, 300, `Effect steps a task: ${steps}`)
    }), 30_000)

  it.live("a task of two calls, its every event followed as a Stream: at most 10.5 fibers and 1,405 Effect steps", () =>
    Effect.gen(function*() {
      const { fibers, steps } = yield* perTask(new Work(), submitters.events, 20, 40)
      assert.isAtMost(fibers, 10.5, `fibers a task: ${fibers}`)
      assert.isAtMost(steps, 1_405, `Effect steps a task: ${steps}`)
      assert.isAtLeast(steps, 300, `Effect steps a task: ${steps}`)
    }), 30_000)
})
