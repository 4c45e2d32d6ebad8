/**
 * Where the operator API (docs: operations) meets the platform's `node:http` server (WebSocket.ts): a request
 * listener for the paths under `/api/v1`, made once the server knows where it listens. The embedded platform
 * (Handlers.ts) and a cluster's runner (Cluster.ts) provide it when they have operator tokens; without it, the
 * server answers those paths as any other.
 */
import { Context, type Effect, type Scope } from "effect"
import type { IncomingMessage, ServerResponse } from "node:http"

/** Where the API's routes are, on the platform's port. */
export const prefix = "/api/v1"

/** Whether a request's target (`request.url`) is one of the API's. */
export const isOperatorPath = (url: string | undefined): boolean =>
  url !== undefined && (url === prefix || url.startsWith(`${prefix}/`) || url.startsWith(`${prefix}?`))

/** Where the console's pages are (docs: console), served by the API's listener when the platform has the console. */
export const consolePrefix = "/console"

/** Whether a request's target is the console's. */
export const isConsolePath = (url: string | undefined): boolean =>
  url !== undefined &&
  (url === consolePrefix || url.startsWith(`${consolePrefix}/`) || url.startsWith(`${consolePrefix}?`))

/** What the server tells the API: where it listens (known once it does), and each agent's open connections. */
export interface Served {
  readonly address: () => { readonly host: string; readonly port: number }
  readonly connections: (agentId: string) => number
}

/** The operator API's request listener, made for the server that serves it. */
export class OperatorListener extends Context.Tag("agent-tools/platform/OperatorListener")<OperatorListener, {
  readonly listener: (
    served: Served
  ) => Effect.Effect<(request: IncomingMessage, response: ServerResponse) => void, never, Scope.Scope>
}>() {}
