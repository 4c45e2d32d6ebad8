/**
 * Type tests, compiled by `npm run check` and never run: a toolkit keeps its tools' types and what their
 * handlers need, `Agent.make({ toolkit })` asks it of a run, a toolkit closed in a layer needs nothing more,
 * and a run's error type has only the errors it can have (`Agent.AgentErrors`, `Agent.RunError`).
 */
import { Context, Effect, Layer, Schema, type Stream } from "effect"
import { Agent, type Guardrail, LanguageModel, type Session, Tool, Toolkit } from "../../src/index.js"

type Equals<X, Y> = (<T>() => T extends X ? 1 : 2) extends (<T>() => T extends Y ? 1 : 2) ? true : false
type Expect<T extends true> = T

class Orders extends Context.Tag("types/Orders")<Orders, { readonly status: (id: string) => Effect.Effect<string> }>() {}
const ordersLayer = Layer.succeed(Orders, { status: () => Effect.succeed("shipped") })
const model = LanguageModel.layerScripted([{ text: "done" }])

const lookupOrder = Tool.make("lookup_order", {
  description: "Looks an order up.",
  input: { order_id: Schema.String },
  output: Schema.String,
  timeout: "5 seconds"
}, ({ order_id }) => Effect.flatMap(Orders, (orders) => orders.status(order_id)))

const issueRefund = Tool.make("issue_refund", {
  description: "Refunds an order.",
  input: { order_id: Schema.String },
  timeout: "5 seconds",
  needsApproval: true
}, () => Effect.succeed("refunded"))

// ---------------------------------------------------------------------------------------------
// A toolkit keeps its tools and what their handlers need.

const made = Toolkit.make(lookupOrder, issueRefund)
type Made = Effect.Effect.Success<typeof made>
export type MadeNeedsOrders = Expect<Equals<Made extends Toolkit.Toolkit<infer R, any> ? R : "none", Orders>>
export type MadeKeepsItsTools = Expect<Equals<Made["tools"], readonly [typeof lookupOrder, typeof issueRefund]>>
export type ToolsSayApproval = Expect<
  Equals<[(typeof lookupOrder)["needsApproval"], (typeof issueRefund)["needsApproval"]], [false, true]>
>

// ---------------------------------------------------------------------------------------------
// Given to Agent.make, by toolkit or by tools: a run needs Orders, and does not compile without it.

const byToolkit = Effect.gen(function*() {
  const agent = Agent.make({ toolkit: yield* Toolkit.make(lookupOrder) })
  return yield* Agent.run(agent, "where is ord-1?")
})
const byTools = Agent.run(Agent.make({ tools: [lookupOrder] }), "where is ord-1?")
export type ByToolkitNeedsOrders = Expect<
  Equals<Effect.Effect.Context<typeof byToolkit>, LanguageModel.LanguageModel | Orders>
>
export type ByToolsNeedsOrders = Expect<Equals<Effect.Effect.Context<typeof byTools>, LanguageModel.LanguageModel | Orders>>

// @effect-diagnostics-next-line missingEffectContext:off
// @ts-expect-error Orders is missing: the model alone does not run it
export const byToolkitWithoutOrders = () => Effect.runPromise(Effect.provide(byToolkit, model))
// @effect-diagnostics-next-line missingEffectContext:off
// @ts-expect-error Orders is missing, the tools given as tools
export const byToolsWithoutOrders = () => Effect.runPromise(Effect.provide(byTools, model))
// The same with Orders: it compiles, so the error above is the missing Orders.
export const byToolkitWithOrders = () => Effect.runPromise(Effect.provide(byToolkit, Layer.merge(model, ordersLayer)))
export const byToolsWithOrders = () => Effect.runPromise(Effect.provide(byTools, Layer.merge(model, ordersLayer)))

// ---------------------------------------------------------------------------------------------
// Closed in a layer: the service is a toolkit that needs nothing; the layer needs Orders.

class SupportTools extends Effect.Service<SupportTools>()("types/SupportTools", {
  effect: Toolkit.closed(Toolkit.make(lookupOrder))
}) {}

export type ServiceNeedsNothing = Expect<Equals<SupportTools extends Toolkit.Toolkit<infer R, any> ? R : "none", never>>
export type LayerNeedsOrders = Expect<Equals<Layer.Layer.Context<typeof SupportTools.Default>, Orders>>
export type LayerFailsWithManifest = Expect<Equals<Layer.Layer.Error<typeof SupportTools.Default>, Toolkit.ManifestError>>

const closedRun = Effect.gen(function*() {
  const agent = Agent.make({ toolkit: yield* SupportTools })
  return yield* Agent.run(agent, "where is ord-1?")
})
export type ClosedRunNeedsTheService = Expect<
  Equals<Effect.Effect.Context<typeof closedRun>, LanguageModel.LanguageModel | SupportTools>
>
const withItsLayer = closedRun.pipe(Effect.provide(SupportTools.Default.pipe(Layer.provide(ordersLayer))))
export type ClosedNeedsOnlyTheModel = Expect<Equals<Effect.Effect.Context<typeof withItsLayer>, LanguageModel.LanguageModel>>
export const runsWithTheModelOnly = () => Effect.runPromise(Effect.provide(withItsLayer, model))

// Toolkit.provide with a context at hand: the same, its tools keep their types but for the requirement.
const provided = Effect.map(made, Toolkit.provide(Context.make(Orders, { status: () => Effect.succeed("shipped") })))
type Provided = Effect.Effect.Success<typeof provided>
export type ProvidedNeedsNothing = Expect<Equals<Provided extends Toolkit.Toolkit<infer R, any> ? R : "none", never>>
export type ProvidedKeepsNames = Expect<Equals<Provided["tools"][0]["name"] | Provided["tools"][1]["name"], "lookup_order" | "issue_refund">>
export type ProvidedKeepsApproval = Expect<Equals<Provided["tools"][1]["needsApproval"], true>>
export type ProvidedToolNeedsNothing = Expect<Equals<Tool.Requirements<Provided["tools"][0]>, never>>

// ---------------------------------------------------------------------------------------------
// AgentError, narrowed: only what a run can fail with.

const plain = Agent.make({ tools: [lookupOrder] })
const plainRun = Agent.run(plain, "hi")
export type PlainFailsOnlySo = Expect<Equals<Effect.Effect.Error<typeof plainRun>, Agent.RunFailure>>
export type PlainNeverSuspends = Expect<
  Equals<Extract<Effect.Effect.Error<typeof plainRun>, Agent.RunSuspended | Agent.RunIdInUse | Agent.OutputInvalid>, never>
>
// Given a runId: RunIdInUse. The closed toolkit's agent fails as the plain one does.
const withRunId = Agent.run(plain, "hi", { runId: "run-1" })
export type WithRunId = Expect<Equals<Effect.Effect.Error<typeof withRunId>, Agent.RunFailure | Agent.RunIdInUse>>
export type ClosedFailsOnlySo = Expect<Equals<Effect.Effect.Error<typeof closedRun>, Agent.RunFailure>>
// A typed output: OutputInvalid.
const typed = Agent.make({ tools: [lookupOrder], output: Schema.Struct({ status: Schema.String }) })
const typedRun = Agent.run(typed, "hi")
export type TypedMayBeInvalid = Expect<Equals<Effect.Effect.Error<typeof typedRun>, Agent.RunFailure | Agent.OutputInvalid>>
// A tool that needs approval (by tools, or in a toolkit, closed or not): RunSuspended.
const approving = Agent.make({ tools: [issueRefund] })
export type ApprovalSuspends = Expect<Equals<Agent.AgentErrors<typeof approving>, Agent.RunFailure | Agent.RunSuspended>>
const closedApproving = Effect.map(Toolkit.closed(Toolkit.make(issueRefund)), (toolkit) => Agent.make({ toolkit }))
export type ClosedApprovalSuspends = Expect<
  Equals<Agent.AgentErrors<Effect.Effect.Success<typeof closedApproving>>, Agent.RunFailure | Agent.RunSuspended>
>
// A sub-agent (it may suspend) or a handoff to an agent that may: RunSuspended.
const withSubAgent = Agent.make({ tools: [Agent.asTool(plain, { name: "orders", description: "Orders." })] })
export type SubAgentSuspends = Expect<Equals<Agent.AgentErrors<typeof withSubAgent>, Agent.RunFailure | Agent.RunSuspended>>
const handingOff = Agent.make({ tools: [], handoffs: [approving] })
export type HandoffSuspends = Expect<Equals<Agent.AgentErrors<typeof handingOff>, Agent.RunFailure | Agent.RunSuspended>>
// A tool typed as any tool may need approval.
const anyTools: ReadonlyArray<Tool.Any> = [lookupOrder]
export type AnyToolSuspends = Expect<
  Equals<Agent.AgentErrors<ReturnType<typeof Agent.make<typeof anyTools>>>, Agent.RunFailure | Agent.RunSuspended>
>
// A stream ends with Suspended: it never fails with RunSuspended.
const streamed = Agent.stream(approving, "hi")
export type StreamNeverSuspends = Expect<Equals<Stream.Stream.Error<typeof streamed>, Agent.RunFailure>>
// The full union stays, for an agent typed without its errors.
export type FullUnion = Expect<
  Equals<
    Agent.AgentError,
    | Agent.RunFailure
    | Agent.OutputInvalid
    | Agent.RunSuspended
    | Agent.RunIdInUse
    | Guardrail.GuardrailTripped
    | Session.SessionBusy
  >
>
