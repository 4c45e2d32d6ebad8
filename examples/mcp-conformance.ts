/**
 * The server the official MCP conformance suite's server scenarios call:
 * `npx tsx examples/mcp-conformance.ts --port <P>` serves, over Streamable HTTP at
 * `http://127.0.0.1:<P>/mcp`, the tools those scenarios name, each written with `Tool.make` like any
 * other (nothing in the library knows of the suite). It prints `listening <url>` once serving.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { Mcp, Tool, Toolkit } from "../src/index.js"

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

const port = Number(process.argv[process.argv.indexOf("--port") + 1] || 8790)

Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(simpleText, errorHandling)
  return yield* Layer.launch(Layer.mergeAll(
    Mcp.layerHttp(toolkit, { port }),
    Layer.effectDiscard(Effect.sync(() => process.stdout.write(`listening http://127.0.0.1:${port}/mcp\n`)))
  ))
}).pipe(NodeRuntime.runMain)
