import { assert, describe, it } from "@effect/vitest"
import { ListToolsResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Schema } from "effect"
import { mcpClient } from "./support/mcpHttp.js"
import { Agent, Content, Invocation, LanguageModel, Tool, Toolkit } from "../src/index.js"

// The 8-byte PNG signature: enough bytes to count.
const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

const chart = Tool.make("chart", {
  description: "Draw a chart.",
  input: {},
  output: Content.Item,
  timeout: "5 seconds"
}, () => Effect.succeed(Content.image({ data: png, mimeType: "image/png" })))

const report = Tool.make("report", {
  description: "A report: a summary, a chart, a clip and the data.",
  input: {},
  output: Content.Items,
  timeout: "5 seconds"
}, () =>
  Effect.succeed([
    Content.text("sales rose 4%"),
    Content.image({ data: png, mimeType: "image/png" }),
    Content.audio({ data: "UklGRg==", mimeType: "audio/wav" }),
    Content.resource({ uri: "file:///report.csv", mimeType: "text/csv", text: "month,sales\njan,4" }),
    Content.resource({ uri: "file:///raw.bin", blob: new Uint8Array([1, 2, 3]) })
  ]))

const bad = Tool.make("bad", { description: "Returns no image.", input: {}, output: Content.Item, timeout: "5 seconds" }, () =>
  Effect.succeed({ type: "image", data: "not base64!", mimeType: "image/png" } as Content.Item))

const toolkit = Effect.runSync(Toolkit.make(chart, report, bad))
const pngBase64 = Buffer.from(png).toString("base64")

describe("Content over MCP", () => {
  it.live("an image output reaches the client as image content; a mix as its items, in order; no structuredContent", () =>
    Effect.gen(function*() {
      const { client } = yield* mcpClient(toolkit)
      const image = yield* Effect.promise(() => client.callTool({ name: "chart", arguments: {} }))
      assert.notStrictEqual(image.isError, true)
      assert.deepStrictEqual(image.content, [{ type: "image", data: pngBase64, mimeType: "image/png" }])
      assert.isUndefined(image.structuredContent)
      const mixed = yield* Effect.promise(() => client.callTool({ name: "report", arguments: {} }))
      assert.deepStrictEqual(mixed.content, [
        { type: "text", text: "sales rose 4%" },
        { type: "image", data: pngBase64, mimeType: "image/png" },
        { type: "audio", data: "UklGRg==", mimeType: "audio/wav" },
        { type: "resource", resource: { uri: "file:///report.csv", mimeType: "text/csv", text: "month,sales\njan,4" } },
        { type: "resource", resource: { uri: "file:///raw.bin", blob: "AQID" } }
      ])
      assert.isUndefined(mixed.structuredContent)
      // A content tool lists no output schema: there is no structured output to describe.
      const listed = yield* Effect.promise(() => client.request({ method: "tools/list" }, ListToolsResultSchema))
      assert.deepStrictEqual(listed.tools.map((t) => [t.name, t.outputSchema]), [
        ["chart", undefined],
        ["report", undefined],
        ["bad", undefined]
      ])
      // The output Schema checks the items: data that is not base64 is an invalid output.
      const invalid = yield* Effect.promise(() => client.callTool({ name: "bad", arguments: {} }))
      assert.isTrue(invalid.isError)
      assert.match((invalid.content as Array<{ text: string }>)[0]!.text, /^bad: invalid output: /)
    }).pipe(Effect.scoped))
})

describe("Content elsewhere", () => {
  it.effect("Invocation.run gives the items as JSON values, in MCP's shape", () =>
    Effect.gen(function*() {
      const result = yield* Invocation.run(chart, {})
      assert.deepStrictEqual(result.value, { type: "image", data: pngBase64, mimeType: "image/png" })
    }))

  it.effect("the agent loop gives the model a text rendering, not the bytes", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ tools: [chart, report] })
      yield* Agent.run(agent, "draw")
      const [, second] = yield* Effect.flatMap(LanguageModel.Scripted, (s) => s.requests)
      const results = second!.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [m.content] : [])
      assert.deepStrictEqual(results, [
        "[image image/png, 8 bytes]",
        "sales rose 4%\n[image image/png, 8 bytes]\n[audio audio/wav, 4 bytes]\n" +
        "[resource file:///report.csv, text/csv]\nmonth,sales\njan,4\n[resource file:///raw.bin, 3 bytes]"
      ])
    }).pipe(Effect.provide(LanguageModel.layerScripted([
      { toolCalls: [{ id: "a", name: "chart", arguments: "{}" }, { id: "b", name: "report", arguments: "{}" }] },
      { text: "done" }
    ]))))

  it("render: a text item is its text", () => {
    assert.strictEqual(Content.render(Content.text("hi")), "hi")
    assert.isTrue(Schema.is(Content.Items)([Content.text("a"), Content.image({ data: "", mimeType: "image/gif" })]))
  })
})
