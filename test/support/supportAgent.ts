/**
 * The agent the provider fault and secrets tests run: one order lookup that finds ord-4821 and
 * fails with a tagged error for any other id, and a prompt that asks for both.
 */
import { Effect, Schema } from "effect"
import { Agent, Tool } from "../../src/index.js"

class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { message: Schema.String }) {}

export const lookupOrder = Tool.make("lookup_order", {
  description: "Return the order record for order_id.",
  input: { order_id: Schema.String },
  output: Schema.Struct({ id: Schema.String, status: Schema.String, total: Schema.Number }),
  timeout: "10 seconds"
}, ({ order_id }) =>
  order_id === "ord-4821"
    ? Effect.succeed({ id: order_id, status: "shipped", total: 42 })
    : Effect.fail(new NotFound({ message: `no order with id=${order_id}` })))

export const agent = Agent.make({ name: "support", tools: [lookupOrder] })

export const prompt = "Check orders ord-4821 and ord-0000"
