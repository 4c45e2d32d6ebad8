/** What the platform tests over a real WebSocket share: a serving process's client, a model's echo. */
import { ConfigProvider, Effect, Layer, type Scope } from "effect"
import { LanguageModel } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient } from "../../src/exports/serve.js"

/**
 * A serving process's client layer: the platform at `url`, as `agentId` with `token`, and `settings` besides (say
 * `IDEMPOTENCY_DB`); `policy` is a `Timing.layer`.
 */
export const clientLayer = (
  options: {
    readonly url: string
    readonly agentId?: string
    readonly token?: string
    readonly settings?: Readonly<Record<string, string>>
  },
  policy: Layer.Layer<never>
) =>
  PlatformClient.layer.pipe(
    Layer.provideMerge(policy),
    Layer.provideMerge(Layer.setConfigProvider(ConfigProvider.fromMap(
      new Map([
        ["AGENT_ID", options.agentId ?? "agent-1"],
        ["PLATFORM_TOKEN", options.token ?? "tok-1"],
        ["PLATFORM_URL", options.url],
        ...Object.entries(options.settings ?? {})
      ])
    )))
  )

/** Every tool result the request carries, as `id:content`, space-separated (a scripted model's answer). */
export const resultsText = (request: LanguageModel.ModelRequest) =>
  request.messages.flatMap((m) => m._tag === "ToolResultMessage" ? [`${m.toolCallId}:${m.content}`] : []).join(" ")

/**
 * The embedded platform on a free loopback port for the scope, its model `script`, `tok-1` for
 * `agent-1` unless `tokens` says otherwise; its URL. `policy` is a `Timing.layer`.
 */
export const embeddedPlatform = (
  script: ReadonlyArray<LanguageModel.ScriptedTurn>,
  policy: Layer.Layer<never>,
  options: {
    readonly tokens?: ReadonlyMap<string, string>
    readonly listen?: Partial<PlatformServer.ListenOptions>
  } = {}
): Effect.Effect<string, never, Scope.Scope> =>
  Effect.flatMap(
    Layer.build(
      PlatformServer.layerWebSocket({ port: 0, ...options.listen }).pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: options.tokens ?? new Map([["tok-1", "agent-1"]]) })),
        Layer.provide(LanguageModel.layerScripted(script)),
        Layer.provide(policy)
      )
    ),
    (context) => Effect.provide(PlatformServer.url, context)
  ).pipe(Effect.orDie)
