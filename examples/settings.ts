/** Settings from a map, not the environment: every setting is read through Effect's Config. */
import { ConfigProvider, Effect } from "effect"
import type { Toolkit } from "../src/index.js"
import { PlatformClient, Serve } from "../src/exports/serve.js"

// #region provider
// The settings in a map (a test's, or a program's that keeps them elsewhere) ...
export const settings = ConfigProvider.fromMap(new Map([
  ["AGENT_ID", "support"],
  ["PLATFORM_URL", "ws://127.0.0.1:8787/rpc"],
  ["PLATFORM_TOKEN", "tok-1"]
]))
// ... or the map first, then the environment for what it lacks.
export const overEnv = ConfigProvider.orElse(settings, () => ConfigProvider.fromEnv())

export const serve = (toolkit: Toolkit.Toolkit<never>) =>
  Serve.serveConfig(toolkit).pipe(
    Effect.provide(PlatformClient.layer), // reads PLATFORM_URL and PLATFORM_TOKEN; serveConfig, AGENT_ID
    Effect.withConfigProvider(settings)   // for all of it; a layer's: Layer.setConfigProvider(settings)
  )
// #endregion
