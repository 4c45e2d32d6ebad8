/**
 * A hostile MCP server over stdio, written by hand (no SDK: the SDK's own server could not even
 * serialize what this one sends). What `tools/list` answers is chosen by the first argument:
 *
 * - `deep`: a tool whose input schema is nested 200,000 levels, beside an ordinary `ok`;
 * - `huge`: a tool whose input schema is about 9.4 MB of JSON, beside `ok`; `over`: 12 MB;
 * - `many`: 10,000 tools in one page;
 * - `cycle`: a tool whose input schema is a `$ref` cycle (X -> Y -> X), beside `ok`.
 *
 * Its tools (in every mode but `many`): `ok` answers "ran"; `flood` sends `count` log notifications
 * of `size` characters, then answers; `changes` sends `count` `tools/list_changed`, then answers;
 * `stats` answers the `tools/list` requests and `tools/call`s (by tool) it has seen, as JSON text.
 */
import { createInterface } from "node:readline"

const mode = process.argv[2] ?? "deep"
const seen = { lists: 0, calls: {} as Record<string, number> }

const object = (properties: string): string => `{"type":"object","properties":{${properties}}}`
const tool = (name: string, inputSchema: string): string =>
  `{"name":${JSON.stringify(name)},"description":"${name}","inputSchema":${inputSchema}}`

/** The tools every mode but `many` lists, after its own. */
const ordinary = ["ok", "flood", "changes", "stats"].map((name) => tool(name, object(`"count":{"type":"number"},"size":{"type":"number"}`)))

/** The page `tools/list` answers, as JSON text. */
const listing = (): string => {
  switch (mode) {
    case "deep": {
      const depth = 200_000
      const deep = `{"type":"object","properties":{"a":`.repeat(depth) + `{"type":"string"}` + "}}".repeat(depth)
      return `{"tools":[${[tool("deep", deep), ...ordinary].join(",")}]}`
    }
    case "huge":
    case "over": {
      // About 9.4 MB of JSON (under the SDK's 10 MiB message limit), or 12 MB (over it).
      const properties = Array.from({ length: mode === "huge" ? 85_000 : 110_000 }, (_, i) => `"p${i}":{"type":"string","description":"${"x".repeat(64)}"}`)
      return `{"tools":[${[tool("huge", object(properties.join(","))), ...ordinary].join(",")}]}`
    }
    case "many":
      return `{"tools":[${Array.from({ length: 10_000 }, (_, i) => tool(`t${i}`, object(`"a":{"type":"string"}`))).join(",")}]}`
    case "cycle": {
      const cycle = `{"type":"object","properties":{"a":{"$ref":"#/$defs/X"}},"$defs":{"X":{"$ref":"#/$defs/Y"},"Y":{"$ref":"#/$defs/X"}}}`
      return `{"tools":[${[tool("cycle", cycle), ...ordinary].join(",")}]}`
    }
    default:
      throw new Error(`no mode ${mode}`)
  }
}
const page = listing()

const send = (text: string): boolean => process.stdout.write(text + "\n")
const answer = (id: unknown, result: string): boolean => send(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${result}}`)
const text = (value: string): string => JSON.stringify({ content: [{ type: "text", text: value }] })

/** Writes `count` lines made by `line`, waiting for the pipe to drain when it is full. */
const sendAll = async (count: number, line: () => string): Promise<void> => {
  for (let i = 0; i < count; i++) {
    if (!send(line())) await new Promise((resolve) => process.stdout.once("drain", resolve))
  }
}

const call = async (id: unknown, name: string, args: { count?: number; size?: number }): Promise<void> => {
  seen.calls[name] = (seen.calls[name] ?? 0) + 1
  const count = args.count ?? 0
  switch (name) {
    case "flood": {
      const data = JSON.stringify("x".repeat(args.size ?? 10_000))
      await sendAll(count, () => `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":${data}}}`)
      answer(id, text("flooded"))
      return
    }
    case "changes":
      await sendAll(count, () => `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
      answer(id, text("changed"))
      return
    case "stats":
      answer(id, text(JSON.stringify(seen)))
      return
    default:
      answer(id, text("ran"))
  }
}

createInterface({ input: process.stdin }).on("line", (line) => {
  const message = JSON.parse(line) as { id?: unknown; method?: string; params?: Record<string, unknown> }
  switch (message.method) {
    case "initialize":
      return answer(message.id, JSON.stringify({
        protocolVersion: message.params?.protocolVersion,
        capabilities: { tools: { listChanged: true }, logging: {} },
        serverInfo: { name: "hostile", version: "1.0.0" }
      }))
    case "tools/list":
      seen.lists++
      return answer(message.id, page)
    case "tools/call": {
      const params = message.params as { name: string; arguments?: { count?: number; size?: number } }
      return void call(message.id, params.name, params.arguments ?? {})
    }
    default:
      if (message.id !== undefined) answer(message.id, "{}")
  }
})
