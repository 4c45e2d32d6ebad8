/**
 * Whether a platform process (the embedded platform, a cluster's runner) serves the operator API (docs:
 * operations), and with which tokens: its
 * `operatorTokens`, else those of `PLATFORM_OPERATOR_TOKENS`; none, no API (and its modules are not loaded).
 * Tokens that cannot be used stop the platform's start, saying why (never which token).
 */
import { Config, Effect, Option, Redacted, type Scope } from "effect"
import { type OperatorToken, type Options, operatorTokensProblem, parseOperatorTokens } from "../Options.js"
import type { OperatorListener } from "./Listener.js"
import type { OperatedPlatform } from "./Operations.js"

/** The setting `Options.operatorTokens` defaults to. */
export const tokensVariable = "PLATFORM_OPERATOR_TOKENS"

/** The operator tokens: the options', else the setting's; a problem with them is a defect naming where they came from. */
export const operatorTokens = (options: Options): Effect.Effect<ReadonlyArray<OperatorToken>> =>
  Effect.gen(function*() {
    if (options.operatorTokens !== undefined) {
      const problem = operatorTokensProblem(options.operatorTokens)
      if (problem !== undefined) return yield* Effect.dieMessage(`platform options: operatorTokens: ${problem}`)
      return options.operatorTokens
    }
    const setting = yield* Effect.orDie(Config.option(Config.redacted(tokensVariable)))
    if (Option.isNone(setting)) return []
    const text = Redacted.value(setting.value)
    const problem = operatorTokensProblem(text)
    if (problem !== undefined) return yield* Effect.dieMessage(`${tokensVariable}: ${problem}; the form is token:role:name`)
    return parseOperatorTokens(text)
  })

/** The operator API's listener for a platform process, or undefined when it has no operator token. */
export const operatorListener = (
  platform: OperatedPlatform
): Effect.Effect<OperatorListener["Type"] | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    const tokens = yield* operatorTokens(platform.options)
    if (tokens.length === 0) return undefined
    const server = yield* Effect.promise(() => import("./OperatorServer.js"))
    const console = platform.options.console
    return yield* server.make({
      tokens,
      hosts: platform.options.operatorHosts ?? [],
      console: console === true ? {} : console === false ? undefined : console
    }, platform)
  })
