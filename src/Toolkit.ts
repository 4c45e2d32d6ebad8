/**
 * A validated set of tools and its manifest (design: Limits). `Toolkit.make` checks every limit at
 * once and reports each violation with the tool and the rule it breaks.
 *
 * A toolkit keeps its tools' types, and `R`, what their handlers need: `Agent.make({ toolkit })`, `Serve`
 * and `Mcp` ask it of their callers. `provide(toolkit, context)` closes it with services at hand, and
 * `closed(Toolkit.make(...))` with the services of the context it is built in: in a layer, once, so that
 * the service it is handed on as needs nothing more (`R` = `never`):
 *
 * ```ts
 * class SupportTools extends Effect.Service<SupportTools>()("SupportTools", {
 *   effect: Toolkit.closed(Toolkit.make(lookupOrder, issueRefund)) // Orders, Billing: taken here
 * }) {}
 * // SupportTools.Default: Layer<SupportTools, ManifestError, Orders | Billing>
 * const agent = Agent.make({ toolkit: yield* SupportTools }) // Agent<never>
 * ```
 */
import { Context, Duration, Effect, Either, Exit, Schema, Scope, Tracer } from "effect"
import { dual } from "effect/Function"
import * as Tool from "./Tool.js"
import { type CallServices, ToolContext } from "./ToolContext.js"
import { UnknownTool } from "./ToolResult.js"

/** At most this many tools per toolkit. */
export const maxTools = 64
/** Tool names: letters, digits, `_` and `-`. */
export const namePattern = /^[a-zA-Z0-9_-]+$/
/** At most this many characters per name. */
export const maxNameLength = 64
/** At most this many characters per description. */
export const maxDescriptionLength = 1024
/** The longest timeout a tool may declare. */
export const maxTimeout: Duration.Duration = Duration.seconds(3600)
/** Names the platform keeps for itself. */
export const reservedNames: ReadonlySet<string> = new Set([
  "exec_agent",
  "finish",
  "list_agents",
  "list_context_history",
  "recall_context"
])

/** One broken rule: which tool (absent for the toolkit as a whole), which rule, and a sentence. */
export class Violation extends Schema.Class<Violation>("agent-tools/Violation")({
  tool: Schema.optional(Schema.String),
  rule: Schema.Literal(
    "max-tools",
    "name-pattern",
    "name-length",
    "name-unique",
    "name-reserved",
    "description-length",
    "timeout-range",
    "retries-whole",
    "permanent-tags",
    "retryable-function",
    "handler-function",
    "worker-module",
    "input-json",
    "output-json",
    "input-object",
    // Checked by the platform at registration, not by `Toolkit.make`.
    "manifest-bytes",
    "manifest-bytes-per-agent",
    // The platform's model's provider has no strict form of the tool's input (`StrictSchema`).
    "strict-schema"
  ),
  message: Schema.String
}) {}

/** Every violation of a toolkit, reported at once. */
export class ManifestError extends Schema.TaggedError<ManifestError>("agent-tools/ManifestError")("ManifestError", {
  violations: Schema.Array(Violation)
}) {
  override get message(): string {
    return this.violations.map((v) => v.message).join("; ")
  }
}

/** What the platform needs to know of one tool (and re-checks at registration). */
export class ManifestEntry extends Schema.Class<ManifestEntry>("agent-tools/ManifestEntry")({
  name: Schema.String,
  description: Schema.String,
  parameters: Schema.Unknown,
  output: Schema.Unknown,
  timeoutMillis: Schema.Number,
  retries: Schema.Number,
  idempotent: Schema.Boolean,
  /**
   * A person approves each call first (`Tool.make`'s `needsApproval`): on a platform with a journal,
   * a task suspends on it until the call is decided (design: Durable runs). Absent in an older
   * manifest: false.
   */
  needsApproval: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {}

/**
 * A validated set of tools; `R` is what their handlers need, `Tools` the tools' own types, in order
 * (`Agent.make({ toolkit })` reads both). After `provide` or `closed`, `R` is what callers still have to give.
 */
export interface Toolkit<out R = any, out Tools extends ReadonlyArray<Tool.Any> = ReadonlyArray<Tool.Any>> {
  /** Phantom: the handlers' requirements. */
  readonly _R?: (_: never) => R
  readonly tools: Tools
  /** Tools by name. */
  readonly byName: ReadonlyMap<string, Tool.Any>
  /** What each tool shows a model (design: What the model sees), in toolkit order; computed once. */
  readonly definitions: ReadonlyArray<Tool.Definition>
  /** The manifest a server registers. */
  readonly manifest: ReadonlyArray<ManifestEntry>
}

/**
 * The one answer to a call of a tool `toolkit` does not have, on every face (the agent loop, a served
 * call, MCP's `tools/call`; design: Error text): `UnknownTool`, its text listing the tools there are,
 * `<name>: no such tool; the available tools are a, b`.
 */
export const unknownTool = (toolkit: Toolkit, toolName: string): UnknownTool =>
  new UnknownTool({ toolName, available: toolkit.tools.map((tool) => tool.name) })

/** Validates `tools` against every limit; fails with all violations at once. */
export const make = <const Tools extends ReadonlyArray<Tool.Any>>(
  ...tools: Tools
): Effect.Effect<Toolkit<Tool.Requirements<Tools[number]>, Tools>, ManifestError> => Effect.suspend(() => makeEither(tools))

/** `make` as a plain function, for callers that validate once and keep the outcome. */
export const makeEither = <const Tools extends ReadonlyArray<Tool.Any>>(
  tools: Tools
): Either.Either<Toolkit<Tool.Requirements<Tools[number]>, Tools>, ManifestError> => {
  const violations = validate(tools)
  if (violations.length > 0) return Either.left(new ManifestError({ violations }))
  const definitions = tools.map(Tool.jsonSchema)
  return Either.right({
    tools,
    byName: new Map(tools.map((tool) => [tool.name, tool])),
    definitions,
    manifest: tools.map((tool, i) =>
      new ManifestEntry({
        name: tool.name,
        description: tool.description,
        parameters: definitions[i]!.parameters,
        output: Tool.outputJsonSchema(tool),
        timeoutMillis: Duration.toMillis(tool.timeout),
        retries: tool.retries,
        idempotent: tool.idempotent,
        needsApproval: tool.needsApproval
      })
    )
  })
}

/** The tools the platform itself gives its tasks (`exec_agent`, `list_agents`): the reserved names are theirs. */
const platformOwned = new WeakSet<Tool.Any>()

/** Marks `tool` as one the platform gives its tasks: its name may be a reserved one (no served tool's may). */
export const ownedByPlatform = <T extends Tool.Any>(tool: T): T => {
  platformOwned.add(tool)
  return tool
}

/** A tool given the services `ROut`: its handler needs only what is left (its other fields are the tool's own). */
export type ProvidedTool<T, ROut> = T extends Tool.Tool<infer Name, infer I, infer O, infer E, infer R, infer Body>
  ? Tool.Tool<Name, I, O, E, Exclude<R, ROut>, ProvidedBody<Body, ROut>> & Tool.Approval<T["needsApproval"]>
  : never

/** A handler's body given the services `ROut`: an Effect needs the rest; a promise or a value is as it was. */
export type ProvidedBody<Body, ROut> = Body extends Effect.Effect<infer A, infer E, infer R>
  ? Effect.Effect<A, E, Exclude<R, ROut>>
  : Body

/** The tools `Tools` given the services `ROut`, in order. */
export type Provided<Tools extends ReadonlyArray<Tool.Any>, ROut> = { readonly [K in keyof Tools]: ProvidedTool<Tools[K], ROut> }

/** A toolkit given the services `ROut`: `R` is what its callers still have to give (a call gives `CallServices`). */
export type ProvidedToolkit<R, Tools extends ReadonlyArray<Tool.Any>, ROut> = Toolkit<
  Exclude<R, ROut | CallServices>,
  Provided<Tools, ROut>
>

/**
 * The toolkit whose handlers are given the services of `context`, merged into each call's own (the call's
 * `ToolContext`, `Scope` and span stay the call's). Its tools are copies, their names, schemas, flags and
 * worker the same; a handler that returns a promise or a value is left as it is (it needs no service).
 */
export const provide: {
  <ROut>(
    context: Context.Context<ROut>
  ): <R, Tools extends ReadonlyArray<Tool.Any>>(self: Toolkit<R, Tools>) => ProvidedToolkit<R, Tools, ROut>
  <R, Tools extends ReadonlyArray<Tool.Any>, ROut>(
    self: Toolkit<R, Tools>,
    context: Context.Context<ROut>
  ): ProvidedToolkit<R, Tools, ROut>
} = dual(2, (self: Toolkit, context: Context.Context<unknown>): Toolkit => {
  // A context captured in a layer may hold a scope or a span of its own: the call's stay the call's.
  const services = Context.omit(ToolContext, Scope.Scope, Tracer.ParentSpan)(context)
  const tools = self.tools.map((tool): Tool.Any => {
    const handler: unknown = tool.handler
    if (typeof handler !== "function") return tool
    const run = handler as Tool.Any["handler"]
    const copy: Tool.Any = {
      ...tool,
      handler: (input, call) => {
        const body: unknown = run(input, call)
        return Effect.isEffect(body) && !Exit.isExit(body) ? Effect.provide(body, services) : body
      }
    }
    if (platformOwned.has(tool)) platformOwned.add(copy)
    return copy
  })
  return { tools, byName: new Map(tools.map((tool) => [tool.name, tool])), definitions: self.definitions, manifest: self.manifest }
})

/**
 * `toolkit` (or the toolkit an Effect gives, `Toolkit.make(...)`) given the services of the context it is
 * built in (`provide`): what its handlers need is asked of the builder, once, and the toolkit needs nothing
 * more. Built in a layer (`Effect.Service`'s `effect`, `Layer.effect`), the services are the layer's.
 */
export function closed<R, Tools extends ReadonlyArray<Tool.Any>, E, RE>(
  toolkit: Effect.Effect<Toolkit<R, Tools>, E, RE>
): Effect.Effect<ProvidedToolkit<R, Tools, Exclude<R, CallServices>>, E, RE | Exclude<R, CallServices>>
export function closed<R, Tools extends ReadonlyArray<Tool.Any>>(
  toolkit: Toolkit<R, Tools>
): Effect.Effect<ProvidedToolkit<R, Tools, Exclude<R, CallServices>>, never, Exclude<R, CallServices>>
export function closed(toolkit: Toolkit | Effect.Effect<Toolkit, unknown, unknown>): Effect.Effect<Toolkit, unknown, unknown> {
  return Effect.flatMap(
    Effect.isEffect(toolkit) ? toolkit : Effect.succeed(toolkit),
    (made) => Effect.map(Effect.context<never>(), (context) => provide(made, context))
  )
}

/** Every limit violation of a set of tools (empty when it is valid). */
export const validate = (tools: ReadonlyArray<Tool.Any>): Array<Violation> => {
  const owned = new Set(tools.filter((tool) => platformOwned.has(tool)).map((tool) => tool.name))
  const violations = checkEntries(tools.map((tool) => ({
    name: tool.name,
    description: tool.description,
    timeoutMillis: Duration.toMillis(tool.timeout),
    retries: tool.retries
  }))).filter((violation) => violation.rule !== "name-reserved" || !owned.has(violation.tool ?? ""))
  for (const tool of tools) {
    const label = JSON.stringify(tool.name)
    const permanent: unknown = tool.permanent
    if (!Tool.isPermanentList(permanent)) {
      const entries: ReadonlyArray<unknown> | undefined = Array.isArray(permanent) ? permanent : undefined
      const bad = entries?.findIndex((tag) => typeof tag !== "string" || tag === "") ?? -1
      const got = entries === undefined ? shown(permanent) : `[${bad}] = ${shown(entries[bad])}`
      violations.push(new Violation({
        tool: tool.name,
        rule: "permanent-tags",
        message: `${label}: permanent must be an array of non-empty strings (the _tags never retried), got ${got}`
      }))
    }
    const retryable: unknown = tool.retryable
    if (retryable !== undefined && typeof retryable !== "function") {
      violations.push(new Violation({
        tool: tool.name,
        rule: "retryable-function",
        message: `${label}: retryable must be a function (error) => boolean, got ${shown(retryable)}`
      }))
    }
    const handlerProblem = Tool.handlerProblem(tool)
    if (handlerProblem !== undefined) {
      violations.push(new Violation({ tool: tool.name, rule: "handler-function", message: handlerProblem }))
    }
    if (tool.worker !== undefined && tool.worker.protocol !== "file:") {
      violations.push(new Violation({
        tool: tool.name,
        rule: "worker-module",
        message: `${label}: worker must be the URL of the module that exports the tool (worker: import.meta.url), ` +
          `got ${shown(tool.worker.protocol === "invalid:" ? decodeURIComponent(tool.worker.pathname) : tool.worker.href)}`
      }))
    }
    if (Either.isLeft(tool.schemas)) {
      for (const problem of tool.schemas.left) {
        violations.push(new Violation({ tool: tool.name, rule: problem.rule, message: `${JSON.stringify(tool.name)}: ${problem.message}` }))
      }
    }
  }
  return violations
}

/** The limit rules that need only a manifest's data: the platform applies them to what it receives. */
export const checkEntries = (
  entries: ReadonlyArray<{
    readonly name: string
    readonly description: string
    readonly timeoutMillis: number
    readonly retries: number
  }>
): Array<Violation> => {
  const out: Array<Violation> = []
  const add = (tool: string | undefined, rule: Violation["rule"], message: string) =>
    out.push(new Violation({ ...(tool === undefined ? {} : { tool }), rule, message }))
  if (entries.length > maxTools) add(undefined, "max-tools", `toolkit: at most ${maxTools} tools, got ${entries.length}`)
  const seen = new Set<string>()
  for (const { description, name, retries, timeoutMillis } of entries) {
    const label = JSON.stringify(name)
    if (!namePattern.test(name)) add(name, "name-pattern", `${label}: the name must match ${namePattern.source}`)
    if (name.length > maxNameLength) {
      add(name, "name-length", `${label}: the name has ${name.length} characters, at most ${maxNameLength} allowed`)
    }
    if (seen.has(name)) add(name, "name-unique", `${label}: the name is used by more than one tool`)
    seen.add(name)
    if (reservedNames.has(name)) add(name, "name-reserved", `${label}: the name is reserved by the platform`)
    if (typeof description !== "string" || description.length < 1 || description.length > maxDescriptionLength) {
      add(
        name,
        "description-length",
        `${label}: the description must have 1 to ${maxDescriptionLength} characters, has ${
          typeof description === "string" ? description.length : 0
        }`
      )
    }
    if (!(timeoutMillis > 0 && timeoutMillis <= Duration.toMillis(maxTimeout))) {
      add(name, "timeout-range", `${label}: the timeout must be more than 0 and at most 3600 s`)
    }
    if (!Number.isInteger(retries) || retries < 0) {
      add(name, "retries-whole", `${label}: retries must be a whole number >= 0, got ${retries}`)
    }
  }
  return out
}

/** A value in a violation's message: short, and never a throw (a cycle, a bigint). */
const shown = (u: unknown): string => {
  if (typeof u === "string") return u.length > 40 ? `${JSON.stringify(u.slice(0, 40))}...` : JSON.stringify(u)
  if (Array.isArray(u)) return "an array"
  if (typeof u === "function") return "a function"
  return typeof u === "object" && u !== null ? "an object" : String(u)
}
