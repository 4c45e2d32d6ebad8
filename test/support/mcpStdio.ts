/** Reading an MCP stdio server's answers from its stdout, for the stdio tests. */

export const initialized = { jsonrpc: "2.0", method: "notifications/initialized" }

/** The JSON-RPC answers on a stream, one a line, and a wait for the one with `id`; lines that are not JSON. */
export const answers = (stream: NodeJS.ReadableStream) => {
  const seen: Array<{ id?: unknown; result?: unknown; error?: unknown }> = []
  const noise: Array<string> = []
  const waiting = new Set<() => void>()
  let buffer = ""
  stream.on("data", (chunk) => {
    buffer += String(chunk)
    const lines = buffer.split("\n")
    buffer = lines.pop() ?? ""
    for (const line of lines) {
      if (line.trim() === "") continue
      try {
        seen.push(JSON.parse(line))
      } catch {
        noise.push(line)
      }
    }
    for (const wake of waiting) wake()
  })
  const answer = (id: number) =>
    new Promise<{ result?: unknown; error?: unknown }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to ${id} within 120 s`)), 120_000)
      const check = () => {
        const found = seen.find((message) => message.id === id)
        if (found === undefined) return
        waiting.delete(check)
        clearTimeout(timer)
        resolve(found)
      }
      waiting.add(check)
      check()
    })
  return { answer, noise }
}
