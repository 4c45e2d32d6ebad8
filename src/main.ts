/**
 * The main program. Until the demo lands, a small real example: two tools, each called through
 * `Invocation` (one success, one failure), and what the model would read printed.
 *
 *   tsx src/main.ts                       the example
 *   tsx src/main.ts mcp                   the example tools over MCP on stdio
 *   tsx src/main.ts mcp --http --port N   ... over Streamable HTTP at http://127.0.0.1:N/mcp
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect, Layer, Logger, Schema } from "effect"
import { Invocation, Mcp, Tool, Toolkit } from "./index.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

const Order = Schema.Struct({ id: Schema.String, status: Schema.Literal("paid", "shipped"), total: Schema.Number })

const orders: ReadonlyMap<string, typeof Order.Type> = new Map([
  ["ord-4821", { id: "ord-4821", status: "shipped", total: 42 }]
])

const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id. Use it when the user asks about an order.",
  input: { order_id: Schema.String.annotations({ description: "The order id, like ord-4821" }) },
  output: Order,
  timeout: "10 seconds"
}, ({ order_id }) => {
  const order = orders.get(order_id)
  return order === undefined ? Effect.fail(new NotFound({ message: `no order with id=${order_id}` })) : Effect.succeed(order)
})

const addNumbers = Tool.make("add_numbers", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "1 second"
}, ({ a, b }) => Effect.succeed(a + b))

const program = Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(lookupOrder, addNumbers)
  yield* Console.log("Tools, as a model sees them:")
  for (const definition of toolkit.definitions) yield* Console.log(`  ${JSON.stringify(definition)}`)
  const calls = [
    [lookupOrder, "{\"order_id\":\"ord-4821\"}"],
    [lookupOrder, "{\"order_id\":\"ord-0000\"}"],
    [addNumbers, "{\"a\":2,\"b\":\"3\",\"c\":4}"]
  ] as const
  yield* Console.log("\nCalls through Invocation.run:")
  for (const [tool, args] of calls) {
    const result = yield* Invocation.run(tool, args)
    const shown = result.success ? `value ${JSON.stringify(result.value)}` : `error ${JSON.stringify(result.error)}`
    yield* Console.log(`  ${tool.name}(${args})\n    -> ${shown}`)
  }
})

const argv = process.argv.slice(2)
const option = (name: string): string | undefined => {
  const at = argv.indexOf(name)
  return at === -1 ? undefined : argv[at + 1]
}

const mcp = Effect.gen(function*() {
  const toolkit = yield* Toolkit.make(lookupOrder, addNumbers)
  if (!argv.includes("--http")) return yield* Mcp.serveStdio(toolkit)
  const port = Number(option("--port") ?? "8788")
  yield* Effect.logInfo(`MCP over Streamable HTTP at http://127.0.0.1:${port}/mcp`)
  return yield* Layer.launch(Mcp.layerHttp(toolkit, { port }))
}).pipe(
  // stdout carries only protocol messages: logs go to stderr.
  Effect.provide(Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger)))
)

NodeRuntime.runMain(argv[0] === "mcp" ? mcp : program)
