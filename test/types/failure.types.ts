/**
 * Types of typed tool failures (`Tool.make`'s `failure` Schema), checked by `npm run check` (tsc): never
 * run. Each `// @ts-expect-error` is a line that must not compile.
 */
// The effect language service reports the handler that must not compile a second time, in its own words.
// @effect-diagnostics missingEffectError:off
import { type Cause, Effect, Schema } from "effect"
import { Invocation, Tool, type ToolResult } from "../../src/index.js"

class OrderNotFound extends Schema.TaggedError<OrderNotFound>()("OrderNotFound", { orderId: Schema.String }) {}
class Busy extends Schema.TaggedError<Busy>()("Busy", { message: Schema.String }) {}
class Other extends Schema.TaggedError<Other>()("Other", {}) {}

/** Asserts at compile time that `A` and `B` are the same type. */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
const same = <A, B>(_: Equals<A, B>) => {}

const lookup = Tool.make("lookup", {
  description: "Look an order up.",
  input: { id: Schema.String },
  output: Schema.Struct({ id: Schema.String }),
  failure: Schema.Union(OrderNotFound, Busy),
  timeout: "5 seconds",
  retries: 2,
  permanent: ["OrderNotFound"],
  // Not annotated: the parameter is the failure Schema's type.
  retryable: (error) => error._tag === "Busy"
}, ({ id }) => id === "42" ? Effect.fail(new OrderNotFound({ orderId: id })) : Effect.succeed({ id }))

// The failure Schema types the tool's `E`, its `WithFailure` Schema, `Tool.test`'s error.
same<
  typeof lookup,
  Tool.WithFailure<"lookup", { readonly id: string }, { readonly id: string }, OrderNotFound | Busy> & Tool.Approval<false>
>(true)
export const tested = Tool.test(lookup, { id: "42" })
same<Effect.Effect.Error<typeof tested>, OrderNotFound | Busy>(true)

// `Invocation.call`: the output, the typed failure itself, else the call's `ToolFailure` with a typed cause.
export const called = Invocation.call(lookup, { id: "42" })
same<Effect.Effect.Success<typeof called>, { readonly id: string }>(true)
same<Effect.Effect.Error<typeof called>, OrderNotFound | Busy | ToolResult.ToolFailure<OrderNotFound | Busy>>(true)
export const recovered = called.pipe(
  Effect.catchTag("OrderNotFound", (error) => Effect.succeed({ id: `missing ${error.orderId}` })),
  Effect.catchTag("HandlerFailed", (failed) => {
    same<typeof failed.cause, Cause.Cause<OrderNotFound | Busy>>(true)
    return Effect.succeed({ id: failed.text })
  })
)
same<Effect.Effect.Error<typeof recovered>, Busy | Exclude<ToolResult.ToolFailure, ToolResult.HandlerFailed>>(true)

// `retryable` typed from the Schema: `error` is the failure type, not `any`.
export const retryableParameter = Tool.make("typed_retry", {
  description: "Retries only Busy.",
  input: {},
  failure: Busy,
  timeout: "5 seconds",
  retryable: (error) => {
    same<typeof error, Busy>(true)
    return true
  }
}, () => Effect.fail(new Busy({ message: "busy" })))

// `permanent` lists the failure's tags.
export const wrongTag = Tool.make("wrong_tag", {
  description: "A tag that is not the failure's.",
  input: {},
  failure: Busy,
  timeout: "5 seconds",
  // @ts-expect-error: "Nope" is not a `_tag` of the failure Schema's type
  permanent: ["Nope"]
}, () => Effect.fail(new Busy({ message: "busy" })))

// A handler failing with an error the Schema does not cover does not compile.
export const uncovered = Tool.make(
  "uncovered",
  { description: "Fails with Other.", input: {}, failure: OrderNotFound, timeout: "5 seconds" },
  // @ts-expect-error: Other is not of the failure Schema's type
  () => Effect.fail(new Other())
)

// Without a failure Schema: `call` fails with the `ToolFailure`, the handler's failures in `HandlerFailed`'s cause.
const untyped = Tool.make("untyped", { description: "No failure Schema.", input: {}, timeout: "5 seconds" }, () =>
  Effect.fail(new Other()))
export const calledUntyped = Invocation.call(untyped, {})
same<Effect.Effect.Error<typeof calledUntyped>, ToolResult.ToolFailure<Other>>(true)
// An async body's rejection is of no known type.
const asyncTool = Tool.make("async_tool", { description: "Async.", input: {}, timeout: "5 seconds" }, async () => 1)
export const calledAsync = Invocation.call(asyncTool, {})
same<Effect.Effect.Error<typeof calledAsync>, ToolResult.ToolFailure>(true)
