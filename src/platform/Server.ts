/**
 * The platform (design: The platform): agents and their registered tools, tokens bound to agent ids, a lifecycle
 * budget per agent, and tasks run by the agent loop whose tool calls go out on the task's stream,
 * at least once. In memory, or with a journal (a SQLite file) from which a restarted platform
 * takes its unfinished tasks back. `layerHandlers` is the protocol's implementation, whatever the
 * transport; `layerWebSocket` serves it on a real WebSocket.
 *
 * The public face of the platform's parts, each a module of its own: its options and limits
 * (Options.ts), the agents (Agents.ts), the tasks (Tasks.ts), the parts in their start and stop
 * order (Parts.ts), the protocol's handlers (Handlers.ts), the WebSocket server (WebSocket.ts) and the
 * operator API it also serves (api/OperatorApi.ts, docs: operations).
 */
export {
  /** The journal's file could not be opened, prepared or read. */
  JournalUnavailable
} from "../Journal.js"
export {
  Operator,
  OperatorApi,
  OperatorBadRequest,
  OperatorConflict,
  OperatorForbidden,
  OperatorNotFound,
  OperatorNotImplemented,
  OperatorUnauthorized,
  OperatorUnavailable
} from "./api/OperatorApi.js"
export { layerHandlers, PlatformState } from "./Handlers.js"
export {
  /** Whether this process drains: readiness is false while it does. */
  Draining,
  layerDraining,
  livePath,
  Readiness,
  readyPath
} from "./Health.js"
export {
  /** The metrics on and served as Prometheus text at `/metrics` on the platform's port. */
  layerPrometheus,
  metricsPath,
  prometheusText
} from "./Metrics.js"
export {
  agentCallsProblem,
  type ConsoleOptions,
  type OperatorRole,
  operatorRoles,
  type OperatorToken,
  operatorTokensProblem,
  type Options,
  parseAgentCalls,
  parseOperatorTokens,
  parseTokens
} from "./Options.js"
export {
  defaultListenLimits,
  layerWebSocket,
  ListenError,
  Listening,
  type ListenOptions,
  path,
  url
} from "./WebSocket.js"
