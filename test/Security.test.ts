/**
 * Where the servers listen: the platform and MCP over HTTP bind to 127.0.0.1 unless told
 * otherwise, so another machine cannot reach them; told otherwise, they listen where told.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { HttpServer } from "@effect/platform"
import { connect } from "node:net"
import { networkInterfaces } from "node:os"
import { LanguageModel, Toolkit } from "../src/index.js"
import { Mcp } from "../src/exports/mcp.js"
import { PlatformServer } from "../src/exports/platform.js"
import { record } from "./support/figures.js"
import { add } from "./bench/tools.js"

/** This machine's addresses other machines would use (IPv4, not loopback). */
const outward = Object.values(networkInterfaces()).flat().flatMap((a) =>
  a !== undefined && a.family === "IPv4" && !a.internal ? [a.address] : []
)

/** Whether a TCP connection to host:port opens. */
const reachable = (host: string, port: number) =>
  Effect.async<boolean>((resume) => {
    const socket = connect({ host, port })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
  })

const platform = (host?: string) =>
  Effect.flatMap(
    Layer.build(
      PlatformServer.layerWebSocket(host === undefined ? { port: 0 } : { port: 0, host }).pipe(
        Layer.provide(PlatformServer.layerHandlers({ tokens: new Map([["tok", "agent"]]) })),
        Layer.provide(LanguageModel.layerScripted([]))
      )
    ),
    (context) => Effect.provide(PlatformServer.Listening, context)
  )

const mcp = (host?: string) =>
  Effect.gen(function*() {
    const toolkit = yield* Toolkit.make(add)
    const context = yield* Layer.build(Mcp.layerHttp(toolkit, host === undefined ? { port: 0 } : { port: 0, host }))
    const address = (yield* Effect.provide(HttpServer.HttpServer, context)).address
    return address._tag === "TcpAddress" ? { host: address.hostname, port: address.port } : { host: "", port: 0 }
  })

describe("servers listen on 127.0.0.1 unless told otherwise", () => {
  it.live("the platform and MCP over HTTP: reachable on loopback, not on this machine's other addresses", () =>
    Effect.gen(function*() {
      let refused = 0
      for (const [name, listening] of [["platform", yield* platform()], ["MCP over HTTP", yield* mcp()]] as const) {
        assert.strictEqual(listening.host, "127.0.0.1", `${name} listens on loopback`)
        assert.isTrue(yield* reachable("127.0.0.1", listening.port), `${name} answers on 127.0.0.1`)
        for (const address of outward) {
          assert.isFalse(yield* reachable(address, listening.port), `${name} is not reachable on ${address}`)
          refused++
        }
        record({ suite: "security", measure: `${name} listens on (default)`, value: listening.host, expected: "127.0.0.1" })
      }
      record({
        suite: "security",
        measure: "connections from this machine's other addresses refused",
        value: `${refused} of ${refused}`
      })
    }).pipe(Effect.scoped))

  it.live("told 0.0.0.0, both listen on every address", () =>
    Effect.gen(function*() {
      for (const listening of [yield* platform("0.0.0.0"), yield* mcp("0.0.0.0")]) {
        assert.strictEqual(listening.host, "0.0.0.0")
        for (const address of [...outward, "127.0.0.1"]) assert.isTrue(yield* reachable(address, listening.port), address)
      }
    }).pipe(Effect.scoped))
})
