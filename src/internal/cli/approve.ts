/**
 * `agent-tools approve`: decides a call a suspended platform task waits for. Imports Effect module by
 * module, as main.ts does (start-up time); the platform's client when the command runs.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { runCommand } from "./command.js"
import { load } from "./load.js"
import { BadOptions } from "./options.js"

/** The `approve` command's options. */
interface ApproveOptions {
  readonly url: Option.Option<string>
  readonly token: Option.Option<string>
  readonly task: string
  readonly call: string
  readonly deny: boolean
  readonly reason: Option.Option<string>
}

/**
 * The `approve` command as one Layer: the decision, given the platform's client on the settings, `--url` and
 * `--token` over `PLATFORM_URL` and `PLATFORM_TOKEN` (of the `ConfigProvider` in force).
 */
export const approveLayer = ({ call, deny, reason, task, token, url }: ApproveOptions) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const [PlatformClient] = yield* load(() => import("../../PlatformClient.js"))
    if (Option.isSome(reason) && !deny) {
      return yield* new BadOptions({ message: "--reason goes with --deny: an approval has no reason" })
    }
    if (Option.isSome(token)) {
      yield* Effect.logWarning("--token puts a secret on the command line, where every local user can read it; " +
        "prefer PLATFORM_TOKEN")
    }
    const given = new Map<string, string>()
    if (Option.isSome(url)) given.set("PLATFORM_URL", url.value)
    if (Option.isSome(token)) given.set("PLATFORM_TOKEN", token.value)
    const current = yield* Effect.configProviderWith(Effect.succeed)
    const settings = ConfigProvider.orElse(ConfigProvider.fromMap(given), () => current)
    // Every missing setting at once, before anything connects.
    yield* Effect.withConfigProvider(PlatformClient.requireAll(["PLATFORM_TOKEN", "PLATFORM_URL"]), settings)
    const decided = Effect.flatMap(PlatformClient.PlatformClient, (client) =>
      deny ? client.deny(task, call, { reason: Option.getOrUndefined(reason) }) : client.approve(task, call))
    return Layer.effectDiscard(Effect.zipRight(decided, Console.log(`${deny ? "denied" : "approved"}: call ${call} of task ${task}`))).pipe(
      Layer.provide(PlatformClient.layer),
      Layer.provide(Layer.setConfigProvider(settings))
    )
  }))

/** The `approve` command. */
export const approve = Command.make("approve", {
  url: Options.text("url").pipe(
    Options.withDescription("the platform's WebSocket URL, ws://host:port/rpc (default: PLATFORM_URL)"),
    Options.optional
  ),
  token: Options.text("token").pipe(
    Options.withDescription(
      "the task's agent's platform token (default: PLATFORM_TOKEN; prefer it: every local user sees a command line)"
    ),
    Options.optional
  ),
  task: Options.text("task").pipe(Options.withDescription("the suspended task's id (its TaskSuspended event names it)")),
  call: Options.text("call").pipe(Options.withDescription("the id of the tool call to decide")),
  deny: Options.boolean("deny").pipe(Options.withDescription("deny the call (it never runs) instead of approving it")),
  reason: Options.text("reason").pipe(Options.withDescription("with --deny: why, for the model to read"), Options.optional)
}, (options) => runCommand(approveLayer(options))).pipe(
  Command.withDescription(
    "Approve (or --deny) a call a suspended task waits for, on a platform with a journal; " +
      "the task goes on once every call it waits for is decided"
  )
)
