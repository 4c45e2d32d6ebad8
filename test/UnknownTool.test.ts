/**
 * One answer to an unknown tool on every face (design: Error text): the agent loop, a served call and
 * MCP's `tools/call` give the same text, `Toolkit.unknownTool`'s, listing the tools there are.
 */
import { assert, describe, it } from "@effect/vitest"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import { ConfigProvider, Deferred, Effect, Layer, Mailbox, Schema } from "effect"
import { Agent, LanguageModel, Tool, Toolkit } from "../src/index.js"
import { Protocol } from "../src/exports/protocol.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"
import { mcpClient } from "./support/mcpHttp.js"

const lookup = Tool.make(
  "lookup",
  { description: "Look up.", input: { id: Schema.String }, timeout: "5 seconds" },
  ({ id }) => Effect.succeed(`found ${id}`)
)
const other = Tool.make(
  "other",
  { description: "Other.", input: {}, timeout: "5 seconds" },
  () => Effect.succeed("other")
)

/** The one text, on every face. */
const expected = "nope: no such tool; the available tools are lookup, other"

describe("an unknown tool is answered one way on every face (design: Error text)", () => {
  it.effect("Toolkit.unknownTool: an UnknownTool whose text lists the tools", () =>
    Effect.gen(function*() {
      const failure = Toolkit.unknownTool(yield* Toolkit.make(lookup, other), "nope")
      assert.strictEqual(failure._tag, "UnknownTool")
      assert.strictEqual(failure.text, expected)
      const none = Toolkit.unknownTool(yield* Toolkit.make(), "nope")
      assert.strictEqual(none.text, "nope: no such tool; there are no tools")
    }))

  it.effect("the agent loop: the model reads the text as the call's result", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(Agent.make({ tools: [lookup, other] }), "go")
      assert.strictEqual(result.toolCalls[0]!.result.error, expected)
      assert.strictEqual(result.output, expected)
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [{ id: "c1", name: "nope", arguments: "{}" }] },
      (request) => ({
        text: request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : []).join("\n")
      })
    ]))))

  it.effect("a served call: the platform delivers a tool this process does not serve, and is answered the text", () => {
    const answered = Deferred.unsafeMake<ReadonlyArray<Protocol.ToolCallResult>>(undefined as never)
    // A platform that delivers one call of `nope` on the task's stream and ends the task with the answer's text.
    const platform = Layer.succeed(PlatformClient.PlatformClient, {
      register: () => Effect.succeed({ heartbeatIntervalMillis: 60_000 }),
      heartbeat: () => Effect.succeed({ known: true }),
      deregister: () => Effect.void,
      cancel: () => Effect.succeed({ cancelled: false }),
      submitTask: () =>
        Effect.gen(function*() {
          const events = yield* Mailbox.make<Protocol.TaskEvent>()
          yield* events.offerAll([
            { _tag: "TaskStarted", taskId: "task-1" },
            {
              _tag: "ToolCallRequested",
              taskId: "task-1",
              toolCallId: "c1",
              name: "nope",
              arguments: "{}",
              deadlineAt: Date.now() + 60_000
            }
          ])
          yield* Effect.forkScoped(Effect.flatMap(Deferred.await(answered), (results) =>
            events.offer({
              _tag: "TaskCompleted",
              taskId: "task-1",
              output: results.map((r) => r.result.error ?? "").join("\n"),
              steps: 2,
              usage: { inputTokens: 0, outputTokens: 0 }
            })))
          return events
        }),
      attachTask: () => Effect.die("not used"),
      completeToolCall: ({ results }) => Deferred.succeed(answered, results),
      approve: () => Effect.die("not used"),
      deny: () => Effect.die("not used")
    })
    return Effect.gen(function*() {
      const served = yield* Serve.makeConfig(yield* Toolkit.make(lookup, other))
      assert.strictEqual(yield* served.runTask("go"), expected)
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.merge(
        platform,
        Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"]])))
      ))
    )
  })

  it.live("MCP: tools/call of an unknown name is a protocol error, -32602, with the text (the official client)", () =>
    Effect.gen(function*() {
      const { client } = yield* mcpClient(yield* Toolkit.make(lookup, other))
      const error = yield* Effect.flip(Effect.tryPromise(() => client.callTool({ name: "nope", arguments: {} })))
      assert.instanceOf(error.cause, McpError)
      const cause = error.cause as McpError
      assert.strictEqual(cause.code, -32602)
      assert.strictEqual(cause.message, `MCP error -32602: ${expected}`)
    }).pipe(Effect.scoped))
})
