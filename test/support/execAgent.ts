/**
 * What the exec_agent tests share, on the embedded platform (test/platform/ExecAgent.test.ts) and in
 * cluster mode (ClusterExecAgent.test.ts and its runner child): the scripted model of the cluster's
 * runners (`router`), reading a request, the agents' tools, how an event reads, a process replaced.
 */
import { Deferred, type Duration, Effect, Exit, Fiber, Schedule, Schema, Scope } from "effect"
import { type LanguageModel, Tool } from "../../src/index.js"
import { type Protocol } from "../../src/exports/protocol.js"

/** The prompt agent-a's task gives the agent it calls. */
export const childPrompt = "Look up order A-1 and say its status."

/** The first user message of the conversation: which task is asking. */
export const promptOf = (request: LanguageModel.ModelRequest): string =>
  request.messages.find((m) => m._tag === "UserMessage")?.text ?? ""

/** The tool results the model read, as `id=content` (errors `id!content`). */
export const resultsOf = (request: LanguageModel.ModelRequest) =>
  request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}${m.isError ? "!" : "="}${m.content}`] : [])

/** How many turns the model gave before this request. */
export const stepOf = (request: LanguageModel.ModelRequest) => request.messages.filter((m) => m._tag === "AssistantMessage").length

/** A tool call of the scripted model. */
export const call = (id: string, name: string, args: unknown = {}): LanguageModel.ToolCall => ({ id, name, arguments: JSON.stringify(args) })

/**
 * The model of every task, by its prompt and step (a task taken up on any runner is answered where it
 * stands): the child looks the order up with its own tool, then answers; a parent calls `list_agents`,
 * then `exec_agent` on the agent its prompt names (`Ask <agent> ...`), then answers with what it read.
 */
export const router: LanguageModel.ScriptedTurn = (request) => {
  const step = stepOf(request)
  if (promptOf(request) === childPrompt) {
    return step === 0
      ? { toolCalls: [call("b1", "lookup", { orderId: "A-1" })] }
      : { text: `agent-b read: ${resultsOf(request).join(" ")}` }
  }
  const target = promptOf(request).split(" ")[1]!
  if (step === 0) return { toolCalls: [call("a1", "list_agents")] }
  if (step === 1) return { toolCalls: [call("a2", "exec_agent", { agent: target, prompt: childPrompt })] }
  return { text: resultsOf(request).join(" | ") }
}

/** A serving process of the called agent, closed to make it go away, and the calls its tool began. */
export interface Replaceable {
  readonly scope: Scope.CloseableScope
  readonly runs: Array<string>
}

/**
 * The process of two given the child task goes away once its call began (its scope closed: it
 * deregisters), then `gate` lets calls finish: the child has to go on in the other. The parent's
 * output, and the calls each process began (the one gone first).
 */
export const replacedMidCall = <E>(
  processes: readonly [Replaceable, Replaceable],
  gate: Deferred.Deferred<void>,
  parent: Fiber.Fiber<string, E>
) =>
  Effect.gen(function*() {
    yield* Effect.sync(() => processes.findIndex((p) => p.runs.length > 0)).pipe(
      Effect.repeat({ until: (given) => given >= 0, schedule: Schedule.spaced("10 millis") }),
      Effect.timeout("30 seconds")
    )
    const [gone, other] = processes[0].runs.length > 0 ? processes : [processes[1], processes[0]]
    yield* Scope.close(gone.scope, Exit.void)
    yield* Deferred.succeed(gate, undefined)
    const output = yield* Fiber.join(parent).pipe(Effect.timeout("30 seconds"))
    yield* Scope.close(other.scope, Exit.void)
    return { output, runs: [gone.runs, other.runs] }
  })

/** agent-b's tool: looks an order up, counting its runs in `runs`. */
export const lookupTool = (
  runs: Array<string>,
  options: {
    readonly needsApproval?: boolean
    readonly takes?: Duration.DurationInput
    readonly gate?: Deferred.Deferred<void>
    /** Where a run interrupted before it answered is noted, with the time it was interrupted. */
    readonly interrupted?: Array<{ readonly orderId: string; readonly at: number }>
    /** Where each run's deadline (epoch milliseconds) is noted. */
    readonly deadlines?: Array<number>
  } = {}
) =>
  Tool.make("lookup", {
    description: "Looks an order up.",
    input: { orderId: Schema.String },
    output: Schema.String,
    timeout: "30 seconds",
    needsApproval: options.needsApproval
  }, ({ orderId }, call) =>
    Effect.zipRight(
      Effect.sync(() => (options.deadlines?.push(call.deadlineAt), runs.push(`lookup ${orderId}`))),
      Effect.as(
        Effect.zipRight(Effect.sleep(options.takes ?? "0 millis"), options.gate === undefined ? Effect.void : Deferred.await(options.gate)),
        `order ${orderId}: shipped`
      )
    ).pipe(Effect.onInterrupt(() => Effect.sync(() => void options.interrupted?.push({ orderId, at: Date.now() })))))

/** agent-a's own tool, never called here: its process serves something else than agent-b's. */
export const noteTool = (runs: Array<string>) =>
  Tool.make("note", { description: "Takes a note.", input: { text: Schema.String }, timeout: "10 seconds" }, ({ text }) =>
    Effect.sync(() => void runs.push(`note ${text}`)))

/** How an event reads in an assertion. */
export const described = (event: Protocol.TaskEvent): string | undefined => {
  switch (event._tag) {
    case "SubTaskStarted":
      return `sub-task ${event.agentId} of ${event.toolCallId}`
    case "SubTaskEnded":
      return `sub-task of ${event.toolCallId} ${event.outcome}`
    case "ToolCallRequested":
      return `requested ${event.name}`
    case "TaskCompleted":
      return `done`
    case "TaskFailed":
      return `failed ${event.reason}`
    default:
      return undefined
  }
}
