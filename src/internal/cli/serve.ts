/**
 * `agent-tools serve`: the demo tools, served to the platform at `PLATFORM_URL`. Imports Effect module
 * by module, as main.ts does (start-up time); the rest when the command runs.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { shutdownGrace } from "../../Timing.js"
import { redactUrl } from "../util/settings.js"
import * as Cli from "../cli.js"
import { runCommand } from "./command.js"
import { load, loadDemo } from "./load.js"
import { platformUrl } from "./settings.js"

/**
 * The `serve` command as one Layer: the demo tools served to the platform at `PLATFORM_URL` as `AGENT_ID` until
 * the process is stopped (then drained for `grace` seconds), given the platform's client and the demo's backend.
 */
export const serveLayer = (options: { readonly grace: number }) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const [PlatformClient, Serve] = yield* load(() => import("../../PlatformClient.js"), () => import("../../Serve.js"))
    // Every missing setting at once, before anything connects.
    yield* PlatformClient.requireAll(["AGENT_ID", "PLATFORM_TOKEN", "PLATFORM_URL"])
    const { backendLayer, toolkit } = yield* loadDemo
    // Not registered yet: Serve logs the registration once the platform has accepted it.
    yield* Effect.logInfo(`connecting to ${redactUrl(yield* platformUrl)} to serve ${toolkit.tools.length} demo tools`)
    return Layer.effectDiscard(Serve.serveConfig(toolkit, { shutdownGrace: Duration.seconds(options.grace) })).pipe(
      Layer.provide(Layer.merge(PlatformClient.layer, backendLayer))
    )
  }))

/** The `serve` command. */
export const serve = Command.make("serve", {
  grace: Options.integer("grace").pipe(
    Options.withDescription(
      "on SIGTERM or SIGINT, the seconds the calls still running may go on before they are interrupted"
    ),
    Cli.withDefault(Duration.toSeconds(shutdownGrace))
  )
}, (options) => runCommand(serveLayer(options))).pipe(
  Command.withDescription("Serve the demo tools to the platform at PLATFORM_URL as AGENT_ID (PLATFORM_TOKEN)")
)
