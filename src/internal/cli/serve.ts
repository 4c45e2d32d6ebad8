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
import * as Cli from "../cli.js"
import { load, loadDemo } from "./load.js"

/** The `serve` command. */
export const serve = Command.make("serve", {
  grace: Options.integer("grace").pipe(
    Options.withDescription(
      "on SIGTERM or SIGINT, the seconds the calls still running may go on before they are interrupted"
    ),
    Cli.withDefault(Duration.toSeconds(shutdownGrace))
  )
}, ({ grace }) =>
  Effect.gen(function*() {
    const [PlatformClient, Serve, Settings] = yield* load(
      () => import("../../PlatformClient.js"),
      () => import("../../Serve.js"),
      () => import("../util/settings.js")
    )
    // Every missing setting at once, before anything connects.
    yield* PlatformClient.requireAll(["AGENT_ID", "PLATFORM_TOKEN", "PLATFORM_URL"])
    const { backendLayer, toolkit } = yield* loadDemo
    // Not registered yet: Serve logs the registration once the platform has accepted it.
    const url = Settings.redactUrl(process.env.PLATFORM_URL ?? "")
    yield* Effect.logInfo(`connecting to ${url} to serve ${toolkit.tools.length} demo tools`)
    return yield* Serve.serveConfig(toolkit, { shutdownGrace: Duration.seconds(grace) }).pipe(
      Effect.provide(Layer.merge(PlatformClient.layer, backendLayer))
    )
  })).pipe(
    Command.withDescription("Serve the demo tools to the platform at PLATFORM_URL as AGENT_ID (PLATFORM_TOKEN)")
  )
