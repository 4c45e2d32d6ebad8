/**
 * The scripted model of the exec_agent cluster tests (test/platform/ClusterExecAgent.test.ts and its runner
 * child), and what reading a request needs, shared with the embedded platform's (ExecAgent.test.ts).
 */
import type { LanguageModel } from "../../src/index.js"

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
