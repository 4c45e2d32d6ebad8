/** A TCP proxy on 127.0.0.1 whose connections a test can cut, as a network would. */
import { Effect } from "effect"
import { connect, createServer, type Socket } from "node:net"

export interface TcpProxy {
  readonly port: number
  /** Destroys every connection through the proxy; new ones are accepted as before. */
  readonly cut: () => number
  /** Destroys every connection through the proxy and refuses new ones (closed at once) until `up`: a host gone. */
  readonly down: () => number
  /** Accepts connections again after `down`. */
  readonly up: () => void
}

export const tcpProxy = (target: { readonly host: string; readonly port: number }) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ proxy: TcpProxy; close: () => Promise<void> }>((resolve) => {
        const sockets = new Set<Socket>()
        let refusing = false
        const cut = () => {
          const n = sockets.size
          for (const socket of sockets) socket.destroy()
          return n
        }
        const track = (socket: Socket) => {
          sockets.add(socket)
          socket.on("close", () => sockets.delete(socket))
          socket.on("error", () => socket.destroy())
        }
        const server = createServer((client) => {
          if (refusing) return void client.destroy()
          const upstream = connect(target.port, target.host)
          track(client)
          track(upstream)
          client.pipe(upstream)
          upstream.pipe(client)
          client.on("close", () => upstream.destroy())
          upstream.on("close", () => client.destroy())
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          const port = typeof address === "object" && address !== null ? address.port : 0
          resolve({
            proxy: {
              port,
              cut,
              down: () => {
                refusing = true
                return cut()
              },
              up: () => void (refusing = false)
            },
            close: () =>
              new Promise<void>((done) => {
                for (const socket of sockets) socket.destroy()
                server.close(() => done())
              })
          })
        })
      })
    ),
    ({ close }) => Effect.promise(close)
  ).pipe(Effect.map(({ proxy }) => proxy))
