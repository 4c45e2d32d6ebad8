/** The tools of the MCP server the remote-tools tests connect to: each counts what it saw, so a test can tell what reached it. */
import { Effect, Schema } from "effect"
import { Tool } from "../../src/index.js"

/** What the server saw. */
export interface Seen {
  placed: number
  flaky: number
  charged: number
  slowStarted: number
  /** Calls of `slow` interrupted (a `notifications/cancelled` interrupts the call on our server). */
  cancelled: number
}

export const makeSeen = (): Seen => ({ placed: 0, flaky: 0, charged: 0, slowStarted: 0, cancelled: 0 })

class Busy extends Schema.TaggedError<Busy>()("Busy", { message: Schema.String }) {}

/** The server's tools, counting into `seen`. */
export const remoteTools = (seen: Seen) => [
  Tool.make("place_order", {
    description: "Place an order.",
    input: { order: Schema.Struct({ id: Schema.String, qty: Schema.Number }) },
    output: Schema.Struct({ placed: Schema.String }),
    timeout: "10 seconds"
  }, ({ order }) => Effect.sync(() => {
    seen.placed++
    return { placed: order.id }
  })),
  Tool.make("slow", { description: "Never answers.", input: {}, timeout: "60 seconds" }, () =>
    Effect.sync(() => seen.slowStarted++).pipe(
      Effect.zipRight(Effect.never),
      Effect.onInterrupt(() => Effect.sync(() => seen.cancelled++))
    )),
  Tool.make("flaky", { description: "Fails its first call.", input: {}, output: Schema.String, timeout: "10 seconds" }, () =>
    Effect.suspend(() =>
      ++seen.flaky === 1 ? Effect.fail(new Busy({ message: "try again in a moment" })) : Effect.succeed("done")
    )),
  Tool.make("charge", {
    description: "Charge an amount.",
    input: { amount: Schema.Number },
    output: Schema.Struct({ charged: Schema.Number }),
    timeout: "10 seconds"
  }, ({ amount }) => Effect.sync(() => {
    seen.charged++
    return { charged: amount }
  })),
  Tool.make("stats", { description: "What the server saw.", input: {}, timeout: "10 seconds" }, () => ({ ...seen }))
]
