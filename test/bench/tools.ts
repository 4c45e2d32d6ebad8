/** The trivial tool every benchmark calls: add two numbers. Imports only the modules it needs. */
import { Context, DefaultServices, Effect, Schema, Tracer } from "effect"
import * as Tool from "../../src/Tool.js"

/** `{ a, b } -> a + b`, its effect already complete (no fiber needed). */
export const add = Tool.make("add", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))

/**
 * A tracer of the user's that gets every span and keeps none: what making the spans costs, short of
 * exporting them. With no tracer installed at all, no span is made (Effect's default tracer has no
 * reader), so a bench of "spans on" installs this one.
 */
export const listeningTracer: Tracer.Tracer = Tracer.make({
  span: (...args) => defaultTracer.span(...args),
  context: (f) => f()
})

const defaultTracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)
