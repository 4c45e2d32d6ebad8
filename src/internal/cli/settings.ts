/**
 * The settings the CLI (`src/main.ts`) reads, each through Effect's `Config`: the `ConfigProvider` in
 * force says where they come from (the environment, by default; a test gives a map with
 * `Layer.setConfigProvider(ConfigProvider.fromMap(...))`). The log level (`LOG_LEVEL`, `DEBUG=true`);
 * the settings that must have a form, checked at once (`settingsUsable`); each command's own (the
 * platform's, `MCP_TOKENS`, the URL `serve` names), and the token lists' check. An empty value counts
 * as unset but where said (`MCP_TOKENS`). Imports Effect module by module, as main.ts does (start-up time).
 */
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { optionalString } from "../util/settings.js"
import { BadOptions } from "./options.js"

/** A setting's text, "" when it is unset. */
const text = (name: string): Config.Config<string> => Config.string(name).pipe(Config.withDefault(""))

/** A secret setting's text (a token list, a database URL), redacted; "" when it is unset. */
const secret = (name: string): Config.Config<Redacted.Redacted<string>> =>
  Config.redacted(name).pipe(Config.withDefault(Redacted.make("")))

/** The log level named `name` (any case, blanks around it ignored), or undefined for a name of none. */
const levelNamed = (name: string): LogLevel.LogLevel | undefined =>
  LogLevel.allLevels.find((level) => level.label.toLowerCase() === name.trim().toLowerCase())

/** `DEBUG=true`: the same as `LOG_LEVEL=debug`. (`DEBUG` is other programs' too, `DEBUG=express:*`: nothing else means anything.) */
const debug: Effect.Effect<boolean> = Effect.map(optionalString("DEBUG"), (value) => Option.getOrUndefined(value) === "true")

/**
 * The log level `LOG_LEVEL` names (default info; undefined for a name of none, which `settingsUsable` refuses).
 * DEBUG=true is LOG_LEVEL=debug: registration and heartbeat lines, a fatal error's full cause.
 */
export const logLevel: Effect.Effect<LogLevel.LogLevel | undefined> = Effect.flatMap(debug, (on) =>
  on
    ? Effect.succeed(LogLevel.Debug)
    : Effect.map(optionalString("LOG_LEVEL"), (name) => levelNamed(Option.getOrElse(name, () => "info"))))

/** A URL of one of `schemes` (`ws:`, `https:`...), as `new URL` reads it. */
const isUrl = (schemes: ReadonlyArray<string>) => (text: string): boolean => {
  try {
    return schemes.includes(new URL(text).protocol)
  } catch {
    return false
  }
}

/**
 * The settings the commands read that must have a form, each with the form it needs (docs/configuration.md):
 * one that is set but cannot be used refuses the start, naming it and the form, never echoing its value (it may hold
 * a secret). The tokens' lists and the OpenTelemetry variables are checked where they are read, with their entries.
 */
export const settingForms: ReadonlyArray<readonly [string, (text: string) => boolean, string]> = [
  ["LOG_LEVEL", (text) => levelNamed(text) !== undefined, `one of ${
    LogLevel.allLevels.map((level) => level.label.toLowerCase()).join(", ")
  }`],
  [
    "PLATFORM_URL",
    (text) => text.split(",").map((u) => u.trim()).filter((u) => u !== "").every(isUrl(["ws:", "wss:"])),
    "ws://host:port/rpc (or wss://), or a comma-separated list of them"
  ],
  ["PLATFORM_DATABASE", isUrl(["postgres:", "postgresql:"]), "postgres://user:password@host:port/db"],
  ["DEMO_APPROVALS", (text) => text === "console", "console (the demo's refund then waits for a decision in its console)"],
  ...["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GEMINI_BASE_URL", "OPENROUTER_BASE_URL", "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"].map(
    (name) => [name, isUrl(["http:", "https:"]), "an http:// or https:// URL"] as const
  )
]

/**
 * Every setting of `settingForms` that is set but cannot be used refuses the start (one line, exit 1); `LOG_LEVEL`
 * is not read with `DEBUG=true`.
 */
export const settingsUsable: Effect.Effect<void, BadOptions> = Effect.gen(function*() {
  const debugging = yield* debug
  for (const [name, usable, form] of settingForms) {
    if (name === "LOG_LEVEL" && debugging) continue
    const value = (yield* Effect.orElseSucceed(text(name), () => "")).trim()
    if (value !== "" && !usable(value)) return yield* new BadOptions({ message: `${name} is malformed: ${form}` })
  }
})

/** The `platform` command's settings; its options, when given, win over them. */
export const platformSettings = Config.all({
  /** `PLATFORM_TOKENS`: `token:agent` pairs. */
  tokens: secret("PLATFORM_TOKENS"),
  /** `PLATFORM_AGENT_CALLS`: `caller:callee` pairs. */
  agentCalls: text("PLATFORM_AGENT_CALLS"),
  /** `PLATFORM_JOURNAL`: the tasks' SQLite file. */
  journal: text("PLATFORM_JOURNAL")
})

/** `PLATFORM_DATABASE` (`platform`, `platform migrate`): the cluster's PostgreSQL URL; it holds a password. */
export const platformDatabase: Config.Config<Redacted.Redacted<string>> = secret("PLATFORM_DATABASE")

/** `PLATFORM_URL`, "" when unset: the URL `serve` says it connects to, and the operating commands' platform. */
export const platformUrl: Config.Config<string> = text("PLATFORM_URL")

/** `DEMO_APPROVALS`, "" when unset; `console`: the demo leaves its approvals to a person in its console. */
export const demoApprovals: Config.Config<string> = text("DEMO_APPROVALS")

/** `AGENT_ID`, "" when unset: the agent `submit` submits as (its `--agent` wins). */
export const agentIdSetting: Config.Config<string> = text("AGENT_ID")

/** `PLATFORM_OPERATOR_TOKEN`, "" when unset: the operator token the operating commands send (`tasks`, `approvals`, `agents`). */
export const operatorToken: Config.Config<Redacted.Redacted<string>> = secret("PLATFORM_OPERATOR_TOKEN")

/**
 * The token:agent pairs of `text` (from `source`); a malformed entry fails the start, named by its
 * position, not its text (a token is a secret).
 */
export const tokenPairs = (
  parse: (text: string) => ReadonlyMap<string, string>,
  text: string,
  source: string,
  form: { readonly pair: string; readonly example: string } = {
    pair: "token:agent",
    example: "tok-1:agent-a,tok-2:agent-b"
  }
): Effect.Effect<ReadonlyMap<string, string>, BadOptions> => {
  const entries = text.split(/[,\n]/).map((entry) => entry.trim()).filter((entry) => entry !== "")
  const bad = entries.flatMap((entry, i) => parse(entry).size === 1 ? [] : [i + 1])
  return bad.length === 0
    ? Effect.succeed(parse(text))
    : Effect.fail(
      new BadOptions({
        message: `${source} is malformed: ${bad.length === 1 ? "entry" : "entries"} ${bad.join(", ")} of ${entries.length} ` +
          `${bad.length === 1 ? "is" : "are"} not ${form.pair}; the form is ${form.pair} pairs, comma-separated or one ` +
          `a line, e.g. ${form.example}`
      })
    )
}

const noMcpToken = "MCP_TOKENS is set but holds no token:name pair"

/**
 * `MCP_TOKENS` (`token:name` pairs, parsed by what `parser` gives, loaded past the blank check) for `mcp --http`: undefined when unset, or over stdio. Set, it
 * must hold a token: a value that holds none (empty, blanks, `" , "`) refuses the start rather than serve
 * unauthenticated; a malformed one too, naming entries, never tokens.
 */
export const mcpTokens = (
  http: boolean,
  parser: Effect.Effect<(text: string) => ReadonlyMap<string, string>>
): Effect.Effect<ReadonlyMap<string, string> | undefined, BadOptions> =>
  Effect.gen(function*() {
    if (!http) return undefined
    // Unset is no tokens; set but empty is not (`optional` would take it for unset).
    const set = yield* Effect.orElseSucceed(Config.option(Config.redacted("MCP_TOKENS")), () => Option.none())
    if (Option.isNone(set)) return undefined
    const tokens = Redacted.value(set.value)
    if (tokens.trim() === "") return yield* new BadOptions({ message: noMcpToken })
    const pairs = yield* tokenPairs(yield* parser, tokens, "MCP_TOKENS", { pair: "token:name", example: "tok-1:ide,tok-2:ci" })
    // Set but empty (" , "): refused, not served without the tokens someone meant to require.
    if (pairs.size === 0) return yield* new BadOptions({ message: noMcpToken })
    return pairs
  })
