/** What the platform tests over a real WebSocket share: a serving process's client, a model's echo. */
import { ConfigProvider, Layer } from "effect"
import { type LanguageModel, PlatformClient } from "../../src/index.js"

/** A serving process's client layer: the platform at `url`, as `agentId` with `token`; `policy` is a `Timing.layer`. */
export const clientLayer = (
  options: { readonly url: string; readonly agentId?: string; readonly token?: string },
  policy: Layer.Layer<never>
) =>
  PlatformClient.layer.pipe(
    Layer.provideMerge(policy),
    Layer.provideMerge(Layer.setConfigProvider(ConfigProvider.fromMap(
      new Map([
        ["AGENT_ID", options.agentId ?? "agent-1"],
        ["PLATFORM_TOKEN", options.token ?? "tok-1"],
        ["PLATFORM_URL", options.url]
      ])
    )))
  )

/** Every tool result the request carries, as `id:content`, space-separated (a scripted model's answer). */
export const resultsText = (request: LanguageModel.ModelRequest) =>
  request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}:${m.content}`] : []).join(" ")
