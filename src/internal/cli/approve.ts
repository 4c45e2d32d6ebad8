/**
 * `agent-tools approve`: decides a call a suspended platform task waits for. Imports Effect module by
 * module, as main.ts does (start-up time); the platform's client when the command runs.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { load } from "./load.js"
import { BadOptions } from "./options.js"

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
}, ({ call, deny, reason, task, token, url }) =>
  Effect.gen(function*() {
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
    const settings = ConfigProvider.orElse(ConfigProvider.fromMap(given), ConfigProvider.fromEnv)
    // Every missing setting at once, before anything connects.
    yield* Effect.withConfigProvider(PlatformClient.requireAll(["PLATFORM_TOKEN", "PLATFORM_URL"]), settings)
    yield* Effect.flatMap(PlatformClient.PlatformClient, (client) =>
      deny ? client.deny(task, call, { reason: Option.getOrUndefined(reason) }) : client.approve(task, call)).pipe(
        Effect.provide(PlatformClient.layer),
        Effect.withConfigProvider(settings)
      )
    yield* Console.log(`${deny ? "denied" : "approved"}: call ${call} of task ${task}`)
  })).pipe(
    Command.withDescription(
      "Approve (or --deny) a call a suspended task waits for, on a platform with a journal; " +
        "the task goes on once every call it waits for is decided"
    )
  )
