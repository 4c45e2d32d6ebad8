/**
 * A file inside the repository that imports the package by its name, as the docs' code blocks do:
 * `npx tsx` runs it with no build (test/SelfImport.test.ts). Prints where the names resolved, and a
 * tool's output.
 */
import { Effect, Schema } from "effect"
import { Tool } from "agent-tools"
import * as PlatformCluster from "agent-tools/cluster"

const greet = Tool.make("greet", {
  description: "Greets someone.",
  input: { name: Schema.String },
  output: Schema.String,
  timeout: "5 seconds"
}, ({ name }) => Effect.succeed(`hello, ${name}`))

console.log(JSON.stringify({
  output: await Effect.runPromise(Tool.test(greet, { name: "Ada" })),
  cluster: typeof PlatformCluster.layer,
  resolved: [import.meta.resolve("agent-tools"), import.meta.resolve("agent-tools/cluster")]
}))
