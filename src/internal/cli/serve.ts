/**
 * `agent-tools serve`: the demo tools, or a module's (`--tools`), served to the platform at `PLATFORM_URL`.
 * Imports Effect module by module, as main.ts does (start-up time); the rest when the command runs.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { shutdownGrace } from "../../Timing.js"
import { redactUrl } from "../util/settings.js"
import * as Cli from "../cli.js"
import { runCommand } from "./command.js"
import { load, loadDemo } from "./load.js"
import { platformUrl } from "./settings.js"
import { loadTools } from "./toolsModule.js"

/** `--tools`: a module whose exported tools are served instead of the demo's (`serve`, `mcp`). */
export const toolsOption = Options.text("tools").pipe(
  Options.withDescription(
    "a module (./my-tools.ts) whose exported tools or toolkit are served instead of the demo tools; " +
      "a `layer` export gives what their handlers need"
  ),
  Options.optional
)

/** The tools to serve: the module's of `--tools`, else the demo's with their backend. */
export const chooseTools = (tools: Option.Option<string>) =>
  Option.isSome(tools)
    ? Effect.map(loadTools(tools.value), (loaded) => ({
      toolkit: loaded.toolkit,
      layer: loaded.layer,
      what: `the tools of ${loaded.source}`
    }))
    : Effect.map(loadDemo, ({ backendLayer, toolkit }) => ({
      toolkit,
      layer: backendLayer as Layer.Layer<any, any, never>,
      what: "demo tools"
    }))

/**
 * The `serve` command as one Layer: the demo tools (or `--tools`') served to the platform at `PLATFORM_URL` as
 * `AGENT_ID` until the process is stopped (then drained for `grace` seconds), given the platform's client and what
 * the tools need (the demo's backend, or the module's `layer`).
 */
export const serveLayer = (options: { readonly grace: number; readonly tools: Option.Option<string> }) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const [PlatformClient, Serve] = yield* load(() => import("../../PlatformClient.js"), () => import("../../Serve.js"))
    // Every missing setting at once, before anything connects.
    yield* PlatformClient.requireAll(["AGENT_ID", "PLATFORM_TOKEN", "PLATFORM_URL"])
    const { layer, toolkit, what } = yield* chooseTools(options.tools)
    // Not registered yet: Serve logs the registration once the platform has accepted it.
    yield* Effect.logInfo(`connecting to ${redactUrl(yield* platformUrl)} to serve ${toolkit.tools.length} ${what}`)
    return Layer.effectDiscard(Serve.serveConfig(toolkit, { shutdownGrace: Duration.seconds(options.grace) })).pipe(
      Layer.provide(Layer.merge(PlatformClient.layer, layer))
    )
  }))

/** The `serve` command. */
export const serve = Command.make("serve", {
  grace: Options.integer("grace").pipe(
    Options.withDescription(
      "on SIGTERM or SIGINT, the seconds the calls still running may go on before they are interrupted"
    ),
    Cli.withDefault(Duration.toSeconds(shutdownGrace))
  ),
  tools: toolsOption
}, (options) => runCommand(serveLayer(options))).pipe(
  Command.withDescription(
    "Serve the demo tools, or a module's (--tools), to the platform at PLATFORM_URL as AGENT_ID (PLATFORM_TOKEN)"
  )
)
