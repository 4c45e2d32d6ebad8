/** The console: browser pages at /console on the platform's port, over the operator API. */
import { Layer, Redacted } from "effect"
import { type LanguageModel } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Model } from "../src/exports/providers.js"

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ text: "Nothing to do." }]

// #region serve
// The platform with its operator API and the console on the same port: http://127.0.0.1:8787/console
export const platform = PlatformServer.layerWebSocket({ port: 8787 }).pipe(
  Layer.provide(PlatformServer.layerHandlers({
    tokens: PlatformServer.parseTokens("secret-1:support-agent"),
    journal: "tasks.sqlite",
    operatorTokens: [
      { token: Redacted.make("a-long-random-approver-token"), role: "approver", name: "alice" }
    ],
    console: { traceUrl: "http://localhost:16686/trace/{traceId}" } // or `true`: no trace links
  })),
  Layer.provide(Model.layer("scripted", { script }))
)
// #endregion
