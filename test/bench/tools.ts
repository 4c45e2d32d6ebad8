/** The trivial tool every benchmark calls: add two numbers. Imports only the modules it needs. */
import { Effect, Schema } from "effect"
import * as Tool from "../../src/Tool.js"

/** `{ a, b } -> a + b`, its effect already complete (no fiber needed). */
export const add = Tool.make("add", {
  description: "Add two numbers.",
  input: { a: Schema.Number, b: Schema.Number },
  output: Schema.Number,
  timeout: "10 seconds"
}, ({ a, b }) => Effect.succeed(a + b))
