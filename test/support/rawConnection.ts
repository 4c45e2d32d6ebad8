/**
 * A raw WebSocket to a platform on 127.0.0.1 with agent-1's token (the test suites' `tokens`), for tests that
 * speak the protocol's frames themselves: the frames it reads, in order, and a wait for one.
 */
import { Effect } from "effect"
import { WebSocket } from "ws"

/** A frame the platform wrote, as the tests read it. */
export interface Frame {
  readonly id?: number
  readonly events?: ReadonlyArray<{ readonly _tag: string; readonly taskId: string; readonly toolCallId?: string }>
}

/** Opened in the scope, closed with it. */
export const rawConnection = (url: string) =>
  Effect.map(
    Effect.acquireRelease(
      Effect.promise(() =>
        new Promise<WebSocket>((resolve, reject) => {
          const socket = new WebSocket(url, { headers: { authorization: "Bearer tok-1" } })
          socket.once("open", () => resolve(socket))
          socket.once("error", reject)
        })
      ),
      (socket) => Effect.sync(() => socket.close())
    ),
    (socket) => {
      const frames: Array<Frame> = []
      socket.on("message", (data) => frames.push(JSON.parse(String(data)) as Frame))
      const send = (frame: unknown) => socket.send(typeof frame === "string" ? frame : JSON.stringify(frame))
      /** The first frame read (or to come) that `found` takes; a defect naming `what` after 10 s. */
      const waitFor = (what: string, found: (frame: Frame) => boolean) =>
        Effect.promise(() =>
          new Promise<Frame>((resolve) => {
            const timer = setInterval(() => {
              const frame = frames.find(found)
              if (frame === undefined) return
              clearInterval(timer)
              resolve(frame)
            }, 5)
          })
        ).pipe(
          Effect.timeout("10 seconds"),
          Effect.orElse(() => Effect.dieMessage(`no frame: ${what}; read ${JSON.stringify(frames)}`))
        )
      return { socket, frames, send, waitFor }
    }
  )
