/**
 * A tool served over MCP asks the client (design: MCP): `ask_user` (through the `UserPrompt` service)
 * reaches the client's elicitation handler and its answer comes back; a tool's `Sampling` reaches
 * the client's model. A client that declared neither gets neither, and the tools say so.
 */
import { assert, describe, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Option, Schema } from "effect"
import { Builtins, Sampling, Tool, Toolkit } from "../src/index.js"
import { mcpStdioClient } from "./support/mcpStreams.js"

/** Asks the client's model, or says it cannot. */
const summarize = Tool.make("summarize", {
  description: "Has the client's model summarize a text.",
  input: { text: Schema.String },
  output: Schema.String,
  timeout: "10 seconds"
}, ({ text }) =>
  Effect.flatMap(Effect.serviceOption(Sampling.Sampling), (model) =>
    Option.isNone(model) ? Effect.succeed("no model to ask") : model.value.ask(`Summarize: ${text}`, { maxTokens: 50 })))

const toolkit = Effect.runSync(Toolkit.make(Builtins.askUser, summarize))

const textOf = (result: unknown): string => {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? []
  return content.map((c) => c.text ?? "").join("")
}

describe("Mcp: asking the client", () => {
  it.live("ask_user reaches the client's elicitation handler with the question; the user's answer comes back", () =>
    Effect.gen(function*() {
      const asked: Array<string> = []
      const client = new Client({ name: "test", version: "1.0.0" }, { capabilities: { elicitation: {} } })
      client.setRequestHandler(ElicitRequestSchema, (request) => {
        asked.push(request.params.message)
        return { action: "accept", content: { answer: "blue" } }
      })
      yield* mcpStdioClient(toolkit, undefined, client)
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "ask_user", arguments: { question: "Which colour do you want?" } }))
      assert.deepStrictEqual(asked, ["Which colour do you want?"])
      assert.isNotTrue(result.isError)
      assert.include(textOf(result), "blue")
    }).pipe(Effect.scoped))

  it.live("a user who declines: ask_user's result says so, as an error the model reads", () =>
    Effect.gen(function*() {
      const client = new Client({ name: "test", version: "1.0.0" }, { capabilities: { elicitation: {} } })
      client.setRequestHandler(ElicitRequestSchema, () => ({ action: "decline" }))
      yield* mcpStdioClient(toolkit, undefined, client)
      const result = yield* Effect.promise(() => client.callTool({ name: "ask_user", arguments: { question: "Go on?" } }))
      assert.isTrue(result.isError)
      assert.include(textOf(result), "the user declined the question")
    }).pipe(Effect.scoped))

  it.live("a tool's Sampling reaches the client's model; its text comes back", () =>
    Effect.gen(function*() {
      const prompts: Array<string> = []
      const client = new Client({ name: "test", version: "1.0.0" }, { capabilities: { sampling: {} } })
      client.setRequestHandler(CreateMessageRequestSchema, (request) => {
        const content = request.params.messages[0]?.content
        prompts.push(content !== undefined && !Array.isArray(content) && content.type === "text" ? content.text : "")
        return { role: "assistant", model: "client-model", content: { type: "text", text: "short" } }
      })
      yield* mcpStdioClient(toolkit, undefined, client)
      const result = yield* Effect.promise(() => client.callTool({ name: "summarize", arguments: { text: "a long story" } }))
      assert.deepStrictEqual(prompts, ["Summarize: a long story"])
      assert.include(textOf(result), "short")
    }).pipe(Effect.scoped))

  it.live("a client that declared neither: ask_user says no user is available, the tool that samples says it has no model", () =>
    Effect.gen(function*() {
      const { client } = yield* mcpStdioClient(toolkit)
      const asked = yield* Effect.promise(() => client.callTool({ name: "ask_user", arguments: { question: "Hello?" } }))
      assert.include(textOf(asked), Builtins.noUserText)
      const sampled = yield* Effect.promise(() => client.callTool({ name: "summarize", arguments: { text: "x" } }))
      assert.include(textOf(sampled), "no model to ask")
    }).pipe(Effect.scoped))
})
