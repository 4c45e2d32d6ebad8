/**
 * Answers forged by another connection of the same agent (design: Hostile clients): an answer is
 * taken only from the connection its call was delivered to. One suite, run against the embedded
 * platform (test/platform/Tenants.test.ts) and a runner of a cluster (test/platform/HostileCluster.test.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { type LanguageModel } from "../../src/index.js"
import { type Protocol } from "../../src/exports/protocol.js"
import { PlatformClient } from "../../src/exports/serve.js"
import { ToolResult } from "../../src/ToolResult.js"
import { record } from "./figures.js"
import { holdEntry, type MakePlatform, policy, takeUntil } from "./hostileWireSuite.js"
import { clientLayer, resultsText } from "./platform.js"

const agent = { agentId: "agent-1", processId: "p1" }

const call = (id: string, name: string): LanguageModel.ToolCall => ({ id, name, arguments: "{}" })

/** Two tasks one after the other, each: one call of `hold`, then the results it read as its output. */
const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [
  { toolCalls: [call("a", "hold")] },
  (request) => ({ text: resultsText(request) }),
  { toolCalls: [call("a", "hold")] },
  (request) => ({ text: resultsText(request) })
]

/** The last event of `seen`: its tag and output. */
const ending = (seen: ReadonlyArray<Protocol.TaskEvent>) => {
  const last = seen[seen.length - 1] as { readonly _tag: string; readonly output?: string } | undefined
  return [last?._tag, last?.output]
}

/** The suite against the platforms `platform` makes; `mode` names them in the test names and figures. */
export const forgedAnswerSuite = (mode: string, platform: MakePlatform) =>
  describe(`answers from another connection, ${mode} (design: Hostile clients)`, () => {
    it.live("an answer from another connection of the same agent is ignored; the model reads the real one", () =>
      Effect.gen(function*() {
        const url = yield* platform(script)
        const serving = yield* Layer.build(clientLayer({ url }, policy))
        const forger = yield* Layer.build(clientLayer({ url }, policy))
        const answer = (taskId: string, text: string) =>
          Effect.flatMap(PlatformClient.PlatformClient, (c) =>
            c.completeToolCall({ ...agent, results: [{ taskId, toolCallId: "a", result: new ToolResult(text, undefined) }] }))
        const submit = (prompt: string) =>
          Effect.flatMap(PlatformClient.PlatformClient, (c) => c.submitTask({ ...agent, prompt, events: "calls" }))
        yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.register({ ...agent, manifest: [holdEntry], manifestHash: "h" })).pipe(Effect.provide(serving))

        const submitted = yield* submit("go").pipe(Effect.provide(serving))
        const seen: Array<Protocol.TaskEvent> = []
        yield* takeUntil(submitted, seen, (e) => e._tag === "ToolCallRequested")
        const taskId = seen[0]!.taskId
        // The forger, with the same token, answers first; the serving process, to which the call was delivered, after.
        yield* answer(taskId, "forged").pipe(Effect.provide(forger))
        yield* answer(taskId, "real").pipe(Effect.provide(serving))
        yield* takeUntil(submitted, seen, () => false)
        assert.deepStrictEqual(ending(seen), ["TaskCompleted", "a:\"real\""])

        // Taken over by an attach from the other connection: the answers are that connection's now.
        const second = yield* submit("again").pipe(Effect.provide(serving))
        const seenSecond: Array<Protocol.TaskEvent> = []
        yield* takeUntil(second, seenSecond, (e) => e._tag === "ToolCallRequested")
        const secondTaskId = seenSecond[0]!.taskId
        const attached = yield* Effect.flatMap(PlatformClient.PlatformClient, (c) =>
          c.attachTask({ ...agent, taskId: secondTaskId, events: "calls" })).pipe(Effect.provide(forger))
        const seenAttached: Array<Protocol.TaskEvent> = []
        yield* takeUntil(attached, seenAttached, (e) => e._tag === "ToolCallRequested")
        yield* answer(secondTaskId, "stale").pipe(Effect.provide(serving))
        yield* answer(secondTaskId, "from the attach").pipe(Effect.provide(forger))
        yield* takeUntil(attached, seenAttached, () => false)
        assert.deepStrictEqual(ending(seenAttached), ["TaskCompleted", "a:\"from the attach\""])
        record({
          suite: "hostile tenant",
          measure: `${mode}: a second connection with the same token answers a call first: what the model reads`,
          value: "the real answer (the forged one ignored); after an attach elsewhere, the attach's",
          expected: "the real answer"
        })
      }).pipe(Effect.scoped), 60_000)
  })
