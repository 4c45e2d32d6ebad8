/**
 * What a call served over MCP may ask its client (design: MCP): the user, by elicitation, and the client's model,
 * by sampling. `Mcp.ts` adds them to a call's services.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { RELATED_TASK_META_KEY } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect } from "effect"
import { Sampling, SamplingError } from "../../Sampling.js"
import { UserPrompt, UserPromptError } from "../../UserPrompt.js"

/** What a request handler is given by the SDK. */
export type Extra = Parameters<Parameters<Server["setRequestHandler"]>[1]>[1]

/**
 * What a call may ask the client (design: MCP), when the client said it can: the user, through
 * elicitation (the `UserPrompt` that `ask_user` and approvals use), and its model, through sampling
 * (`Sampling`). Over HTTP the request goes on the session's stream, as notifications do. A call of an MCP task
 * (`relatedTaskId`) names its task in each request's `_meta`, as MCP asks.
 */
export const clientServices = (
  server: Server,
  extra: Extra,
  related: boolean,
  signal: AbortSignal,
  context: Context.Context<never>,
  relatedTaskId?: string
): Context.Context<never> => {
  const capabilities = server.getClientCapabilities()
  if (capabilities?.elicitation === undefined && capabilities?.sampling === undefined) return context
  const options = { signal, ...(related ? { relatedRequestId: extra.requestId } : {}) }
  const _meta = relatedTaskId === undefined ? undefined : { [RELATED_TASK_META_KEY]: { taskId: relatedTaskId } }
  const describe = (error: unknown) => error instanceof Error ? error.message : String(error)
  const prompt = capabilities?.elicitation === undefined ? undefined : UserPrompt.of({
    ask: (question) =>
      Effect.tryPromise({
        try: () =>
          server.elicitInput({
            ...(_meta === undefined ? {} : { _meta }),
            message: question,
            requestedSchema: {
              type: "object",
              properties: { answer: { type: "string", title: "Answer", description: question } },
              required: ["answer"]
            }
          }, options),
        catch: (error) => new UserPromptError({ message: `the client gave no answer (${describe(error)})` })
      }).pipe(Effect.flatMap((result) => {
        const answer = result.content?.answer
        if (result.action === "accept" && typeof answer === "string") return Effect.succeed(answer)
        return Effect.fail(new UserPromptError({
          message: result.action === "accept" ? "the client's answer has no text" : `the user ${result.action === "decline" ? "declined" : "cancelled"} the question`
        }))
      }))
  })
  const sampling = capabilities?.sampling === undefined ? undefined : Sampling.of({
    ask: (text, ask) =>
      Effect.tryPromise({
        try: () =>
          server.createMessage({
            ...(_meta === undefined ? {} : { _meta }),
            messages: [{ role: "user", content: { type: "text", text } }],
            maxTokens: ask?.maxTokens ?? 1024
          }, options),
        catch: (error) => new SamplingError({ message: `the client's model gave no answer (${describe(error)})` })
      }).pipe(Effect.flatMap((result) =>
        result.content.type === "text"
          ? Effect.succeed(result.content.text)
          : Effect.fail(new SamplingError({ message: `the client's model answered ${result.content.type}, not text` }))
      ))
  })
  const prompted = prompt === undefined ? context : Context.add(context, UserPrompt, prompt)
  return sampling === undefined ? prompted : Context.add(prompted, Sampling, sampling)
}
