/**
 * The MCP face beside the SDK it stands on: the same `add` tool over stdio, served by ours
 * (`Mcp.serveStdio`, test/bench/mcpServer.ts) and by the SDK's own `McpServer` with zod, each in a
 * child process, driven by the official client (`Client` over `StdioClientTransport`) in this one.
 * Per server: the mean time of a call made one after another, and calls per second with 64 in
 * flight. Both servers are started and warmed, then measured in alternating rounds; each figure is
 * the median round's. Beside them, on Linux, the CPU each server process used a call (user and
 * system, from /proc), which the other processes of a busy machine move less than the wall time.
 * Run with `npm run bench` or `npx tsx test/bench/mcp.ts`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { report } from "./report.js"

const sequentialCalls = 2_000
const inFlight = 64
const wideCalls = 20_000
const rounds = 5
const servers = ["ours", "sdk"] as const
type ServerName = typeof servers[number]

interface Figures {
  /** Microseconds a call, one after another. */
  readonly sequential: number
  readonly callsPerSecond: number
  /** The server process's CPU microseconds a call, over both measures. */
  readonly cpu: number | undefined
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

interface Connected {
  readonly client: Client
  /** The server process's CPU time so far, in microseconds; undefined where /proc is not. */
  readonly cpu: () => number | undefined
}

/** A client of `server`, spawned as an MCP client spawns a stdio server. */
const connect = async (server: ServerName): Promise<Connected> => {
  const client = new Client({ name: "bench", version: "0.1.0" })
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ["--import", "tsx", "test/bench/mcpServer.ts", `--server=${server}`],
    cwd: fileURLToPath(new URL("../..", import.meta.url)),
    stderr: "inherit"
  })
  await client.connect(transport)
  const pid = transport.pid
  return { client, cpu: () => pid === null ? undefined : cpuMicros(pid) }
}

/** utime + stime of a process, from /proc/<pid>/stat (clock ticks of 10 ms on Linux). */
const cpuMicros = (pid: number): number | undefined => {
  try {
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return undefined
  }
}

let n = 0
const call = async (client: Client): Promise<void> => {
  const a = n++
  const result = await client.callTool({ name: "add", arguments: { a, b: 1 } })
  const sum = (result.structuredContent as { result?: unknown } | undefined)?.result
  if (result.isError === true || sum !== a + 1) throw new Error(`a wrong answer: ${JSON.stringify(result)}`)
}

const sequential = async (client: Client, calls: number): Promise<number> => {
  const t0 = performance.now()
  for (let i = 0; i < calls; i++) await call(client)
  return (performance.now() - t0) * 1000 / calls
}

const wide = async (client: Client, calls: number): Promise<number> => {
  let left = calls
  const worker = async () => {
    while (left > 0) {
      left--
      await call(client)
    }
  }
  const t0 = performance.now()
  await Promise.all(Array.from({ length: inFlight }, worker))
  return calls / ((performance.now() - t0) / 1000)
}

const main = async () => {
  const connected = { ours: await connect("ours"), sdk: await connect("sdk") }
  for (const server of servers) {
    await sequential(connected[server].client, 1_000)
    await wide(connected[server].client, 5_000)
  }
  const times = { ours: [] as Array<number>, sdk: [] as Array<number> }
  const rates = { ours: [] as Array<number>, sdk: [] as Array<number> }
  const cpus = { ours: [] as Array<number>, sdk: [] as Array<number> }
  for (let round = 0; round < rounds; round++) {
    // Each server goes first in every other round.
    for (const server of round % 2 === 0 ? servers : [...servers].reverse()) {
      const { client, cpu } = connected[server]
      const before = cpu()
      times[server].push(await sequential(client, sequentialCalls))
      rates[server].push(await wide(client, wideCalls))
      const after = cpu()
      if (before !== undefined && after !== undefined) cpus[server].push((after - before) / (sequentialCalls + wideCalls))
    }
  }
  await Promise.all([connected.ours.client.close(), connected.sdk.client.close()])
  if (process.env.BENCH_JSON !== "1") {
    for (const server of servers) {
      const seq = times[server].map((t) => t.toFixed(0)).join(", ")
      const wide = rates[server].map((r) => r.toFixed(0)).join(", ")
      const cpu = cpus[server].map((c) => c.toFixed(1)).join(", ")
      console.log(`${server}: sequential ${seq} us/call; ${inFlight} in flight ${wide} calls/s; server CPU ${cpu} us/call`)
    }
  }
  const figures = (server: ServerName): Figures => ({
    sequential: median(times[server]),
    callsPerSecond: median(rates[server]),
    cpu: cpus[server].length === 0 ? undefined : median(cpus[server])
  })
  const ours = figures("ours")
  const sdk = figures("sdk")
  report({
    bench: "mcp",
    measure: `add over stdio, official client, sequential, median of ${rounds} rounds of ${sequentialCalls}`,
    value: `${ours.sequential.toFixed(0)} us/call`,
    baseline: `${sdk.sequential.toFixed(0)} us/call (the SDK's McpServer with zod)`,
    ratio: `${(ours.sequential / sdk.sequential).toFixed(2)}x the SDK's`,
    target: "<= 1.1x"
  })
  report({
    bench: "mcp",
    measure: `add over stdio, official client, ${inFlight} in flight, median of ${rounds} rounds of ${wideCalls}`,
    value: `${ours.callsPerSecond.toFixed(0)} calls/s`,
    baseline: `${sdk.callsPerSecond.toFixed(0)} calls/s (the SDK's McpServer with zod)`,
    ratio: `${(ours.callsPerSecond / sdk.callsPerSecond).toFixed(2)} of the SDK's`,
    target: ">= 0.91 of the SDK's (within 1.1x)"
  })
  if (ours.cpu !== undefined && sdk.cpu !== undefined) {
    report({
      bench: "mcp",
      measure: "the server process's CPU a call (user + system), over both measures, median round",
      value: `${ours.cpu.toFixed(1)} us/call`,
      baseline: `${sdk.cpu.toFixed(1)} us/call (the SDK's McpServer with zod)`,
      ratio: `${(ours.cpu / sdk.cpu).toFixed(2)}x the SDK's`
    })
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
