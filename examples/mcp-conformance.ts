/**
 * The server the official MCP conformance suite's server scenarios call:
 * `npx tsx examples/mcp-conformance.ts --port <P>` serves, over Streamable HTTP at
 * `http://127.0.0.1:<P>/mcp`, the tools those scenarios name, each written with `Tool.make` like any
 * other (nothing in the library knows of the suite). It prints `listening <url>` once serving.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { Content, Sampling, Tool, Toolkit, ToolContext, UserPrompt } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"

/** tools-call-simple-text: a text result. */
const simpleText = Tool.make("test_simple_text", {
  description: "Tests simple text content response",
  input: {},
  output: Schema.String,
  timeout: "10 seconds"
}, () => Effect.succeed("This is a simple text response for testing."))

class TestError extends Schema.TaggedError<TestError>()("TestError", { message: Schema.String }) {}

/** tools-call-error: a failure, which reaches the client as a result with `isError: true` and its text. */
const errorHandling = Tool.make("test_error_handling", {
  description: "Tests error response handling",
  input: {},
  output: Schema.String,
  timeout: "10 seconds"
}, () => Effect.fail(new TestError({ message: "This tool intentionally returns an error for testing" })))

/** A 1x1 PNG, and a short silent WAV: what the content scenarios check is the item's type, data and mimeType. */
const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
const wav = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="

const content = (name: string, description: string, output: Content.Item) =>
  Tool.make(name, { description, input: {}, output: Content.Item, timeout: "10 seconds" }, () => Effect.succeed(output))

const contents_ = (name: string, description: string, output: Content.Items) =>
  Tool.make(name, { description, input: {}, output: Content.Items, timeout: "10 seconds" }, () => Effect.succeed(output))

/** tools-call-image, -audio, -embedded-resource, -mixed-content. */
const contents = [
  content("test_image_content", "Tests image content response", Content.image({ data: png, mimeType: "image/png" })),
  content("test_audio_content", "Tests audio content response", Content.audio({ data: wav, mimeType: "audio/wav" })),
  content(
    "test_embedded_resource",
    "Tests embedded resource content response",
    Content.resource({ uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." })
  ),
  contents_("test_multiple_content_types", "Tests response with multiple content types (text, image, resource)", [
    Content.text("Multiple content types test:"),
    Content.image({ data: png, mimeType: "image/png" }),
    Content.resource({ uri: "test://mixed-content-resource", mimeType: "application/json", text: "{\"test\":\"data\",\"value\":123}" })
  ])
]

/** tools-call-with-logging: three log lines to the client during the call. */
const withLogging = Tool.make("test_tool_with_logging", {
  description: "Tests tool that emits log messages during execution",
  input: {},
  output: Schema.String,
  timeout: "10 seconds"
}, () =>
  Effect.gen(function*() {
    yield* ToolContext.log("info", "Tool execution started")
    yield* Effect.sleep("50 millis")
    yield* ToolContext.log("info", "Tool processing data")
    yield* Effect.sleep("50 millis")
    yield* ToolContext.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"
  }))

/** tools-call-with-progress: progress 0, 50 and 100 of 100. */
const withProgress = Tool.make("test_tool_with_progress", {
  description: "Tests tool that reports progress notifications",
  input: {},
  output: Schema.String,
  timeout: "10 seconds"
}, () =>
  Effect.gen(function*() {
    for (const done of [0, 50, 100]) {
      yield* ToolContext.progress(done, 100, `Completed step ${done / 50 + 1} of 3`)
      yield* Effect.sleep("50 millis")
    }
    return "Tool with progress executed successfully"
  }))

/** tools-call-sampling: the client's model answers the prompt (`Sampling`, there when the client can sample). */
const sampling = Tool.make("test_sampling", {
  description: "Tests server-initiated sampling (LLM completion request)",
  input: { prompt: Schema.String },
  output: Schema.String,
  timeout: "30 seconds"
}, ({ prompt }) =>
  Effect.flatMap(Effect.serviceOption(Sampling.Sampling), (model) =>
    model._tag === "None"
      ? Effect.succeed("this client cannot sample")
      : Effect.map(model.value.ask(prompt, { maxTokens: 100 }), (text) => `LLM response: ${text}`)))

/** tools-call-elicitation: the user answers through the client (`UserPrompt`, backed by elicitation). */
const elicitation = Tool.make("test_elicitation", {
  description: "Tests server-initiated elicitation (user input request)",
  input: { message: Schema.String },
  output: Schema.String,
  timeout: "30 seconds"
}, ({ message }) =>
  Effect.flatMap(Effect.serviceOption(UserPrompt.UserPrompt), (prompt) =>
    prompt._tag === "None"
      ? Effect.succeed("this client cannot ask its user")
      : Effect.map(prompt.value.ask(message), (answer) => `User response: ${answer}`)))

/**
 * json-schema-2020-12: the input Schema carries its JSON Schema (a 2020-12 document, with `$defs`
 * and `additionalProperties`), which `tools/list` gives as it is; the input is decoded by the Schema.
 */
const Address = Schema.Struct({ street: Schema.optional(Schema.String), city: Schema.optional(Schema.String) })
const jsonSchema2020 = Tool.make("json_schema_2020_12_tool", {
  description: "Tool with JSON Schema 2020-12 features",
  input: Schema.Struct({ name: Schema.optional(Schema.String), address: Schema.optional(Address) }).annotations({
    jsonSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: { address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } } },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false
    }
  }),
  output: Schema.String,
  timeout: "10 seconds"
}, ({ name }) => Effect.succeed(`hello ${name ?? "there"}`))

const port = Number(process.argv[process.argv.indexOf("--port") + 1] || 8790)

Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(
    simpleText,
    errorHandling,
    ...contents,
    withLogging,
    withProgress,
    sampling,
    elicitation,
    jsonSchema2020
  )
  return yield* Layer.launch(Layer.mergeAll(
    Mcp.layerHttp(toolkit, { port }),
    Layer.effectDiscard(Effect.sync(() => process.stdout.write(`listening http://127.0.0.1:${port}/mcp\n`)))
  ))
}).pipe(NodeRuntime.runMain)
