/** The operator API: operator tokens beside the agents', and a typed client made from the API's Schemas. */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Effect, Layer, Redacted } from "effect"
import { type LanguageModel } from "../src/index.js"
import { PlatformServer } from "../src/exports/platform.js"
import { Model } from "../src/exports/providers.js"

const script: ReadonlyArray<LanguageModel.ScriptedTurn> = [{ text: "Nothing to do." }]

// #region serve
// The platform with its operator API under /api/v1 on the same port (loopback by default).
export const platform = PlatformServer.layerWebSocket({ port: 8787 }).pipe(
  Layer.provide(PlatformServer.layerHandlers({
    tokens: PlatformServer.parseTokens("secret-1:support-agent"),
    journal: "tasks.sqlite", // tasks, timelines and approvals are read from the journal
    operatorTokens: [        // else PLATFORM_OPERATOR_TOKENS (token:role:name,...); none: no API
      { token: Redacted.make("a-long-random-viewer-token"), role: "viewer", name: "dashboard" },
      { token: Redacted.make("a-long-random-approver-token"), role: "approver", name: "alice" }
    ],
    operatorHosts: ["platform.internal:8787"] // Host values besides 127.0.0.1:8787 and localhost:8787
  })),
  Layer.provide(Model.layer("scripted", { script }))
)
// #endregion

// #region client
// A typed client of the same API (its Schemas decode the answers): the tasks waiting for a person.
export const waitingForApproval = (baseUrl: string, token: string) =>
  Effect.gen(function*() {
    const api = yield* HttpApiClient.make(PlatformServer.OperatorApi, {
      baseUrl,
      transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token))
    })
    const page = yield* api.tasks.listTasks({ urlParams: { status: "waiting-for-approval", limit: 20 } })
    return page.tasks.map((task) => `${task.taskId} (${task.agentId}, since ${task.createdAt})`)
  }).pipe(Effect.provide(FetchHttpClient.layer))
// #endregion
