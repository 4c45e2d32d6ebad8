/**
 * The MCP face beside the SDK it stands on: the same `add` tool over stdio, served by ours
 * (`Mcp.serveStdio`, test/bench/mcpServer.ts) and by the SDK's own `McpServer` with zod, each in a
 * child process, driven by the official client (`Client` over `StdioClientTransport`) in this one.
 * Both are started and warmed, then measured interleaved, so that a busy machine slows both alike:
 * sequential calls alternate between the two servers call by call (the median call's time), and
 * blocks of calls with 64 in flight alternate block by block (the median block's calls per second).
 * Beside them, on Linux, the CPU each server process used a call (user and system, from /proc); and
 * the same figures of ours with tracing disabled, a third server measured in the same turns: what
 * the call's span costs.
 * Run with `npm run bench` or `npx tsx test/bench/mcp.ts`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { report } from "./report.js"

const sequentialCalls = 5_000 // each server's, alternating call by call
const inFlight = 64
const wideBlocks = 10 // each server's, alternating block by block
const blockCalls = 2_000
const servers = ["ours", "untraced", "sdk"] as const
type ServerName = typeof servers[number]

interface Figures {
  /** The median call's microseconds, one after another. */
  readonly sequential: number
  /** The mean, for the record. */
  readonly sequentialMean: number
  /** The median block's. */
  readonly callsPerSecond: number
  /** The server process's CPU microseconds a call, sequential and with 64 in flight. */
  readonly cpu: { readonly sequential: number; readonly wide: number } | undefined
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

/** One call's microseconds. */
const timed = async (client: Client): Promise<number> => {
  const t0 = performance.now()
  await call(client)
  return (performance.now() - t0) * 1000
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

/** The servers in the `i`th of their six orders. */
const turn = (i: number): ReadonlyArray<ServerName> => {
  const [a, b, c] = servers
  const orders = [[a, b, c], [b, c, a], [c, a, b], [c, b, a], [b, a, c], [a, c, b]] as const
  return orders[i % orders.length]!
}

const main = async () => {
  const connected = { ours: await connect("ours"), untraced: await connect("untraced"), sdk: await connect("sdk") }
  for (const server of servers) {
    for (let i = 0; i < 1_000; i++) await call(connected[server].client)
    await wide(connected[server].client, 5_000)
  }
  const cpuNow = () => ({ ours: connected.ours.cpu(), untraced: connected.untraced.cpu(), sdk: connected.sdk.cpu() })
  const times = { ours: [] as Array<number>, untraced: [] as Array<number>, sdk: [] as Array<number> }
  const seqStart = cpuNow()
  for (let i = 0; i < sequentialCalls; i++) {
    // The servers take turns, in an order that changes every time.
    for (const server of turn(i)) {
      times[server].push(await timed(connected[server].client))
    }
  }
  const seqEnd = cpuNow()
  const rates = { ours: [] as Array<number>, untraced: [] as Array<number>, sdk: [] as Array<number> }
  const wideCpu = { ours: 0, untraced: 0, sdk: 0 }
  for (let block = 0; block < wideBlocks; block++) {
    for (const server of turn(block)) {
      const before = connected[server].cpu()
      rates[server].push(await wide(connected[server].client, blockCalls))
      wideCpu[server] += (connected[server].cpu() ?? 0) - (before ?? 0)
    }
  }
  await Promise.all(servers.map((server) => connected[server].client.close()))
  const figures = (server: ServerName): Figures => {
    const seqCpu = seqEnd[server] !== undefined && seqStart[server] !== undefined
      ? (seqEnd[server] - seqStart[server]) / sequentialCalls
      : undefined
    return {
      sequential: median(times[server]),
      sequentialMean: times[server].reduce((a, b) => a + b, 0) / times[server].length,
      callsPerSecond: median(rates[server]),
      cpu: seqCpu === undefined ? undefined : { sequential: seqCpu, wide: wideCpu[server] / (wideBlocks * blockCalls) }
    }
  }
  const ours = figures("ours")
  const untraced = figures("untraced")
  const sdk = figures("sdk")
  if (process.env.BENCH_JSON !== "1") {
    for (const server of servers) {
      const f = figures(server)
      const blocks = rates[server].map((r) => r.toFixed(0)).join(", ")
      const cpu = f.cpu === undefined ? "" : `; server CPU ${f.cpu.sequential.toFixed(1)} and ${f.cpu.wide.toFixed(1)} us/call`
      console.log(
        `${server}: sequential p50 ${f.sequential.toFixed(0)} us, mean ${f.sequentialMean.toFixed(0)} us; ` +
          `${inFlight} in flight, blocks of ${blockCalls}: ${blocks} calls/s${cpu}`
      )
    }
  }
  report({
    bench: "mcp",
    measure: `add over stdio, official client, sequential, p50 of ${sequentialCalls} calls alternating with the SDK's`,
    value: `${ours.sequential.toFixed(0)} us/call`,
    baseline: `${sdk.sequential.toFixed(0)} us/call (the SDK's McpServer with zod)`,
    ratio: `${(ours.sequential / sdk.sequential).toFixed(2)}x the SDK's`,
    target: "<= 1.1x"
  })
  report({
    bench: "mcp",
    measure: `add over stdio, official client, ${inFlight} in flight, median of ${wideBlocks} blocks of ${blockCalls}`,
    value: `${ours.callsPerSecond.toFixed(0)} calls/s`,
    baseline: `${sdk.callsPerSecond.toFixed(0)} calls/s (the SDK's McpServer with zod)`,
    ratio: `${(ours.callsPerSecond / sdk.callsPerSecond).toFixed(2)} of the SDK's`,
    target: ">= 0.91 of the SDK's (within 1.1x)"
  })
  if (ours.cpu !== undefined && sdk.cpu !== undefined) {
    report({
      bench: "mcp",
      measure: "the server process's CPU a call (user + system), sequential; 64 in flight",
      value: `${ours.cpu.sequential.toFixed(1)}; ${ours.cpu.wide.toFixed(1)} us/call`,
      baseline: `${sdk.cpu.sequential.toFixed(1)}; ${sdk.cpu.wide.toFixed(1)} us/call (the SDK's McpServer with zod)`,
      ratio: `${(ours.cpu.sequential / sdk.cpu.sequential).toFixed(2)}x; ${(ours.cpu.wide / sdk.cpu.wide).toFixed(2)}x`
    })
  }
  const cpu = untraced.cpu === undefined || sdk.cpu === undefined
    ? ""
    : `; server CPU ${(untraced.cpu.sequential / sdk.cpu.sequential).toFixed(2)}x, ${(untraced.cpu.wide / sdk.cpu.wide).toFixed(2)}x`
  report({
    bench: "mcp",
    measure: "ours with tracing disabled (no span a call): sequential p50; 64 in flight",
    value: `${untraced.sequential.toFixed(0)} us/call; ${untraced.callsPerSecond.toFixed(0)} calls/s`,
    baseline: `${sdk.sequential.toFixed(0)} us/call; ${sdk.callsPerSecond.toFixed(0)} calls/s (the SDK's McpServer with zod)`,
    ratio: `${(untraced.sequential / sdk.sequential).toFixed(2)}x; ${(untraced.callsPerSecond / sdk.callsPerSecond).toFixed(2)} of the SDK's${cpu}`
  })
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
