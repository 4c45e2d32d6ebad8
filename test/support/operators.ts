/**
 * What the operator API's tests share: an operator token of each role (viewer, approver, admin, named vera, alice
 * and root), a clock fixed at a time, under which the journal writes its times, and the embedded platform they
 * operate (a journal in memory, a scripted model, a WebSocket, a client of agent-1 in the process).
 */
import { Clock, ConfigProvider, Context, Effect, Exit, Layer, Redacted, Scope } from "effect"
import { Journal, LanguageModel } from "../../src/index.js"
import { PlatformServer } from "../../src/exports/platform.js"
import { PlatformClient } from "../../src/exports/serve.js"

export const viewer = "viewer-token-0123456789"
export const approver = "approver-token-0123456789"
export const admin = "admin-token-0123456789"
export const operatorTokens: ReadonlyArray<PlatformServer.OperatorToken> = [
  { token: Redacted.make(viewer), role: "viewer", name: "vera" },
  { token: Redacted.make(approver), role: "approver", name: "alice" },
  { token: Redacted.make(admin), role: "admin", name: "root" }
]

/** A clock that reads `millis`: the journal's times of what is written under it. */
export const clockAt = (millis: number): Clock.Clock => ({
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => millis,
  currentTimeMillis: Effect.succeed(millis),
  unsafeCurrentTimeNanos: () => BigInt(millis) * 1_000_000n,
  currentTimeNanos: Effect.succeed(BigInt(millis) * 1_000_000n),
  sleep: () => Effect.void
})

/** agent-1's settings: its id and token. */
export const agentSettings = ConfigProvider.fromMap(new Map([["AGENT_ID", "agent-1"], ["PLATFORM_TOKEN", "tok-1"]]))

/**
 * The embedded platform of agent-1 (token `tok-1`) with a journal in memory, the model of `script` (each
 * conversation its own), on a WebSocket on a free port, and a client of agent-1 in this process; kept until the
 * scope closes. `config` is the platform's settings (none by default).
 */
export const startOperatedPlatform = (options: {
  readonly script: ReadonlyArray<LanguageModel.ScriptedTurn>
  readonly operatorTokens?: ReadonlyArray<PlatformServer.OperatorToken> | undefined
  readonly console?: PlatformServer.Options["console"]
  readonly config?: ConfigProvider.ConfigProvider | undefined
  /** The platform's journal: in memory by default. */
  readonly journal?: Layer.Layer<Journal.Journal> | undefined
}) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
    const handlers = yield* Layer.buildWithScope(
      PlatformServer.layerHandlers({
        tokens: new Map([["tok-1", "agent-1"]]),
        operatorTokens: options.operatorTokens,
        ...(options.console === undefined ? {} : { console: options.console })
      }).pipe(
        Layer.provideMerge(options.journal ?? Journal.layerMemory),
        Layer.provideMerge(LanguageModel.layerScripted(options.script, { perConversation: true })),
        Layer.provide(Layer.setConfigProvider(options.config ?? ConfigProvider.fromMap(new Map())))
      ),
      scope
    )
    const listening = yield* Layer.buildWithScope(
      PlatformServer.layerWebSocket({ port: 0 }).pipe(Layer.provide(Layer.succeedContext(handlers))),
      scope
    )
    const client = yield* Effect.map(
      Layer.buildWithScope(
        PlatformClient.layerTest.pipe(Layer.provide(Layer.succeedContext(handlers)), Layer.provide(Layer.setConfigProvider(agentSettings))),
        scope
      ),
      Context.get(PlatformClient.PlatformClient)
    )
    const { port } = Context.get(listening, PlatformServer.Listening)
    return { scope, port, journal: Context.get(handlers, Journal.Journal), client }
  })
