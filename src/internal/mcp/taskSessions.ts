/**
 * The sessions of each principal as its MCP tasks see them (design: MCP tasks): where `notifications/tasks/status`
 * goes when a task's status changes (every open session of the task's principal, on its stream for the server's
 * messages: the GET stream over HTTP), and whom a task's call asks (`UserPrompt`: an approval, `ask_user`; `Sampling`:
 * the client's model) while the task waits in `input_required`. A session counts once its client initialized, until
 * its transport closed.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { ServerNotification, Task } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect, Exit } from "effect"
import { Sampling, SamplingError } from "../../Sampling.js"
import { UserPrompt, UserPromptError } from "../../UserPrompt.js"
import { clientServices, type Extra } from "./clientServices.js"

/** The open sessions of every principal. */
export interface TaskSessions {
  /** `server`, a session of `principal`: counted once its client initialized. */
  readonly attach: (principal: string, server: Server) => void
  /** `task`'s new status to every open session of `principal`; a session gone or a closed stream is skipped. */
  readonly notify: (principal: string, task: Task) => Effect.Effect<void>
  /** A request of `principal` came (a poll of its tasks): a question waiting for one of its sessions looks again. */
  readonly touched: (principal: string) => void
  /**
   * What task `taskId`'s call may ask: `UserPrompt` (by `elicitation/create`) and `Sampling` (by
   * `sampling/createMessage`), each request naming the task, sent to `from` while it is open, else to the newest open
   * session of `principal`; with none open, it waits for one (`waitMillis` at most), and a session that closes
   * before it answered leaves the request to the next. `status` is told when the task waits for an answer
   * (`input_required`, the question) and when it has it (`working`). `all`: both services, whatever the sessions
   * open now can do (a task taken back, whose client is to come back); else each only if the session that would be
   * asked now declared it, as for a call without a task.
   */
  readonly services: (options: {
    readonly principal: string
    readonly taskId: string
    readonly from: Server | undefined
    readonly waitMillis: number
    readonly all: boolean
    readonly status: (waiting: string | undefined) => Effect.Effect<void>
  }) => Context.Context<never>
}

const isOpen = (server: Server) => server.transport !== undefined

/** What a client declared it can be asked. */
type Capability = "elicitation" | "sampling"

const can = (server: Server, capability: Capability) => server.getClientCapabilities()?.[capability] !== undefined

/**
 * Whether a request sent now reaches the client: over Streamable HTTP, once its GET stream is open (the SDK's
 * transport would keep it for a replay no client asks for); stdio always.
 */
const reaches = (server: Server) => {
  const streams = (server.transport as { readonly _streamMapping?: ReadonlyMap<string, unknown> } | undefined)?._streamMapping
  return streams === undefined || streams.has("_GET_stream")
}

/** The sessions of every principal, kept in this process. */
export const make = (): TaskSessions => {
  const open = new Map<string, Set<Server>>()
  const waiting = new Map<string, Set<() => void>>()

  /** `principal`'s open sessions, newest last; the closed ones forgotten. */
  const sessionsOf = (principal: string): Array<Server> => {
    const all = open.get(principal)
    if (all === undefined) return []
    for (const server of all) if (!isOpen(server)) all.delete(server)
    if (all.size === 0) open.delete(principal)
    return [...all]
  }

  const touched: TaskSessions["touched"] = (principal) => {
    const wake = waiting.get(principal)
    waiting.delete(principal)
    for (const resume of wake ?? []) resume()
  }

  const attach: TaskSessions["attach"] = (principal, server) => {
    const before = server.oninitialized
    server.oninitialized = () => {
      before?.()
      // The closed sessions of every principal forgotten: the sessions kept are at most those open, and this one.
      for (const other of [...open.keys()]) sessionsOf(other)
      const all = open.get(principal) ?? new Set<Server>()
      open.set(principal, all.add(server))
      touched(principal)
    }
  }

  const notify: TaskSessions["notify"] = (principal, task) =>
    Effect.promise(() => {
      const notification: ServerNotification = { method: "notifications/tasks/status", params: task }
      return Promise.allSettled(sessionsOf(principal).map((server) => server.notification(notification)))
    })

  /** The session to ask: `from` while open, else the newest open one of `principal`; one a request reaches. */
  const toAsk = (principal: string, from: Server | undefined): Server | undefined =>
    from !== undefined && isOpen(from) && reaches(from) ? from : sessionsOf(principal).filter(reaches).at(-1)

  /** Until a session of `principal` initializes, or one of its requests comes. */
  const nextSession = (principal: string) =>
    Effect.async<void>((resume) => {
      const wake = () => resume(Effect.void)
      const all = waiting.get(principal) ?? new Set()
      waiting.set(principal, all.add(wake))
      return Effect.sync(() => void waiting.get(principal)?.delete(wake))
    })

  const services: TaskSessions["services"] = ({ all, from, principal, status, taskId, waitMillis }) => {
    const session = <E>(unavailable: (message: string) => E): Effect.Effect<Server, E> =>
      Effect.suspend(() => {
        const server = toAsk(principal, from)
        return server !== undefined ? Effect.succeed(server) : Effect.zipRight(nextSession(principal), session(unavailable))
      }).pipe(Effect.timeoutFail({ duration: waitMillis, onTimeout: () => unavailable("no client of this task's principal connected to answer") }))
    /**
     * `use` of the services a session gives (`clientServices`', naming the task), the task `input_required` with
     * `waiting` meanwhile; a session that closed before it answered (the client gone, the server stopping) leaves it
     * to the next one.
     */
    const through = <A, E>(
      capability: Capability,
      waiting: string,
      use: (services: Context.Context<never>) => Effect.Effect<A, E>,
      unavailable: (message: string) => E
    ): Effect.Effect<A, E> => {
      const once: Effect.Effect<A, E> = Effect.flatMap(session(unavailable), (server) =>
        Effect.suspend(() => {
          if (!can(server, capability)) return Effect.fail(unavailable(`the client cannot be asked (no ${capability})`))
          const controller = new AbortController()
          const given = clientServices(server, {} as Extra, false, controller.signal, Context.empty(), taskId)
          return use(given).pipe(Effect.onInterrupt(() => Effect.sync(() => controller.abort())))
        }).pipe(Effect.catchAll((error) => isOpen(server) ? Effect.fail(error) : once)))
      return Effect.zipRight(status(waiting), once).pipe(
        // Answered or not, the task works on; interrupted (the server stopping), it is still waiting for input.
        Effect.onExit((exit) => Exit.isInterrupted(exit) ? Effect.void : status(undefined))
      )
    }
    const prompt = UserPrompt.of({
      ask: (question) =>
        through("elicitation", question, (given) => Context.unsafeGet(given, UserPrompt).ask(question), (message) =>
          new UserPromptError({ message: `no user is available: ${message}` }))
    })
    const sampling = Sampling.of({
      ask: (text, ask) =>
        through("sampling", "waiting for the client's model", (given) => Context.unsafeGet(given, Sampling).ask(text, ask), (message) =>
          new SamplingError({ message: `no client model is available: ${message}` }))
    })
    const now = from !== undefined && isOpen(from) ? from : sessionsOf(principal).at(-1)
    const offers = (capability: Capability) => all || (now !== undefined && can(now, capability))
    const withPrompt = offers("elicitation") ? Context.make(UserPrompt, prompt) : Context.empty()
    return offers("sampling") ? Context.add(withPrompt, Sampling, sampling) : withPrompt
  }

  return { attach, notify, touched, services }
}
