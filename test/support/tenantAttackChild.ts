/**
 * A hostile client with a valid token, in a process of its own (its buffers and its work are not
 * the platform's): `CONNECTIONS` connections to `URL` with `TOKEN` (agent `agent-1`), each doing
 * `MODE`. Prints `open:<n>` once they are open, then what the mode prints, then `done`.
 *
 * - `deep`: for `SECONDS`, sends frames nested `DEPTH` deep, one after another's answer. Prints `frames:<n>`.
 * - `fragments`: sends a first fragment of `FRAGMENT_BYTES` and never the rest, answering pings, for
 *   at most `SECONDS`. Prints `held` once the platform has read every fragment (each answered a ping sent
 *   after it), and `closed:<code>` as each is closed.
 * - `tasks`: registers a tool `hold` answered in `HOLD_MILLIS` at most, then submits `BIG` tasks with
 *   prompts of `PROMPT_BYTES` and `SMALL` tasks with short ones, one at a time, each task's first
 *   answer awaited. Prints `outcomes:<JSON>`: `TaskStarted`, or the error's `_tag` (and `limit`).
 * - `probe`: the bystander (another agent's token): a `CompleteToolCall` with no results (outside the
 *   lifecycle budget, answered at once) every 20 ms until killed. Prints `rt:<ms>` for each round trip.
 * - `burst`: registers a tool and watches for tasks (`WatchAssignments`), prints `held`, submits one task whose
 *   model answers with `BURST` `exec_agent` calls of its own agent, and waits for its end. Prints
 *   `outcomes:<JSON>`: its last event's tag.
 * - `idle`: does nothing for `SECONDS` (another attack's baseline).
 * - `manifests`: registers `HUGE` processes (`huge-<i>`) with a manifest of `HUGE_TOOLS` tools of
 *   `HUGE_PADDING` bytes each, then `LARGE` (`large-<i>`) of `LARGE_TOOLS` of `LARGE_PADDING`. Prints
 *   `outcomes:<JSON>`: `accepted`, or the rules a `ManifestRejected` names.
 */
import { WebSocket } from "ws"

const env = (name: string, fallback: string) => process.env[name] ?? fallback
const url = env("URL", "")
const connections = Number(env("CONNECTIONS", "1"))
const seconds = Number(env("SECONDS", "3"))
const mode = env("MODE", "deep")

const open = () =>
  new Promise<WebSocket>((resolve, reject) => {
    const socket = new WebSocket(url, { headers: { authorization: `Bearer ${env("TOKEN", "")}` } })
    socket.once("open", () => resolve(socket))
    socket.once("error", reject)
  })

/** Sends `frame` again each time an answer comes, until `until`; counts what it sent. */
const deep = (socket: WebSocket, frame: string, until: number) =>
  new Promise<number>((resolve) => {
    let sent = 0
    const next = () => {
      if (Date.now() >= until || socket.readyState !== WebSocket.OPEN) return resolve(sent)
      sent++
      socket.send(frame)
    }
    socket.on("message", next)
    socket.on("close", () => resolve(sent))
    next()
  })

/** One call after another on `socket`: each call's first answer frame, parsed. */
const caller = (socket: WebSocket) => {
  let nextId = 0
  const waiting = new Map<number, (answer: Record<string, unknown>) => void>()
  socket.on("message", (data) => {
    const answer = JSON.parse(String(data)) as Record<string, unknown>
    const id = answer.id
    if (typeof id !== "number") return
    waiting.get(id)?.(answer)
    waiting.delete(id)
  })
  return (call: string, payload: unknown) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const id = ++nextId
      waiting.set(id, resolve)
      socket.send(JSON.stringify({ id, call, payload }))
    })
}

const entry = (name: string, padding: number, timeoutMillis = 30_000) => ({
  name,
  description: "Holds.",
  parameters: { type: "object", properties: { x: { type: "string", description: "y".repeat(padding) } } },
  output: {},
  timeoutMillis,
  retries: 0,
  idempotent: false
})

const errorOf = (answer: Record<string, unknown>) => answer.error as Record<string, unknown> | undefined

const tasks = async (socket: WebSocket) => {
  const call = caller(socket)
  const agent = { agentId: "agent-1", processId: "p1" }
  await call("Register", { ...agent, manifest: [entry("hold", 0, Number(env("HOLD_MILLIS", "5000")))], manifestHash: "h" })
  const prompt = "x".repeat(Number(env("PROMPT_BYTES", String(1024 * 1024))))
  const outcomes: Array<string> = []
  const submit = async (text: string) => {
    const answer = await call("SubmitTask", { ...agent, prompt: text, events: "calls" })
    const error = errorOf(answer)
    const events = answer.events as Array<{ _tag: string }> | undefined
    outcomes.push(error === undefined ? events?.[0]?._tag ?? "?" : `${error._tag}:${error.limit}`)
  }
  for (let i = 0; i < Number(env("BIG", "0")); i++) await submit(prompt)
  for (let i = 0; i < Number(env("SMALL", "0")); i++) await submit("go")
  console.log(`outcomes:${JSON.stringify(outcomes)}`)
}

const burst = async (socket: WebSocket) => {
  const call = caller(socket)
  const agent = { agentId: "agent-1", processId: "p1" }
  await call("Register", { ...agent, manifest: [entry("hold", 0)], manifestHash: "h" })
  // Watching: the platform gives this process the tasks the calls start (they need no call run).
  socket.send(JSON.stringify({ id: 900_000, call: "WatchAssignments", payload: agent }))
  await new Promise((resolve) => setTimeout(resolve, 300))
  const ended = new Promise<string>((resolve) =>
    socket.on("message", (data) => {
      const text = String(data)
      if (text.includes("\"id\":900001") && (text.includes("TaskCompleted") || text.includes("TaskFailed"))) {
        resolve(text.includes("TaskCompleted") ? "TaskCompleted" : "TaskFailed")
      }
    })
  )
  console.log("held")
  socket.send(JSON.stringify({ id: 900_001, call: "SubmitTask", payload: { ...agent, prompt: "burst", events: "calls" } }))
  console.log(`outcomes:${JSON.stringify([await ended])}`)
}

const manifests = async (socket: WebSocket) => {
  const call = caller(socket)
  const manifest = (tools: string, padding: string) =>
    Array.from({ length: Number(env(tools, "1")) }, (_, i) => entry(`t${i}`, Number(env(padding, "0"))))
  const outcomes: Array<string> = []
  const register = async (processId: string, tools: ReturnType<typeof manifest>) => {
    const answer = await call("Register", { agentId: "agent-1", processId, manifest: tools, manifestHash: processId })
    const error = errorOf(answer)
    const violations = error?.violations as Array<{ rule: string }> | undefined
    outcomes.push(error === undefined ? "accepted" : violations?.map((v) => v.rule).join(",") ?? String(error._tag))
  }
  const huge = manifest("HUGE_TOOLS", "HUGE_PADDING")
  for (let i = 0; i < Number(env("HUGE", "0")); i++) await register(`huge-${i}`, huge)
  const large = manifest("LARGE_TOOLS", "LARGE_PADDING")
  for (let i = 0; i < Number(env("LARGE", "0")); i++) await register(`large-${i}`, large)
  console.log(`outcomes:${JSON.stringify(outcomes)}`)
}

const probe = async (socket: WebSocket) => {
  const call = caller(socket)
  while (true) {
    const started = performance.now()
    await call("CompleteToolCall", { agentId: "agent-2", processId: "p", results: [] })
    console.log(`rt:${(performance.now() - started).toFixed(3)}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const fragments = async (sockets: ReadonlyArray<WebSocket>, until: number) => {
  const fragment = Buffer.alloc(Number(env("FRAGMENT_BYTES", String(2 * 1024 * 1024 - 1024))), "a")
  const closed = sockets.map((socket) =>
    new Promise<void>((resolve) => {
      socket.on("close", (code) => {
        console.log(`closed:${code}`)
        resolve()
      })
    })
  )
  for (const socket of sockets) socket.send(fragment, { fin: false, binary: false })
  // A ping after each fragment: its pong comes once the platform has read the whole fragment.
  void Promise.all(sockets.map((socket) =>
    new Promise<void>((resolve) => {
      socket.once("pong", () => resolve())
      socket.ping()
    })
  )).then(() => console.log("held"))
  await Promise.race([Promise.all(closed), new Promise((resolve) => setTimeout(resolve, until - Date.now()))])
}

const main = async () => {
  const sockets = await Promise.all(Array.from({ length: connections }, open))
  console.log(`open:${sockets.length}`)
  const until = Date.now() + seconds * 1000
  if (mode === "deep") {
    const depth = Number(env("DEPTH", "1000000"))
    const frame = "[".repeat(depth) + "]".repeat(depth)
    const sent = await Promise.all(sockets.map((socket) => deep(socket, frame, until)))
    console.log(`frames:${sent.reduce((a, b) => a + b, 0)}`)
  } else if (mode === "fragments") {
    await fragments(sockets, until)
  } else if (mode === "probe") {
    await probe(sockets[0]!)
  } else if (mode === "tasks") {
    await tasks(sockets[0]!)
  } else if (mode === "burst") {
    await burst(sockets[0]!)
  } else if (mode === "idle") {
    await new Promise((resolve) => setTimeout(resolve, until - Date.now()))
  } else {
    await manifests(sockets[0]!)
  }
  for (const socket of sockets) socket.terminate()
  console.log("done")
  process.exit(0)
}

main().catch((error: unknown) => {
  console.log(`error:${error instanceof Error ? error.message : String(error)}`)
  process.exit(0)
})
