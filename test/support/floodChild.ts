/**
 * A hostile client for the flood test: upgrades with a token, then sends small invalid
 * frames as fast as the socket takes them for `SECONDS` and never reads an answer. Prints `sent:<n>`.
 */
import { connect } from "node:net"

const port = Number(process.env.PORT)
const seconds = Number(process.env.SECONDS ?? "3")
// One masked text frame (a zero mask leaves the payload as it is): 40 bytes that are not JSON.
const payload = Buffer.from("x".repeat(40))
const frame = Buffer.concat([Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]), payload])
const batch = Buffer.concat(Array.from({ length: 256 }, () => frame))

const socket = connect(port, "127.0.0.1", () => {
  socket.write(
    `GET /rpc HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nupgrade: websocket\r\nconnection: Upgrade\r\n` +
      `sec-websocket-key: ${Buffer.from("0123456789abcdef").toString("base64")}\r\nsec-websocket-version: 13\r\n` +
      `authorization: Bearer ${process.env.TOKEN}\r\n\r\n`
  )
  socket.once("data", () => {
    // Upgraded: from now on nothing is read.
    socket.pause()
    let sent = 0
    let flooding = true
    const pump = () => {
      while (flooding) {
        sent += 256
        if (!socket.write(batch)) return void socket.once("drain", pump)
      }
    }
    // The platform may stop reading: the end comes by the clock, not from the loop.
    setTimeout(() => {
      flooding = false
      console.log(`sent:${sent}`)
      socket.destroy()
      process.exit(0)
    }, seconds * 1000)
    pump()
  })
})
socket.on("error", (error) => {
  console.log(`error:${error.message}`)
  process.exit(0)
})
