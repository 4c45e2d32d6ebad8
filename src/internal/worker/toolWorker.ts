/**
 * The entry of a worker thread that runs tools made with `worker: import.meta.url` (design: Worker
 * threads): it loads the tools' module (`workerData.module`), finds each tool by its name among the
 * module's exports (a tool, a toolkit, or an array of tools), and runs the body it is asked for on
 * the input it is given, with a `Call` of the call's ids and deadline. The pool stops the thread at
 * the deadline, so the body's `signal` is never aborted here.
 */
import { Cause, Effect, Exit } from "effect"
import { workerData } from "node:worker_threads"
import * as Tool from "../../Tool.js"
import { type CallServices, makeCall, ToolContext, type ToolCallInfo } from "../../ToolContext.js"
import { serveJobs } from "./pool.js"

/** What the pool sends with each job: the decoded input and the call's context. */
export interface ToolJob {
  readonly input: unknown
  readonly info: ToolCallInfo
}

const href = String((workerData as { readonly module: string }).module)

/** The module's tools by name: exported tools, and the tools of exported toolkits and arrays. */
const toolsOf = (exports: Record<string, unknown>): Map<string, Tool.Any> => {
  const tools = new Map<string, Tool.Any>()
  const add = (u: unknown) => {
    if (Tool.isTool(u)) tools.set(u.name, u)
  }
  for (const value of Object.values(exports)) {
    add(value)
    if (Array.isArray(value)) value.forEach(add)
    else if (typeof value === "object" && value !== null && "tools" in value && Array.isArray(value.tools)) value.tools.forEach(add)
  }
  return tools
}

serveJobs(import(href).then(toolsOf), async (tools, name, job: ToolJob) => {
  const tool = tools.get(name)
  if (tool === undefined) {
    throw new Error(`${href} exports no tool named ${name}: export it (export const tool = Tool.make(${JSON.stringify(name)}, ...))`)
  }
  const call = makeCall(job.info)
  const body: unknown = tool.handler(job.input, call)
  if (!Effect.isEffect(body)) return await body
  // An Effect body (needing nothing but what a call gives, `ToolContext.CallServices`): its failure is
  // thrown as itself, as a throw of a plain body. Its scope closes as it ends (the deadline ends the thread).
  const effect = body as Effect.Effect<unknown, unknown, CallServices>
  const exit = await Effect.runPromiseExit(Effect.scoped(Effect.provideService(effect, ToolContext, call)))
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
})
