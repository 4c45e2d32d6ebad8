/**
 * The sessions of each principal as its MCP tasks see them (design: MCP tasks): where `notifications/tasks/status`
 * goes when a task's status changes (every open session of the task's principal, on its stream for the server's
 * messages: the GET stream over HTTP), and whom a task's call asks (`UserPrompt`: an approval, `ask_user`) while the
 * task waits in `input_required`. A session counts once its client initialized, until its transport closed.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { ServerNotification, Task } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect, Exit, Option } from "effect"
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
  /** Whether a session of `principal` (`from` first) can be asked: its client declared elicitation. */
  readonly canAsk: (principal: string, from: Server | undefined) => boolean
  /**
   * The `UserPrompt` of task `taskId`: each question sent, as `elicitation/create` naming the task, to `from` while
   * it is open, else to the newest open session of `principal`; with none open, it waits for one (`waitMillis` at
   * most), and a session that closes before it answered leaves the question to the next. `status` is told when the task waits for the answer (`input_required`) and when it has it (`working`).
   */
  readonly prompt: (options: {
    readonly principal: string
    readonly taskId: string
    readonly from: Server | undefined
    readonly waitMillis: number
    readonly status: (waiting: string | undefined) => Effect.Effect<void>
  }) => UserPrompt["Type"]
}

const isOpen = (server: Server) => server.transport !== undefined

const canElicit = (server: Server) => server.getClientCapabilities()?.elicitation !== undefined

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

  const prompt: TaskSessions["prompt"] = ({ from, principal, status, taskId, waitMillis }) => {
    const session: Effect.Effect<Server, UserPromptError> = Effect.suspend(() => {
      const server = toAsk(principal, from)
      return server !== undefined ? Effect.succeed(server) : Effect.zipRight(nextSession(principal), session)
    }).pipe(
      Effect.timeoutFail({
        duration: waitMillis,
        onTimeout: () => new UserPromptError({ message: "no client of this task's principal connected to answer" })
      })
    )
    const askThrough = (server: Server, question: string) =>
      Effect.suspend(() => {
        if (!canElicit(server)) {
          return Effect.fail(new UserPromptError({ message: "no user is available: the client cannot be asked (no elicitation)" }))
        }
        const controller = new AbortController()
        const services = clientServices(server, {} as Extra, false, controller.signal, Context.empty(), taskId)
        const asked = Option.getOrThrow(Context.getOption(services, UserPrompt)).ask(question)
        return asked.pipe(Effect.onInterrupt(() => Effect.sync(() => controller.abort())))
      })
    /** A question whose session closed before it answered (the client gone, the server stopping) is asked again. */
    const ask = (question: string): Effect.Effect<string, UserPromptError> =>
      Effect.flatMap(session, (server) =>
        askThrough(server, question).pipe(
          Effect.catchAll((error) => isOpen(server) ? Effect.fail(error) : ask(question))
        ))
    return UserPrompt.of({
      ask: (question) =>
        Effect.zipRight(status(question), ask(question)).pipe(
          // Answered or not, the task works on; interrupted (the server stopping), it is still waiting for input.
          Effect.onExit((exit) => Exit.isInterrupted(exit) ? Effect.void : status(undefined))
        )
    })
  }

  const canAsk: TaskSessions["canAsk"] = (principal, from) => {
    const server = from !== undefined && isOpen(from) ? from : sessionsOf(principal).at(-1)
    return server !== undefined && canElicit(server)
  }

  return { attach, notify, touched, canAsk, prompt }
}
